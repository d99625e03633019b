"""The server's requests, for ``specterm attach``: newest first, each with its replica·rank (a fleet),
its conversation step and state; choosing one pins the panels' "request" column to it and scrolls the
transcript to it, and "follow newest" goes back to following whatever the server runs last.

Rebuilt only when a request starts or finishes (``sync`` is called once per drained batch and compares
a counter), never per token: a busy server streams thousands of steps a second."""

from __future__ import annotations

import itertools

from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from specterm.events import BaseEvent, RequestFinished, RequestStarted
from specterm.stats import fmt_opt
from specterm.ui.state import ViewState

FOLLOW = "\0follow"
SHOWN = 200
"""Newest requests listed; older ones stay in the transcript and the session numbers."""


class RequestList(OptionList):
    DEFAULT_CSS = """
    RequestList { height: auto; max-height: 12; border: round $primary 50%; border-title-color: $primary;
                  border-title-style: bold; padding: 0 1; }
    """

    class Picked(Message):
        def __init__(self, request_id: str | None) -> None:
            super().__init__()
            self.request_id = request_id

    def __init__(self, state: ViewState, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state
        self.border_title = "requests"
        self._started: dict[str, RequestStarted] = {}
        self._finished: dict[str, RequestFinished] = {}
        self._version = 0
        self._shown = -1

    def note(self, ev: BaseEvent) -> None:
        """Called for every event (cheap): remember starts and ends."""
        if isinstance(ev, RequestStarted):
            self._started[ev.request_id] = ev
            self._version += 1
        elif isinstance(ev, RequestFinished):
            self._finished[ev.request_id] = ev
            self._version += 1

    def sync(self) -> None:
        if self._version == self._shown:
            return
        self._shown = self._version
        pinned = self.state.pinned_request
        options = [Option(("● " if pinned is None else "○ ") + "follow newest", id=FOLLOW)]
        replica, of = self.state.replica_filter, self.state.summary.replica_of
        shown = (rid for rid in reversed(self._started) if replica is None or of.get(rid) == replica)
        for rid in itertools.islice(shown, SHOWN):
            options.append(Option(self._label(rid, rid == pinned), id=rid))
        highlighted = self.highlighted
        self.set_options(options)
        if highlighted is not None and highlighted < len(options):
            self.highlighted = highlighted
        running = sum(1 for r in self._started if r not in self._finished)
        self.border_subtitle = f"{running} running · {len(self._started)} seen"
        self.border_title = "requests" if replica is None else f"requests of {replica}"

    def refilter(self) -> None:
        """The fleet list chose another replica (``state.replica_filter``): list its requests."""
        self._version += 1
        self.sync()

    def _label(self, rid: str, pinned: bool) -> str:
        start, done = self._started[rid], self._finished.get(rid)
        conv = f"{start.conversation}·{start.turn}" if start.conversation else rid[-6:]
        stats = self.state.summary.requests.get(rid)
        rate = fmt_opt(
            None if stats is None or stats.stats.acceptance_rate is None else 100 * stats.stats.acceptance_rate, ".0f"
        )
        state = "running" if done is None else (done.finish_reason or "done")
        # a fleet: which replica·rank ran it (the requests of one server need no such column)
        where = f"{start.replica} " if start.replica and len(self.state.summary.replicas) > 1 else ""
        return f"{'● ' if pinned else ''}{where}{conv} {state} {rate}%"

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        rid = None if event.option.id == FOLLOW else event.option.id
        self.state.pinned_request = rid
        self._version += 1
        self.sync()
        self.post_message(self.Picked(rid))
