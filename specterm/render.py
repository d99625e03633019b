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

from specterm.events import SpecStep

# C0 controls except \t and \n, DEL, C1 controls; and Unicode bidi overrides that reorder text.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    return "\\x%02x" % ord(match.group()) if ord(match.group()) < 0x100 else "\\u%04x" % ord(match.group())


def inert(text: str) -> str:
    """Return ``text`` with every control character shown as a visible escape (``\\x1b``)."""
    return _UNSAFE.sub(_escape, text)


VERDICT_STYLES: dict[str, Style] = {
    "accepted": Style(color="green"),
    "correction": Style(color="red", bold=True, underline=True),
    "bonus": Style(color="cyan", italic=True),
    # Accepted stays plain so a good speculator's stream reads cleanly; target is underlined so the
    # two differ without colour too (same attributes as the dashboard's app.tcss).
    "target": Style(color="yellow", underline=True),
    "rejected": Style(color="bright_black", strike=True),
}
FORCED_STYLE = Style(dim=True)

LEGEND: tuple[tuple[str, str], ...] = (
    ("accepted", "draft kept by the target (plain)"),
    ("correction", "target's token where the draft was wrong (bold underline)"),
    ("bonus", "target's extra token after all drafts kept (italic)"),
    ("target", "no draft this step (underlined)"),
    ("rejected", "draft thrown away (struck through)"),
)


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
    for tok in step.tokens:
        style = VERDICT_STYLES[tok.verdict]
        if show_forced and tok.forced:
            style = style + FORCED_STYLE
        out.append(inert(tok.text), style)
    if show_rejected and step.rejected_text:
        out.append(inert("".join(step.rejected_text)), VERDICT_STYLES["rejected"])
    return out
