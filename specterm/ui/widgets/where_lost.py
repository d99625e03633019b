"""Where the draft loses, in the acceptance panel (issue 44): the session's acceptance by region of a
structured output and the contexts where the target's corrections cluster. ``WhereLost``
(``specterm/regions.py``) counts and defines them; this only lays them out.

Wide (the side column): a "by region" table, one row per region with tokens, and the most frequent
correction contexts, each with its first example (the token before, the draft's, the target's, styled
as the transcript styles a rejected draft and a correction). Narrow (80×24): one line, the region the
draft loses most in, where the panel has a line to spare. Nothing at all for a session with neither
(plain chat, or a structured one without speculation). The model's text is made inert (``render.inert``)
and cut to the width here, never by the terminal: a cut there would take the target's token first.

Built from the session's counts when the panel rebuilds (at most 4×/s): a few regions and contexts,
never a token.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.style import Style
from rich.text import Text

from specterm.regions import REGIONS, SHORT, WhereLost
from specterm.render import inert
from specterm.stats import fmt_opt
from specterm.ui.charts import fmt_count

CONTEXTS = 2
"""Correction contexts shown wide, two lines each: with the region table the block stays near ten
lines, in a side column that has 34 rows for its three panels at 120×36 (it scrolls past that)."""


def wide_block(out: Text, where: WhereLost, styles: dict[str, Style], width: int) -> None:
    """Append the region table and the top correction contexts to ``out``, each line after a newline
    (``out`` ends without one)."""
    rows = where.region_counts()
    if any(rate is not None for _region, rate, _verified, _tokens in rows):
        _region_table(out, rows, styles, width)
    if where.corrections:
        _corrections(out, where, styles, width)


def compact_line(where: WhereLost, width: int) -> str:
    """``strings 0.90``: the region with the lowest acceptance and its rate, right-aligned in ``width``
    cells (the panel puts it under the session column); "" where no region has a verified draft or it
    does not fit."""
    rated = [(region, rate) for region, rate in where.region_acceptance().items() if rate is not None]
    if not rated:
        return ""
    region, rate = min(rated, key=lambda kv: kv[1])  # ties: the first in display order
    shown = f"{SHORT[region]} {fmt_opt(rate)}"
    return f"{shown:>{width}}" if len(shown) <= width else ""


def _region_table(
    out: Text, rows: list[tuple[str, float | None, int, int]], styles: dict[str, Style], width: int
) -> None:
    """``by region (session)  rate  of  tok``: acceptance, the verified drafts it is of, and tokens;
    the last columns left out where the width cannot hold them."""
    head = "by region (session)"
    cells = [(REGIONS[r], fmt_opt(rate), fmt_count(verified), fmt_count(tokens)) for r, rate, verified, tokens in rows]
    heads = ("rate", "of", "tok")
    label = max(len(head), *(len(c[0]) for c in cells))
    widths = [max(len(h), *(len(c[i + 1]) for c in cells)) for i, h in enumerate(heads)]
    columns = len(heads)
    while columns > 1 and label + sum(w + 2 for w in widths[:columns]) > width:
        columns -= 1
    out.append(f"\n{head:<{label}}", styles["meta"])
    out.append("".join(f"  {h:>{w}}" for h, w in zip(heads[:columns], widths)), styles["meta"])
    for name, *values in cells:
        out.append(f"\n{name:<{label}}", styles["meta"])
        out.append("".join(f"  {v:>{w}}" for v, w in zip(values[:columns], widths)), styles["body"])


def _corrections(out: Text, where: WhereLost, styles: dict[str, Style], width: int) -> None:
    """The heading, then per context its count and name (wrapped at words) and its first example."""
    total = sum(where.corrections.values())
    head = f"corrections {total} · draft → target"
    out.append("\n" + (head if len(head) <= width else f"corrections {total}"), styles["meta"])
    top = where.top_corrections(CONTEXTS)
    indent = len(str(top[0]["count"])) + 1  # the first is the most frequent: the widest count
    for context in top:
        first, *rest = _wrap(context["context"], width - indent)
        out.append(f"\n{context['count']:>{indent - 1}} ", styles["body"])
        out.append(first, styles["body"])
        for line in rest:
            out.append("\n" + " " * indent + line, styles["body"])
        if context["examples"]:
            out.append("\n" + " " * indent)
            _example(out, context["examples"][0], styles, width - indent)


def _example(out: Text, example: dict[str, str], styles: dict[str, Style], room: int) -> None:
    """``after 'SELECT': ' count' → ' name'``, the three tokens cut alike to fit ``room`` cells."""
    draft = example["draft"]  # "" in sessions recorded before drafts' text was
    tokens = [inert(repr(example["before"])), inert(repr(draft)) if draft else "?", inert(repr(example["target"]))]
    fixed = len("after ") + len(": ") + len(" → ")
    before, draft_shown, target = _share(tokens, room - fixed)
    out.append("after ", styles["meta"])
    out.append(before, styles["body"])
    out.append(": ", styles["meta"])
    out.append(draft_shown, styles["rejected"] if draft else styles["meta"])
    out.append(" → ", styles["meta"])
    out.append(target, styles["correction"])


def _share(pieces: list[str], room: int) -> list[str]:
    """``pieces`` cut to ``room`` cells in all: the longest are cut first, to one common length, each
    cut one ending in ``…``; the short ones stay whole."""
    sizes = [cell_len(p) for p in pieces]
    if sum(sizes) <= room:
        return pieces
    cap = min(max(sizes), room)  # a token can be any length: never count down from it
    while cap > 1 and sum(min(s, cap) for s in sizes) > room:
        cap -= 1
    return [p if s <= cap else set_cell_size(p, cap - 1) + "…" for p, s in zip(pieces, sizes)]


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken at spaces (a longer word is cut)."""
    width = max(width, 1)
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) <= width:
            line += " " + word
            continue
        if line:
            lines.append(line)
        while len(word) > width:
            lines.append(word[:width])
            word = word[width:]
        line = word
    return [*lines, line]
