"""Show a load sweep (``bench --concurrency``): a table per level, a terminal plot of the throughput
ratio against concurrency, the crossover in one line, and the same as SVG (Rich's export)."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from specterm.bench.load import LevelResult, verdict_line
from specterm.bench.report import MARKS, ratio_grid
from specterm.bench.runner import TARGET_ONLY
from specterm.errors import ConfigError
from specterm.stats import fmt_opt


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}s"


def load_table(results: Sequence[LevelResult], *, title: str = "") -> Table:
    table = Table(
        title=Text(title) if title else None,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
        show_edge=False,
    )
    # short headers: the table fits 80 columns (the caption says what they are)
    table.caption = (
        "conc: requests in flight · tok/s: output throughput · ×t-only: ÷ target-only · p50/p95: "
        "request latency · ok: verdicts reconciled with vLLM"
    )
    for name, justify in (
        ("conc", "right"),
        ("config", "left"),
        ("tok/s", "right"),
        ("×t-only", "right"),
        ("p50", "right"),
        ("p95", "right"),
        ("TTFT", "right"),
        ("accept", "right"),
        ("MAL", "right"),
        ("ok", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=name == "config")  # type: ignore[arg-type]
    for r in sorted(results, key=lambda r: (r.level, r.config != TARGET_ONLY, r.config)):
        ratio = Text(
            "1.00×" if r.config == TARGET_ONLY else fmt_opt(r.ratio, ".2f") + "×",
            style="" if r.ratio is None or r.config == TARGET_ONLY else ("green" if r.ratio >= 1 else "red"),
        )
        table.add_row(
            str(r.level),
            Text(r.config),
            f"{r.throughput:.1f}",
            ratio,
            _s(r.p50_s),
            _s(r.p95_s),
            _s(r.ttft_s),
            fmt_opt(r.acceptance, ".1%"),
            fmt_opt(r.mal, ".2f"),
            "–" if r.reconciled is None else ("yes" if r.reconciled else "NO"),
        )
    return table


def load_plot(results: Sequence[LevelResult], *, height: int = 10, col: int = 7) -> Text:
    """Throughput ratio (speculative ÷ target-only) against concurrency; ``-`` at 1×."""
    points = [r for r in results if r.config != TARGET_ONLY and r.ratio is not None]
    if not points:
        return Text("no paired runs to plot")
    levels = sorted({r.level for r in points})
    configs = sorted({r.config for r in points})

    def mark(config: str) -> tuple[str, str]:
        return MARKS.get(config.split()[0], ("?", "bold"))

    marks = [
        (levels.index(r.level) * col + col // 2 + configs.index(r.config) - len(configs) // 2, r.ratio, mark(r.config))
        for r in points
    ]
    legend = [(f"{mark(c)[0]} {c}", mark(c)[1]) for c in configs]
    return ratio_grid(
        marks, levels, axis="conc.", height=height, col=col, legend=[*legend, ("- target-only 1×", "dim")]
    )


def show(console: Console, results: Sequence[LevelResult], *, title: str) -> None:
    console.print(load_table(results, title=title))
    console.print(load_plot(results))
    for config in sorted({r.config for r in results if r.config != TARGET_ONLY}):
        console.print(Text(verdict_line(results, config), style="bold"))


def write_load_svg(path: str, results: Sequence[LevelResult], *, title: str) -> None:
    console = Console(record=True, width=150, file=io.StringIO(), force_terminal=True)
    console.print(Text(title, style="bold"))
    show(console, results, title="")
    try:
        console.save_svg(path, title="specterm bench --concurrency")
    except OSError as err:
        raise ConfigError(f"cannot write --plot file {path}: {err.strerror or err}") from None
