"""Text charts (bars, sparklines) built from block characters: deterministic, colour-optional and
readable on 16-colour terminals and in NO_COLOR mode."""

from __future__ import annotations

from collections.abc import Sequence

_SPARK = "▁▂▃▄▅▆▇█"
_EIGHTHS = " ▏▎▍▌▋▊▉█"


def bar(fraction: float | None, width: int) -> str:
    """A horizontal bar ``width`` cells wide filled to ``fraction`` (0..1), in eighths of a cell."""
    if width <= 0:
        return ""
    if fraction is None:
        return "·" * width
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, rest = divmod(eighths, 8)
    out = "█" * full + (_EIGHTHS[rest] if rest else "")
    return out + " " * (width - len(out))


def sparkline(values: Sequence[float], width: int, *, lo: float | None = None, hi: float | None = None) -> str:
    """The last ``width`` values as one row of ▁..█ (scaled to ``lo``..``hi``, default min..max)."""
    if width <= 0 or not values:
        return ""
    tail = list(values[-width:])
    low = min(tail) if lo is None else lo
    high = max(tail) if hi is None else hi
    span = high - low
    if span <= 0:
        return _SPARK[3] * len(tail)
    top = len(_SPARK) - 1
    return "".join(_SPARK[max(0, min(top, round((v - low) / span * top)))] for v in tail)


def fmt_bytes_gib(n: int | None) -> str:
    return "–" if n is None else f"{n / 2**30:.1f}"


def fmt_count(n: int) -> str:
    """At most 5 characters, so a narrow column never runs into the next: exact below 100,000, then
    ``123k``, ``1.2M``, ``45M``, ``1.2G``."""
    if n < 100_000:
        return str(n)
    unit, scale = next((u, sc) for u, sc in (("G", 1e9), ("M", 1e6), ("k", 1e3)) if n >= sc)
    x = n / scale
    return f"{x:.1f}{unit}" if x < 10 else f"{x:.0f}{unit}"
