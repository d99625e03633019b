"""The component classes that carry verdict and transcript styles (no widget here).

Colours come from the theme's ``token-*`` variables and attributes from ``app.tcss``, so both the
transcript and the legend read the same styles and a theme change restyles both.
"""

from __future__ import annotations

from rich.style import Style
from textual.widget import Widget

from specterm.render import STYLED_VERDICTS

# The verdicts and rejected drafts (``render.STYLED_VERDICTS``, from ``events.Verdict``), then the
# grammar-forced flag.
TOKEN_CLASSES = (*STYLED_VERDICTS, "forced")
TEXT_CLASSES = ("title", "meta", "body", "tool", "warning", "error")
COMPONENT_CLASSES = frozenset({f"token--{n}" for n in TOKEN_CLASSES} | {f"text--{n}" for n in TEXT_CLASSES})


def style_map(widget: Widget) -> dict[str, Style]:
    """Rich styles by name (verdicts plus ``forced``, ``title`` ...) from ``widget``'s CSS.

    Only the foreground and attributes are kept: the block's own background shows through.
    Non-partial styles are used because they resolve translucent colours (``$foreground 60%``)
    against the widget's background.
    """
    out: dict[str, Style] = {}
    for name in TOKEN_CLASSES:
        out[name] = _fg(widget.get_component_rich_style(f"token--{name}"))
    # Forced is a flag on top of a verdict: layer its attributes only, keep the verdict's colour.
    forced = out["forced"]
    out["forced-layer"] = Style(dim=forced.dim, italic=forced.italic, underline=forced.underline, bold=forced.bold)
    for name in TEXT_CLASSES:
        out[name] = _fg(widget.get_component_rich_style(f"text--{name}"))
    return out


def _fg(style: Style) -> Style:
    return Style(
        color=style.color,
        bold=style.bold,
        dim=style.dim,
        italic=style.italic,
        underline=style.underline,
        strike=style.strike,
        reverse=style.reverse,
        overline=style.overline,
    )
