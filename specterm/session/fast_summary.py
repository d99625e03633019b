"""Whole-file figures, fast: ``summarize_file(path)`` → ``(SessionData, SessionSummary)``, what
``specterm replay --summary`` prints, without building an event object per token.

Speculative steps are nearly every line of a session (≈ 97 % of a 100,000-step file) and hold
nearly all of its objects (one per token). Here they are decoded by msgspec straight into slim
typed structs (``_SpecStep``, ``_Token``) and counted, instead of being validated into pydantic
events and then counted: a 100,000-step file is summarised in about the time the pydantic reader
takes to parse it (``benchmarks/session_summary.py`` compares both against a bare parse).

Why msgspec, not orjson: orjson is as fast a parser but only yields dicts, which would still need
validating (by pydantic: the cost this avoids) or trusting (an untrusted file). msgspec validates the
types while it decodes, in C, against the structs below, which mirror ``events.SpecStep`` and
``events.Token`` field for field (``tests/test_session_summary.py`` checks they stay in step).

Same policy as ``read_session``, line by line: any line msgspec does not decode as a spec step
(another event type, a bad line, a value msgspec is stricter about than pydantic, e.g. ``1.0`` for an
int) goes through the reader's own pydantic path, which accepts, warns or skips exactly as it does
for the dashboard. Files in an older format version go through that path entirely (migrations
work on dicts). ``data.events`` stays empty: the events are counted, not kept.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import msgspec

from specterm.diagnose import Diagnoser, Thresholds
from specterm.events import BaseEvent, Event, Lane, Verdict
from specterm.session.reader import MAX_LINE_BYTES, SessionData, SessionReader
from specterm.stats import SessionSummary


class _Token(msgspec.Struct, kw_only=True):
    id: int
    text: str
    verdict: Verdict
    forced: bool = False
    grammar: bool = False


class _SpecStep(msgspec.Struct, kw_only=True, tag_field="type", tag="spec_step"):
    t: float = 0.0
    lane: Lane | None = None
    request_id: str
    index: int
    drafted: list[int] = []
    accepted: int = 0
    tokens: list[_Token] = []
    rejected: list[int] = []
    rejected_text: list[str] = []
    invalid_drafts: int = 0
    grammar_drafts: int = 0
    draft_passes: int | None = None
    dropped_drafts: int = 0
    wall_s: float = 0.0
    batch_size: int | None = None

    @property
    def k(self) -> int:
        return len(self.drafted) + self.invalid_drafts


class SummaryReader(SessionReader):
    """A ``SessionReader`` that adds every event to ``summary`` instead of keeping it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_line_bytes: int = MAX_LINE_BYTES,
        thresholds: Thresholds | None = None,
    ) -> None:
        super().__init__(path, max_line_bytes=max_line_bytes)
        self.summary = SessionSummary()
        self.diagnoser = Diagnoser(thresholds)
        """The detectors, run on the file's events as every replay runs them (recorded findings are
        dropped for theirs: ``diagnose.diagnosing``)."""
        self._all_times: list[float] = []
        self._last: str | None = None

    def _times(self) -> list[float]:
        return self._all_times

    def _last_type(self) -> str | None:
        return self._last

    def _taker(self, new: list[Event]) -> Callable[[bytes, int], None]:
        others: list[Event] = []
        slow = super()._taker(others)  # the reader's own path: validates, or warns and skips
        summary, times = self.summary, self._all_times
        feed, feed_step, found = self.diagnoser.feed, self.diagnoser.step, summary.findings
        request, walls, accepts = summary.request, summary.step_wall_s, summary.step_accept

        def add(event: BaseEvent) -> None:
            if event.type != "finding":  # recomputed here, as a replay does
                summary.add(event)
                found.extend(feed(event))

        def add_step(step: _SpecStep) -> None:
            # Per request only (what SessionSummary.add_step does, minus the session scope): the
            # session's counts are its requests' merged once at the end, which halves the work.
            req = request(step.request_id)
            req.stats.add_step(step)
            req.tracker.count(step, (req.stats.where,))
            walls.append(step.wall_s)
            if step.drafted:
                accepts.append(step.accepted / len(step.drafted))
            found.extend(feed_step(step))

        if self._upgrade is not None:  # an older format: migrations need dicts, all goes the slow way

            def take(line: bytes, number: int) -> None:
                slow(line, number)
                if others:
                    event = others.pop()
                    add(event)
                    times.append(event.t)
                    self._last = event.type

            return take

        decode = msgspec.json.Decoder(_SpecStep).decode
        errors = (msgspec.ValidationError, msgspec.DecodeError)

        def take(line: bytes, number: int) -> None:
            try:
                step = decode(line)
            except errors:
                slow(line, number)
                if others:
                    event = others.pop()
                    # A spec step msgspec was stricter about is counted like the others (per request).
                    add_step(event) if event.type == "spec_step" else add(event)
                    times.append(event.t)
                    self._last = event.type
                return
            add_step(step)
            times.append(step.t)
            self._last = "spec_step"

        return take

    def close(self) -> None:
        if self._stream is not None and self.done and self._upgrade is None:
            # Spec steps were counted per request only; other events (none count session-wide
            # verdicts) went through summary.add. The session is its requests merged.
            summary = self.summary
            for rid, req in summary.requests.items():
                summary.session.merge(req.stats)
                replica = summary.replica_of.get(rid)  # a fleet's: its replica's session too
                if replica is not None:
                    summary.replicas[replica].session.merge(req.stats)
        super().close()


def summarize_file(
    path: str | os.PathLike[str], *, max_line_bytes: int = MAX_LINE_BYTES, thresholds: Thresholds | None = None
) -> tuple[SessionData, SessionSummary]:
    """The file's header, warnings and figures (``summarize(read_session(path).events)``, faster),
    findings included. Raises ``SessionFileError`` as ``read_session`` does."""
    with SummaryReader(path, max_line_bytes=max_line_bytes, thresholds=thresholds) as reader:
        reader.read()
    return reader.data, reader.summary
