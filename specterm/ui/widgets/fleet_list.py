"""The fleet's schedulers side by side (``specterm attach`` of several servers or DP ranks, and its
replay): per replica·rank its k, acceptance rate, mean acceptance length, served tokens/s and, where
the server sent its model size, the weight bytes read per emitted token. Choosing one narrows the
requests list to that replica's requests; "all replicas" widens it again.

Hidden until a second replica is seen: one server looks as it always did. The figures are each
replica's own ``SessionSummary`` (``stats.SessionSummary.replicas``), so they mean what the panels'
session figures mean. Rebuilt at most once a second and only when a label changed."""

from __future__ import annotations

import time

from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from specterm.stats import SessionSummary, fmt_opt
from specterm.ui.state import ViewState

ALL = "\0all"
INTERVAL_S = 1.0
WIDE = 30
"""Inner width from which a row has room for k, tokens/s and weights per token."""


def _fmt_bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.0f}{unit}"
    return f"{n:.0f}B"


def replica_label(name: str, summary: SessionSummary, seen, width: int) -> str:
    """One replica's row, under the columns ``title`` names: ``NAME·RANK rate% len`` when narrow; k,
    served tokens/s and weight bytes per emitted token too when there is room."""
    stats = summary.session
    rate = fmt_opt(None if stats.acceptance_rate is None else 100 * stats.acceptance_rate, ".0f")
    length = fmt_opt(stats.mean_acceptance_length, ".1f")
    if width < WIDE:
        return f"{name} {rate}% {length}"
    k = ((seen.speculation or {}) if seen is not None else {}).get("num_speculative_tokens") or 0
    row = f"{name} k{k} {rate}% {length} {fmt_opt(summary.served_tokens_per_s(), '.1f')}"
    traffic = summary.weight_traffic({"weight_bytes": seen.weight_bytes} if seen is not None else None)
    return row + (f" {_fmt_bytes(traffic.per_token)}" if traffic is not None else " –")


def title(width: int) -> str:
    """The columns of ``replica_label``'s rows, in the border."""
    if width < WIDE:
        return "replicas: acc len" if width >= 18 else "replicas"
    return "replicas: k acc len tok/s weights/tok"


class FleetList(OptionList):
    DEFAULT_CSS = """
    FleetList { height: auto; max-height: 10; border: round $primary 50%; border-title-color: $primary;
                border-title-style: bold; padding: 0 1; display: none; }
    FleetList.-shown { display: block; }
    """

    class Picked(Message):
        def __init__(self, replica: str | None) -> None:
            super().__init__()
            self.replica = replica

    def __init__(self, state: ViewState, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state
        self.border_title = "replicas"
        self._labels: list[tuple[str, str]] = []
        self._last = 0.0

    def sync(self, force: bool = False) -> None:
        """Called once per drained batch: rebuilt when a second has passed and a row changed."""
        replicas = self.state.summary.replicas
        if len(replicas) < 2:
            self.remove_class("-shown")
            return
        now = time.monotonic()
        if not force and now - self._last < INTERVAL_S and len(replicas) == len(self._labels) - 1:
            return
        self._last = now
        self.add_class("-shown")
        width = max(self.size.width - 4, 0) or WIDE
        self.border_title = title(width)
        chosen = self.state.replica_filter
        labels = [(ALL, ("● " if chosen is None else "○ ") + "all replicas")]
        for name in sorted(replicas):
            mark = "● " if name == chosen else ""
            summary, seen = replicas[name], self.state.summary.replica_seen.get(name)
            labels.append((name, mark + replica_label(name, summary, seen, width)))
        if labels == self._labels:
            return
        self._labels = labels
        highlighted = self.highlighted
        self.set_options([Option(text, id=rid) for rid, text in labels])
        if highlighted is not None and highlighted < len(labels):
            self.highlighted = highlighted
        self.border_subtitle = f"{len(replicas)} schedulers"

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        replica = None if event.option.id == ALL else event.option.id
        self.state.replica_filter = replica
        self.sync(force=True)
        self.post_message(self.Picked(replica))
