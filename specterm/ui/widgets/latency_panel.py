"""Latency: per agent step (time, TTFT, tokens, tok/s) and a sparkline of engine-step wall time.
Numbers from ``specterm.stats`` (``agent_steps``, ``step_wall_s``, per-request summaries)."""

from __future__ import annotations

import statistics

from rich.style import Style
from rich.text import Text

from specterm.stats import RequestSummary, fmt_opt, tokens_per_s
from specterm.ui.charts import sparkline
from specterm.ui.state import ViewState
from specterm.ui.widgets.panel import Panel

ROWS = 6
STEP_LABELS = {"validate": "check", "retrieve": "lookup", "tool_call": "call", "tool": "tool", "answer": "answer"}
"""What each agent step did, in a word that fits the column (``tool_call`` cut to "tool ca" said nothing)."""


def _label(step) -> str:
    """The step that answered is "answer" whatever it was generated as (the transcript's title too)."""
    return "answer" if step.answer is not None else STEP_LABELS.get(step.kind, step.kind)


def _secs(s: float) -> str:
    """At most 5 characters: ``0.05s``, ``3.86s``, ``12.3s``, ``124s``; columns never run together."""
    return f"{s:.2f}s" if s < 10 else (f"{s:.1f}s" if s < 100 else f"{s:.0f}s")


def _rate(rate: float | None) -> str:
    return fmt_opt(rate, ".1f" if rate is not None and rate < 100 else ".0f")


def _ttft(s: float | None) -> str:
    """At most 5 characters: ``307ms``, ``1.27s``."""
    return "–" if s is None else (f"{s * 1000:.0f}ms" if s < 1 else _secs(s))


def _request_lines(r: RequestSummary, width: int) -> list[str]:
    """One request's time, TTFT, tokens and rate: one line where it fits, else two (its times; its
    tokens), set closer where even those do not fit (80 columns), the unit of the rate last to go."""
    ttft = fmt_opt(None if r.ttft_s is None else r.ttft_s * 1000, ".0f")
    wall, tokens = r.wall_s or 0.0, r.stats.tokens
    parts = (f"{wall:.2f} s", f"TTFT {ttft} ms", f"{tokens} tok", f"{fmt_opt(r.tokens_per_s, '.1f')} tok/s")
    close = [f"{_secs(wall)} TTFT {_ttft(r.ttft_s)}", f"{tokens} tok {_rate(r.tokens_per_s)} tok/s"]
    for lines in ([" · ".join(parts)], [" · ".join(parts[:2]), " · ".join(parts[2:])], close):
        if max(map(len, lines)) <= width:
            return lines
    return [close[0], f"{tokens} tok {_rate(r.tokens_per_s)}/s"]


class LatencyPanel(Panel):
    def __init__(self, state: ViewState, *, id: str | None = None) -> None:
        super().__init__("latency", id=id)
        self.state = state

    def body(self, styles: dict[str, Style], width: int) -> Text:
        summary = self.state.summary
        out = Text(no_wrap=True, overflow="ellipsis")
        compact = width < 30
        rows = summary.agent_steps[-(3 if compact else ROWS) :]
        if rows and compact:
            # Narrow layout (80x24): time and tok/s only.
            out.append(f"{'step':<8} {'time':>5} {'tok/s':>5}\n", styles["meta"])
            for s in rows:
                rate = tokens_per_s(s.tokens, s.latency_s)
                out.append(f"{s.step} {_label(s)}"[:8].ljust(9), styles["meta"] if s.ok else styles["error"])
                out.append(f"{_secs(s.latency_s):>5} {_rate(rate):>5}\n", styles["body"])
        elif rows:
            out.append(f"{'step':<9} {'time':>5} {'TTFT':>5} {'tok':>4} {'tok/s':>5}\n", styles["meta"])
            for s in rows:
                rate = tokens_per_s(s.tokens, s.latency_s)
                label = f"{s.step} {_label(s)}"[:9]
                out.append(f"{label:<9} ", styles["meta"] if s.ok else styles["error"])
                out.append(
                    f"{_secs(s.latency_s):>5} {_ttft(s.ttft_s):>5} {s.tokens or '–':>4} {_rate(rate):>5}\n",
                    styles["body"],
                )
        else:
            # No agent: per request instead (plain chat, `run` sessions).
            done = [r for r in summary.requests.values() if r.wall_s]
            if done:
                picked = summary.requests.get(self.state.pinned_request or "")
                r = picked if picked is not None and picked.wall_s else done[-1]
                out.append("picked request\n" if r is picked else "last request\n", styles["meta"])
                out.append("\n".join(_request_lines(r, width)) + "\n", styles["body"])
                if len(done) > 1:  # a server's many requests (attach): their medians
                    ttfts = [x.ttft_s for x in done if x.ttft_s is not None]
                    ttft = statistics.median(ttfts) if ttfts else None
                    ttft_ms = None if ttft is None else ttft * 1000
                    out.append(
                        f"{len(done)} req median\n" if compact else f"{len(done)} requests, median\n", styles["meta"]
                    )
                    out.append(
                        f"{_secs(statistics.median(x.wall_s for x in done))} TTFT {_ttft(ttft)}\n"
                        if compact
                        else f"{statistics.median(x.wall_s for x in done):.2f} s · TTFT {fmt_opt(ttft_ms, '.0f')} ms\n",
                        styles["body"],
                    )
        walls = summary.step_wall_s
        if walls:
            mean_ms = sum(walls) / len(walls) * 1000
            label = (
                f"step ms {mean_ms:.1f}"
                if compact
                else f"engine step ms: mean {mean_ms:.1f} last {walls[-1] * 1000:.1f}"
            )
            out.append(label + "\n", styles["meta"])
            out.append(sparkline(walls, width, lo=0.0), styles["title"])
        elif not rows:
            out.append("no steps yet", styles["meta"])
        return out
