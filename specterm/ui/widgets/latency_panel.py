"""Latency: per agent step (time, TTFT, tokens, tok/s) and a sparkline of engine-step wall time.
Numbers from ``specterm.stats`` (``agent_steps``, ``step_wall_s``, per-request summaries)."""

from __future__ import annotations

import statistics

from rich.style import Style
from rich.text import Text

from specterm.stats import fmt_opt
from specterm.ui.charts import sparkline
from specterm.ui.state import ViewState
from specterm.ui.widgets.panel import Panel

ROWS = 6


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
            out.append(f"{'step':<9}{'time':>6}{'tok/s':>7}\n", styles["meta"])
            for s in rows:
                rate = s.tokens / s.latency_s if s.tokens and s.latency_s else None
                out.append(f"{s.step} {s.kind.replace('_', ' ')}"[:8].ljust(9), styles["meta"] if s.ok else styles["error"])
                out.append(f"{s.latency_s:>5.2f}s{fmt_opt(rate, '.1f'):>7}\n", styles["body"])
        elif rows:
            out.append(f"{'step':<10}{'time':>6}{'TTFT':>6}{'tok':>5}{'tok/s':>7}\n", styles["meta"])
            for s in rows:
                rate = s.tokens / s.latency_s if s.tokens and s.latency_s else None
                ttft = None if s.ttft_s is None else s.ttft_s * 1000
                label = f"{s.step} {s.kind.replace('_', ' ')}"[:9]
                out.append(f"{label:<10}", styles["meta"] if s.ok else styles["error"])
                ttft_txt = "–" if ttft is None else f"{ttft:.0f}ms"
                out.append(
                    f"{s.latency_s:>5.2f}s{ttft_txt:>6}{s.tokens or '–':>5}{fmt_opt(rate, '.1f'):>7}\n",
                    styles["body"],
                )
        else:
            # No agent: per request instead (plain chat, `run` sessions).
            done = [r for r in summary.requests.values() if r.wall_s]
            if done:
                picked = summary.requests.get(self.state.pinned_request or "")
                r = picked if picked is not None and picked.wall_s else done[-1]
                out.append("picked request\n" if r is picked else "last request\n", styles["meta"])
                out.append(
                    f"{r.wall_s:.2f} s · TTFT {fmt_opt(None if r.ttft_s is None else r.ttft_s * 1000, '.0f')} ms"
                    f" · {r.stats.tokens} tok · {fmt_opt(r.tokens_per_s, '.1f')} tok/s\n",
                    styles["body"],
                )
                if len(done) > 1:  # a server's many requests (attach): their medians
                    ttfts = [x.ttft_s for x in done if x.ttft_s is not None]
                    ttft = statistics.median(ttfts) * 1000 if ttfts else None
                    out.append(f"{len(done)} req median\n" if compact else f"{len(done)} requests, median\n",
                               styles["meta"])
                    out.append(f"{statistics.median(x.wall_s for x in done):.2f}s TTFT {fmt_opt(ttft, '.0f')}ms\n"
                               if compact else
                               f"{statistics.median(x.wall_s for x in done):.2f} s · TTFT {fmt_opt(ttft, '.0f')} ms\n",
                               styles["body"])
        walls = summary.step_wall_s
        if walls:
            mean_ms = sum(walls) / len(walls) * 1000
            label = f"step ms {mean_ms:.1f}" if compact else f"engine step ms: mean {mean_ms:.1f} last {walls[-1] * 1000:.1f}"
            out.append(label + "\n", styles["meta"])
            out.append(sparkline(walls, width, lo=0.0), styles["title"])
        elif not rows:
            out.append("no steps yet", styles["meta"])
        return out
