"""Acceptance: rate, mean acceptance length and per-position acceptance for the current request
and the session, plus a sparkline of per-step acceptance. All numbers from ``specterm.stats``.
Under them, where the draft loses: acceptance by region of a structured output and where the
target's corrections cluster (``where_lost.py``; one line at 80×24, where it fits).

With a ``bench --recommend`` recommendation for this configuration (in the session header), the
bottom border shows the live decode speed-up next to the one the bench measured: the session's decode
rate (``SessionSummary.decode_tokens_per_s``) ÷ the target-only decode rate that bench saw. Other
prompts than the bench's, so an estimate, labelled as such."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

from specterm.stats import SpecStats, fmt_opt
from specterm.ui.charts import bar, fmt_count, sparkline
from specterm.ui.state import ViewState
from specterm.ui.widgets.panel import Panel
from specterm.ui.widgets.where_lost import compact_line, wide_block

CONDITIONAL_WIDTH = 44
"""Inner width from which the per-position rows also show the conditional rate."""


@dataclass(frozen=True, slots=True)
class _Layout:
    """How the rows of numbers are set: label width, column width, the gap between the two columns,
    their headings."""

    label: int
    column: int
    gap: str
    heads: tuple[str, str]
    compact: bool

    @property
    def cells(self) -> int:
        """The width a row takes."""
        return self.label + 2 * self.column + len(self.gap)


WIDE = _Layout(9, 8, " ", ("request", "session"), compact=False)
COMPACT = _Layout(5, 7, "", ("req", "sess"), compact=True)
TIGHT = _Layout(4, 6, "", ("req", "sess"), compact=True)
"""Below ``COMPACT``'s 19 cells: ``attach`` at 80 columns, where the requests list shares the row and
each panel has 16."""


def _rows(
    request: SpecStats, session: SpecStats, count: Callable[[int], str] = str
) -> list[tuple[str, str | None, str, str]]:
    """The rows every layout shows, once: (wide label, compact label or ``None`` where the narrow layout
    leaves the row out, the request's value, the session's); ``count`` formats the token counts."""
    rows = [
        ("rate", "rate", fmt_opt(request.acceptance_rate), fmt_opt(session.acceptance_rate)),
        ("mean len", "len", fmt_opt(request.mean_acceptance_length), fmt_opt(session.mean_acceptance_length)),
        ("tokens", "tok", count(request.tokens), count(session.tokens)),
    ]
    if session.grammar_drafts:  # grammar drafting: what it saves, and how much the grammar drafted
        rows += [
            ("passes/t", "pass", fmt_opt(request.draft_passes_per_token), fmt_opt(session.draft_passes_per_token)),
            ("grammar", None, "", fmt_opt(session.grammar_draft_share, ".0%")),
        ]
    return rows


def _table(out: Text, rows: list[tuple[str, str | None, str, str]], layout: _Layout, styles: dict[str, Style]) -> None:
    w = layout.column
    out.append(f"{'':{layout.label}}{layout.heads[0]:>{w}}{layout.gap}{layout.heads[1]:>{w}}\n", styles["meta"])
    for wide, compact, a, b in rows:
        label = compact if layout.compact else wide
        if label is None:
            continue
        out.append(f"{label:<{layout.label}}", styles["meta"])
        out.append(f"{a:>{w}}{layout.gap}{b:>{w}}\n", styles["body"])


class AcceptancePanel(Panel):
    def __init__(self, state: ViewState, *, id: str | None = None) -> None:
        super().__init__("acceptance", id=id)
        self.state = state

    def flush(self) -> None:
        line = self.speedup_line(compact=self.inner_width < 30)
        if line != (self.border_subtitle or ""):  # a repaint only when it changed
            self.border_subtitle = line
        super().flush()

    def speedup_line(self, *, compact: bool = False) -> str:
        """``"1.72× live · 1.90× bench"``, or "" without a recommendation for this session."""
        rec = self.state.session.config.get("recommendation") if self.state.session else None
        if not isinstance(rec, dict):
            return ""
        if rec.get("method") == "none":
            return "bench: target-only fastest"
        base, rate = rec.get("target_only_tok_s"), self.state.summary.decode_tokens_per_s()
        live = f"{rate / base:.2f}×" if rate and base else "–"
        expected = f"{rec.get('speedup', 0):.2f}×"
        return f"{live}·bench {expected}" if compact else f"{live} live · {expected} bench"

    def body(self, styles: dict[str, Style], width: int) -> Text:
        summary = self.state.summary
        session = summary.session
        rid = self.state.current_request
        request = summary.requests[rid].stats if rid in summary.requests else SpecStats()
        out = Text(no_wrap=True, overflow="ellipsis")
        if not session.steps:
            out.append("no tokens yet", styles["meta"])
            return out
        if width < 30:
            return self._compact(out, request, session, summary.step_accept, styles, width, self.inner_height)
        _table(out, _rows(request, session), WIDE, styles)
        per_pos = session.per_position
        if per_pos:
            # Wide: the conditional rate beside it (given every earlier position was accepted).
            conditional = session.conditional_per_position if width >= CONDITIONAL_WIDTH else None
            out.append("per position (session)" + (" · given all before" if conditional else "") + "\n", styles["meta"])
            bar_w = max(4, width - (15 if conditional else 10))
            # Bound the height: k can be 16; the sparkline and numbers matter more than pos 9+.
            for i, frac in enumerate(per_pos[:8], start=1):
                out.append(f"{i:>2} ", styles["meta"])
                out.append(bar(frac, bar_w), styles["title"])
                out.append(f" {frac:4.2f}", styles["body"])
                if conditional:
                    out.append(f" {fmt_opt(conditional[i - 1]):>4}", styles["meta"])
                out.append("\n")
            if len(per_pos) > 8:
                out.append(f"   … {len(per_pos) - 8} more positions\n", styles["meta"])
        if any(b > 1 for sizes in session.by_k.values() for b in sizes):  # under load: k per batch size
            out.append(f"{'k @batch':<9}", styles["meta"])
            out.append(session.k_line() + "\n", styles["body"])
        if summary.step_accept:
            out.append("per step ", styles["meta"])
            out.append(sparkline(summary.step_accept, width - 9, lo=0.0, hi=1.0), styles["title"])
        else:
            out.append("no drafts (speculation off)", styles["meta"])
        wide_block(out, session.where, styles, width)
        return out

    @staticmethod
    def _compact(
        out: Text,
        request: SpecStats,
        session: SpecStats,
        step_accept: list[float],
        styles: dict[str, Style],
        width: int,
        lines: int = 0,
    ) -> Text:
        """Six rows for the narrow layout (80x24), seven with grammar drafting's passes per token: the
        same numbers, per-position as a sparkline. Token counts in at most 5 characters (``fmt_count``):
        a server's session passes 100,000 within the hour, and its column would run into the next.
        Then the region the draft loses most in, only where ``lines`` (the panel's height) has room
        for it below them: those rows come first."""
        layout = COMPACT if width >= COMPACT.cells else TIGHT
        _table(out, _rows(request, session, fmt_count), layout, styles)
        out.append("pos  ", styles["meta"])
        out.append(sparkline(session.per_position, width - 5, lo=0.0, hi=1.0) + "\n", styles["title"])
        out.append("step ", styles["meta"])
        out.append(sparkline(step_accept, width - 5, lo=0.0, hi=1.0), styles["title"])
        if out.plain.count("\n") + 2 <= lines:
            line = compact_line(session.where, min(layout.cells, width) - layout.label)
            if line:
                out.append(f"\n{'min':<{layout.label}}", styles["meta"])
                out.append(line, styles["body"])
        return out
