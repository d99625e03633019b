"""The headless event sink: a verdict-styled token stream and one-line summaries on a terminal.

Shared by ``specterm run`` and ``specterm replay --headless`` so both print the same thing. All text
from events is untrusted and goes through ``render.inert`` inside ``rich.text.Text`` (no markup).
"""

from __future__ import annotations

import json
import sys

from rich.console import Console
from rich.text import Text

from specterm.events import (
    AgentStepFinished,
    AgentStepStarted,
    BaseEvent,
    EngineCounters,
    Error,
    Finding,
    RequestFinished,
    RequestStarted,
    Retrieval,
    SpecStep,
    ToolCall,
    ToolResult,
    UserMessage,
    dump_event,
)
from specterm.render import inert, legend_text, step_text
from specterm.stats import SessionSummary, SpecStats, fmt_opt, tokens_per_s


def summary_line(stats: SpecStats, wall_s: float | None = None) -> Text:
    rate = stats.acceptance_rate
    parts = [
        f"{stats.tokens} tokens",
        f"acceptance {fmt_opt(None if rate is None else 100 * rate, '.1f')}%",
        f"mean acceptance length {fmt_opt(stats.mean_acceptance_length)}",
    ]
    if (rate_s := tokens_per_s(stats.tokens, wall_s)) is not None:
        parts.append(f"{rate_s:.1f} tok/s")
    counts = " ".join(f"{k} {v}" for k, v in stats.by_verdict.items())
    return Text(" · ".join(parts) + f"  [{counts}; rejected {stats.rejected}]", style="dim")


FINDING_STYLES = {"error": "bold red", "warning": "yellow", "info": "dim"}


def finding_text(finding: Finding) -> Text:
    """One finding as a line: ``⚑ kind: message`` (a mismatch in red), for the headless stream and
    ``replay --summary``."""
    return Text(f"⚑ {finding.kind}: {inert(finding.message)}", style=FINDING_STYLES[finding.severity])


class HeadlessPrinter:
    """Event sink for a terminal. ``json=True`` prints one event per line instead (for ``jq``)."""

    def __init__(
        self,
        console: Console | None = None,
        *,
        json: bool = False,
        show_rejected: bool = False,
        err_console: Console | None = None,
    ) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.err = err_console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.json = json
        self.show_rejected = show_rejected
        self.summary = SessionSummary()
        self.warnings: list[str] = []
        self._mid_line = False

    def _line(self, text: Text) -> None:
        if self._mid_line:
            self.console.print()
            self._mid_line = False
        self.console.print(text)

    def __call__(self, event: BaseEvent) -> None:
        self.summary.add(event)
        if isinstance(event, Error):
            self.warnings.append(event.message)
            if self._mid_line:
                self.console.print()
                self._mid_line = False
            self.err.print(Text(f"specterm: {event.level}: {inert(event.message)}"))
        if self.json:
            sys.stdout.write(dump_event(event) + "\n")
            sys.stdout.flush()
            return
        if isinstance(event, SpecStep):
            self.console.print(step_text(event, show_rejected=self.show_rejected), end="")
            self.console.file.flush()
            self._mid_line = True
        elif isinstance(event, UserMessage):
            self._line(Text("> ", style="bold") + Text(inert(event.text)))
        elif isinstance(event, AgentStepStarted):
            self._line(Text(f"── step {event.step}: {event.kind}", style="bold"))
        elif isinstance(event, Retrieval):
            for p in event.passages:
                self._line(Text(f"  [{p.score:.2f}] {inert(p.doc)}: {inert(p.text[:100])}", style="dim"))
        elif isinstance(event, ToolCall):
            # The raw JSON was just streamed token by token above; show the parsed call once.
            args = json.dumps(event.arguments, ensure_ascii=False)
            self._line(Text(f"  → {inert(event.name)}({inert(args)})"))
        elif isinstance(event, ToolResult):
            body = event.content if event.ok else f"error: {event.error}"
            self._line(Text(f"  ← {inert(body[:400])}", style="dim" if event.ok else "red"))
        elif isinstance(event, AgentStepFinished) and event.answer is not None:
            self._line(Text("answer: " + inert(event.answer), style="bold"))
            if event.withheld is not None:
                self._line(
                    Text(
                        "⚠ withheld, the model's answer: "
                        + inert(event.withheld)
                        + "  ("
                        + inert(", ".join(event.ungrounded or []))
                        + " in no tool result)",
                        style="yellow",
                    )
                )
            elif event.ungrounded:
                self._line(
                    Text(
                        "⚠ ungrounded: " + inert(", ".join(event.ungrounded)) + " (in no tool result of this turn)",
                        style="bold red",
                    )
                )
        elif isinstance(event, Finding):
            self._line(finding_text(event))
        elif isinstance(event, EngineCounters) and not event.matched:
            self._line(Text(f"verdicts do NOT reconcile with vLLM: {inert(event.detail)}", style="bold red"))

    def finish(self, legend: bool = True) -> None:
        if self.json:
            return
        if self._mid_line:
            self.console.print()
            self._mid_line = False
        if legend:
            self.console.print(legend_text())
        # tok/s over the requests' own wall time (from request_finished), so a live run and its
        # replay print the same figure.
        walls = [r.wall_s for r in self.summary.requests.values() if r.wall_s]
        self.console.print(summary_line(self.summary.session, sum(walls) if walls else None))


class RequestBlockPrinter(HeadlessPrinter):
    """``attach --headless``: a server runs many requests at once, so each request's verdict-styled
    text is kept until it finishes and then printed as one block (header, text, summary); interleaved
    steps would be unreadable. ``--json`` prints every event as it comes, as ``HeadlessPrinter`` does."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._text: dict[str, Text] = {}
        self._started: dict[str, RequestStarted] = {}

    def __call__(self, event: BaseEvent) -> None:
        if self.json or not isinstance(event, (SpecStep, RequestStarted, RequestFinished)):
            super().__call__(event)
            return
        self.summary.add(event)
        if isinstance(event, RequestStarted):
            self._started[event.request_id] = event
            self._text[event.request_id] = Text()
        elif isinstance(event, SpecStep):
            self._text.setdefault(event.request_id, Text()).append_text(
                step_text(event, show_rejected=self.show_rejected)
            )
        else:
            self._block(event)

    def _block(self, done: RequestFinished) -> None:
        start = self._started.pop(done.request_id, None)
        parts = [done.request_id]
        if start is not None and start.conversation:
            parts.append(f"conversation {start.conversation} step {start.turn}")
        if start is not None:
            cached = f", {done.cached_tokens} cached" if done.cached_tokens is not None else ""
            parts.append(f"prompt {start.prompt_tokens} tokens{cached}")
        parts.append(f"finish {done.finish_reason or '?'}")
        self._line(Text("── " + " · ".join(parts), style="bold"))
        self.console.print(self._text.pop(done.request_id, Text()))
        req = self.summary.requests.get(done.request_id)
        if req is not None:
            line = summary_line(req.stats, done.wall_s or None)
            if done.ttft_s is not None:
                line.append(f"  TTFT {done.ttft_s * 1000:.0f} ms", style="dim")
            self.console.print(line)

    def finish(self, legend: bool = True) -> None:
        if self.json:
            return
        if legend:
            self.console.print(legend_text())
        n = len(self.summary.requests)
        self.console.print(
            Text(f"{n} request{'s' if n != 1 else ''} · ", style="dim") + summary_line(self.summary.session)
        )
