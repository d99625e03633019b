"""Turning untrusted text and verdicts into terminal output, without Textual.

Model output and session files are untrusted: a token may carry ANSI/OSC escape sequences or Rich
markup. ``inert`` makes any string safe to print: control characters become visible escapes
(``\\x1b`` → ``␛``-style text), and callers always build ``rich.text.Text`` objects with ``append``,
which never parses markup. Verdict styles combine colour with a non-colour attribute (bold,
underline, italic, strike, dim) so they survive ``NO_COLOR`` and 16-colour terminals.
"""

from __future__ import annotations

import re

from rich.style import Style
from rich.text import Text

from specterm.events import VERDICTS, SpecStep

# C0 controls except \t and \n, DEL, C1 controls; and Unicode bidi overrides that reorder text.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    return "\\x%02x" % ord(match.group()) if ord(match.group()) < 0x100 else "\\u%04x" % ord(match.group())


def inert(text: str) -> str:
    """Return ``text`` with every control character shown as a visible escape (``\\x1b``)."""
    return _UNSAFE.sub(_escape, text)


STYLED_VERDICTS: tuple[str, ...] = (*VERDICTS, "rejected")
"""What a transcript styles, in legend order: the verdicts of emitted tokens (``events.VERDICTS``,
from the ``Verdict`` literal), then rejected drafts. The tables below are keyed by these names and
built in this order, so a verdict added to ``events.Verdict`` without a style fails at import."""

_STYLES: dict[str, Style] = {
    "accepted": Style(color="green"),
    "correction": Style(color="red", bold=True, underline=True),
    "bonus": Style(color="cyan", italic=True),
    # Accepted stays plain so a good speculator's stream reads cleanly; target is underlined so the
    # two differ without colour too (same attributes as the dashboard's app.tcss).
    "target": Style(color="yellow", underline=True),
    "rejected": Style(color="bright_black", strike=True),
}
_LOOKS: dict[str, str] = {
    "accepted": "draft kept by the target (plain)",
    "correction": "target's token where the draft was wrong (bold underline)",
    "bonus": "target's extra token after all drafts kept (italic)",
    "target": "no draft this step (underlined)",
    "rejected": "draft thrown away (struck through)",
}
VERDICT_STYLES: dict[str, Style] = {name: _STYLES[name] for name in STYLED_VERDICTS}
FORCED_STYLE = Style(dim=True)

LEGEND: tuple[tuple[str, str], ...] = tuple((name, _LOOKS[name]) for name in STYLED_VERDICTS)
"""The verdicts in legend order, with what each looks like without colour; the dashboard's legend
shows the same names in the same order (``ui/widgets/legend.py``), plus the toggles' state."""


def step_pieces(step: SpecStep, *, show_rejected: bool = False):
    """The pieces of one step in display order: ``(text, verdict, forced)``, text made inert.

    Rejected drafts go where they were proposed: after the accepted prefix, before the target's
    correction, so a step reads "kept ~~proposed~~ correction" like a diff. Headless output and the
    dashboard both render from this (one order, one place). An accepted draft the grammar proposed
    (grammar drafting: its forced run, no real choice) reads as forced too."""
    split = min(step.accepted, len(step.tokens))
    for tok in step.tokens[:split]:
        yield inert(tok.text), tok.verdict, tok.forced or tok.grammar
    if show_rejected and step.rejected_text:
        yield inert("".join(step.rejected_text)), "rejected", False
    for tok in step.tokens[split:]:
        yield inert(tok.text), tok.verdict, tok.forced


def legend_text() -> Text:
    out = Text()
    for name, _ in LEGEND:
        if out:
            out.append("  ")
        out.append(name, VERDICT_STYLES[name])
    out.append("  ")
    out.append("forced", FORCED_STYLE)
    return out


def step_text(step: SpecStep, *, show_rejected: bool = False, show_forced: bool = True) -> Text:
    """The emitted tokens of one engine step, styled by verdict (and rejected drafts if asked)."""
    out = Text()
    for text, verdict, forced in step_pieces(step, show_rejected=show_rejected):
        style = VERDICT_STYLES[verdict]
        out.append(text, style + FORCED_STYLE if show_forced and forced else style)
    return out
