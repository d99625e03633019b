"""Show benchmark results: a Rich table, a terminal plot of speed-up vs k, JSON and SVG files.

Everything here reads ``ConfigResult`` objects (``results.py``); nothing runs an engine. Model
paths and prompts are put in ``Text`` objects, never parsed as Rich markup.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from specterm.bench.results import ConfigResult, Spread
from specterm.errors import ConfigError
from specterm.stats import fmt_opt

# Marker and style per method: a letter, not only a hue, so the plot reads without colour.
MARKS = {
    "draft_model": ("D", "bold cyan"),
    "draft_model+grammar": ("G", "bold green"),
    "ngram": ("N", "bold magenta"),
    "suffix": ("S", "bold yellow"),
}
THEORY_MARK = ("·", "dim")


def _ms(spread: Spread | None) -> str:
    return "–" if spread is None else f"{spread.median * 1e3:.0f}"


def _spread(spread: Spread | None, spec: str = ".2f", suffix: str = "") -> str:
    if spread is None:
        return "–"
    if spread.n <= 1 or spread.lo == spread.hi:
        return f"{spread.median:{spec}}{suffix}"
    return f"{spread.median:{spec}}{suffix} [{spread.lo:{spec}}–{spread.hi:{spec}}]"


def _positions(values: Sequence[float]) -> str:
    return " ".join(f"{v:.2f}".lstrip("0") if v < 1 else "1" for v in values) or "–"


def results_table(results: Sequence[ConfigResult], *, title: str = "") -> Table:
    """Speed: rates, latencies, speed-up against the theory (fits 100 columns)."""
    table = Table(title=title or None, title_justify="left", header_style="bold")
    for name in (
        "configuration",
        "decode tok/s",
        "wall ms",
        "TTFT ms",
        "steps/tok",
        "speed-up [min–max]",
        "theory",
        "meas/theory",
    ):
        table.add_column(name, justify="left" if name == "configuration" else "right")
    for r in results:
        table.add_row(
            Text(r.label),
            _spread(r.tokens_per_s, ".0f"),
            _ms(r.wall_s),
            _ms(r.ttft_s),
            fmt_opt(r.steps_per_token),
            _spread(r.speedup, ".2f", "×"),
            fmt_opt(r.theory, ".2f"),
            fmt_opt(r.measured_over_theory),
        )
    return table


def acceptance_table(results: Sequence[ConfigResult]) -> Table:
    """What the theory is fed: acceptance, α, c (and c inline), per-position acceptance."""
    table = Table(header_style="bold")
    grammar = any(r.grammar for r in results)
    names = (
        "configuration",
        "accept",
        "MAL",
        "α",
        "c",
        "c inline",
        "per position",
        *(("passes/tok", "grammar") if grammar else ()),
    )
    for name in names:
        table.add_column(name, justify="left" if name in ("configuration", "per position") else "right")
    for r in results:
        if r.method is None:
            continue
        extra = (fmt_opt(r.draft_passes_per_token), fmt_opt(r.grammar_draft_share, ".0%")) if grammar else ()
        table.add_row(
            Text(r.label),
            fmt_opt(r.acceptance_rate, ".0%"),
            fmt_opt(r.mean_acceptance_length),
            fmt_opt(r.alpha),
            fmt_opt(r.c),
            fmt_opt(r.c_inline),
            _positions(r.per_position),
            *extra,
        )
    return table


def ttft_steps_table(results: Sequence[ConfigResult], *, max_steps: int = 6) -> Table | None:
    """TTFT by agent step (ms) and steps 2+ ÷ step 1; None when no unit had more than one step."""
    if not any(len(r.ttft_by_step) > 1 for r in results):
        return None
    n = min(max(len(r.ttft_by_step) for r in results), max_steps)
    table = Table(
        title="TTFT by agent step (ms; median over the turns that reached the step)",
        title_justify="left",
        header_style="bold",
    )
    table.add_column("configuration")
    for i in range(n):
        table.add_column(f"step {i + 1}", justify="right")
    table.add_column("2+ ÷ 1", justify="right")
    table.add_column("2+ cached", justify="right")  # share of their prompt found in vLLM's prefix cache
    for r in results:
        cells = [f"{t * 1e3:.0f}" for t in r.ttft_by_step[:n]]
        table.add_row(
            Text(r.label),
            *cells,
            *["–"] * (n - len(cells)),
            fmt_opt(r.later_ttft_share, ".0%"),
            fmt_opt(r.later_cached_share, ".0%"),
        )
    return table


def turns_table(records, labels: Sequence[str], per_round: int) -> Table:
    """Decode speed-up (median of paired ratios) and tokens per engine step by how much the engine
    had seen: its first unit (cold), the rest of round 1 (the workload's other prompts), later
    rounds (the same prompts again). Tokens per step carries no timing noise."""
    from statistics import median

    from specterm.bench.results import speedup_by_turn, units_by_turn

    groups = ("turn 1 (cold)", "turns 2–%d" % per_round, "later rounds (repeats)")
    table = Table(
        title="by turn: decode speed-up · tokens per step (each engine's units in the order it ran them)",
        title_justify="left",
        header_style="bold",
    )
    table.add_column("configuration")
    for name in groups:
        table.add_column(name, justify="right")
    cuts = (slice(0, 1), slice(1, per_round), slice(per_round, None))
    for label in labels:
        ratios, units = speedup_by_turn(records, label), units_by_turn(records, label)
        cells = []
        for cut in cuts:
            rs = [v for v in ratios[cut] if v is not None]
            steps = sum(u.steps for u in units[cut])
            if not units[cut]:
                cells.append("–")
                continue
            speed = f"{median(rs):.2f}×" if rs else "–"
            cells.append(f"{speed} · {sum(u.tokens for u in units[cut]) / steps:.2f}" if steps else speed)
        table.add_row(Text(label), *cells)
    return table


def ratio_grid(
    marks: Sequence[tuple[int, float, tuple[str, str]]],
    columns: Sequence[Any],
    *,
    axis: str,
    legend: Sequence[tuple[str, str]],
    height: int = 12,
    col: int = 6,
) -> Text:
    """A terminal plot of ratios: ``marks`` are (column index, y, (character, style)) with the column's
    centre offset already applied; ``-`` at 1×; ``columns`` label the x axis (``axis`` names it)."""
    ys = [y for _, y, _ in marks] + [1.0]
    top, bottom = max(ys) * 1.05, min(min(ys) * 0.95, 0.9)
    rows = [[(" ", "")] * (len(columns) * col) for _ in range(height)]

    def row_of(y: float) -> int:
        return round((top - y) / (top - bottom) * (height - 1))

    one = row_of(1.0)
    rows[one] = [("-", "dim")] * (len(columns) * col)
    for x, y, mark in marks:
        rows[row_of(y)][x] = mark
    text = Text()
    for i, row in enumerate(rows):
        y = top - i * (top - bottom) / (height - 1)
        text.append(f"{y:5.2f}× │" if i % 3 == 0 or i == one else "       │", style="dim")
        for ch, style in row:
            text.append(ch, style=style)
        text.append("\n")
    text.append("       └" + "─" * (len(columns) * col) + "\n", style="dim")
    text.append(f"{axis:>7} " + "".join(f"{c:^{col}}" for c in columns) + "\n", style="dim")
    for i, (part, style) in enumerate(legend):
        text.append(("   " if i else "        ") + part, style=style)
    return text


def speedup_plot(results: Sequence[ConfigResult], *, height: int = 12, col: int = 6) -> Text:
    """Speed-up (median) vs k, one marker letter per method, ``·`` for the theory, ``-`` at 1×."""
    points = [r for r in results if r.method and r.speedup is not None]
    if not points:
        return Text("no speculative results to plot")
    ks = sorted({r.k for r in points})
    marks = []
    offset = {"draft_model": -1, "draft_model+grammar": 0}  # side by side on one k
    for r in points:
        x = ks.index(r.k) * col + col // 2 + offset.get(r.name, 1)
        if r.theory is not None and not r.grammar:  # the theory assumes k draft passes a step
            marks.append((x, r.theory, THEORY_MARK))
        marks.append((x, r.speedup.median, MARKS.get(r.name, ("?", "bold"))))
    legend = [(f"{m} {n}", s) for n, (m, s) in MARKS.items() if any(r.name == n for r in points)]
    return ratio_grid(
        marks,
        ks,
        axis="k",
        height=height,
        col=col,
        legend=[*legend, (f"{THEORY_MARK[0]} theory", "dim"), ("- target-only 1×", "dim")],
    )


def to_json(results: Sequence[ConfigResult], meta: dict[str, Any]) -> dict[str, Any]:
    return {"meta": meta, "results": [r.as_dict() for r in results]}


def write_json(path: str, data: dict[str, Any]) -> None:
    try:
        Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot write --json file {path}: {err.strerror or err}") from None


def write_svg(path: str, results: Sequence[ConfigResult], *, title: str) -> None:
    """The plot and the table, rendered by Rich's SVG export (no plotting library needed)."""
    console = Console(record=True, width=150, file=io.StringIO(), force_terminal=True)
    console.print(Text(title, style="bold"))
    console.print(speedup_plot(results))
    console.print(results_table(results))
    console.print(acceptance_table(results))
    if (steps := ttft_steps_table(results)) is not None:
        console.print(steps)
    try:
        console.save_svg(path, title="specterm bench")
    except OSError as err:
        raise ConfigError(f"cannot write --plot file {path}: {err.strerror or err}") from None
