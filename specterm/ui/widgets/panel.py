"""Base for the side panels: redrawn at a human rate (``MIN_INTERVAL_S``) and only when what they
show changed, whatever the event rate.

The app marks a panel stale after each batch (``mark_stale``); a panel rebuilds its text at once if
its last rebuild is at least ``MIN_INTERVAL_S`` old, otherwise one timer does it when that interval
is up. The rebuilt text is compared with what is on screen: equal (the numbers did not move, e.g.
only the transcript changed) means no repaint at all; a change of the number of lines is the only
case that lays the screen out again. ``flush`` rebuilds immediately (tests, the end of a replay).
Nothing runs between batches, so an idle dashboard costs nothing here.
"""

from __future__ import annotations

import time

from rich.style import Style
from rich.text import Text
from textual import events
from textual.timer import Timer
from textual.widget import Widget

from specterm.ui.widgets.no_echo import NoEchoLayout
from specterm.ui.widgets.styles import COMPONENT_CLASSES, style_map

MIN_INTERVAL_S = 0.25
"""Four redraws a second at most: numbers that change faster cannot be read anyway, and every
redraw is CPU taken from the engine on a small machine."""


class Panel(NoEchoLayout, Widget):
    COMPONENT_CLASSES = COMPONENT_CLASSES
    DEFAULT_CSS = """
    Panel {
        height: auto;
        border: round $primary 50%;
        border-title-color: $primary;
        border-title-style: bold;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, title: str, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="panel")
        self.border_title = title
        self._last = 0.0
        self._timer: Timer | None = None
        self._width = 0
        self._height = 0
        self._styles: dict[str, Style] | None = None
        self._shown: Text | None = None  # the text on screen (render() returns it)

    def mark_stale(self) -> None:
        if self._timer is not None:
            return
        wait = MIN_INTERVAL_S - (time.monotonic() - self._last)
        if wait <= 0:
            self.flush()
        else:
            self._timer = self.set_timer(wait, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._last = time.monotonic()
        text = self.body(self.text_styles, self.inner_width)
        shown = self._shown
        if shown is not None and text == shown:
            return  # same numbers: nothing to paint
        self._shown = text
        # Height is auto: only a different line count (or a wrapping panel's text) moves anything else.
        relayout = (
            shown is None or self.styles.text_wrap != "nowrap" or text.plain.count("\n") != shown.plain.count("\n")
        )
        self.refresh(layout=relayout)

    @property
    def text_styles(self) -> dict[str, Style]:
        # Resolving component styles is costly (CSS lookups per class): once per theme change.
        if self._styles is None:
            self._styles = style_map(self)
        return self._styles

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = self._shown = None  # rebuilt by the next render, in the new styles

    def on_resize(self, event: events.Resize) -> None:
        # Remembered here: asking for content_region inside render() forces a full compositor
        # map during layout, which cost seconds per flood in the throughput benchmark.
        width = event.size.width - self.styles.gutter.width  # Resize carries the outer size
        # Only a height the layout sets (the narrow row) bounds the text: an auto height is the text's
        # own, and rebuilding on it would lay the side column out twice for every line added.
        height = self.styles.height
        fixed = height is not None and not height.is_auto
        lines = event.size.height - self.styles.gutter.height if fixed else 0
        if width != self._width or lines != self._height:
            self._width, self._height = width, lines
            self._shown = None
            self.refresh(layout=True)

    @property
    def inner_width(self) -> int:
        return max(10, self._width or 30)

    @property
    def inner_height(self) -> int:
        """The lines the layout gives the text; 0 where the height is the text's own (auto) or not
        known yet (before the first layout), so a body that fills it adds nothing then."""
        return self._height

    def render(self) -> Text:
        if self._shown is None:
            self._shown = self.body(self.text_styles, self.inner_width)
        return self._shown

    def body(self, styles: dict[str, Style], width: int) -> Text:  # pragma: no cover - abstract
        raise NotImplementedError
