"""One line naming each verdict in its own style, so colour is never the only cue."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from specterm.render import LEGEND as VERDICTS
from specterm.ui.entries import ViewOptions
from specterm.ui.widgets.styles import COMPONENT_CLASSES, style_map

# The verdicts in the headless legend's order (one source: ``render.LEGEND``), then grammar-forced.
LEGEND = (*VERDICTS, ("forced", "grammar-forced token (dim)"))


class Legend(Widget):
    COMPONENT_CLASSES = COMPONENT_CLASSES
    DEFAULT_CSS = """
    Legend {
        height: 1;
        padding: 0 1;
        background: $surface;
    }
    """

    options: reactive[ViewOptions] = reactive(ViewOptions)
    """Bound to the screen's view options: a change repaints the legend (its on/off marks)."""

    def render(self) -> Text:
        styles = style_map(self)
        out = Text(no_wrap=True, overflow="ellipsis")
        for name, _ in LEGEND:
            if out:
                out.append(" ")
            out.append(name, styles[name])
            # The toggles' state, tersely: the legend must fit 58 columns (100-column terminal).
            if name == "rejected":
                out.append(":on" if self.options.show_rejected else ":off", styles["meta"])
            elif name == "forced":
                out.append(":on" if self.options.show_forced else ":off", styles["meta"])
        return out
