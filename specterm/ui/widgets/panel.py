"""Base for the side panels: renders at most ~10 times a second, whatever the event rate.

The app marks a panel stale after each batch (``mark_stale``); a panel repaints at once if its last
repaint is at least ``MIN_INTERVAL_S`` old, otherwise one timer repaints it when that interval is
up. ``flush`` repaints immediately (tests and the end of a replay use it).
"""

from __future__ import annotations

import time

from rich.style import Style
from rich.text import Text
from textual import events
from textual.timer import Timer
from textual.widget import Widget

from specterm.ui.widgets.styles import COMPONENT_CLASSES, style_map

MIN_INTERVAL_S = 0.1


class Panel(Widget):
    COMPONENT_CLASSES = COMPONENT_CLASSES

    def __init__(self, title: str, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="panel")
        self.border_title = title
        self._last = 0.0
        self._timer: Timer | None = None
        self._width = 0

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
        self.refresh(layout=True)

    @property
    def text_styles(self) -> dict[str, Style]:
        return style_map(self)

    def on_resize(self, event: events.Resize) -> None:
        # Remembered here: asking for content_region inside render() forces a full compositor
        # map during layout, which cost seconds per flood in the throughput benchmark.
        self._width = event.size.width - self.styles.gutter.width  # Resize carries the outer size
        self.refresh(layout=True)

    @property
    def inner_width(self) -> int:
        return max(10, self._width or 30)

    def render(self) -> Text:
        return self.body(self.text_styles, self.inner_width)

    def body(self, styles: dict[str, Style], width: int) -> Text:  # pragma: no cover - abstract
        raise NotImplementedError
