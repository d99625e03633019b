"""One transcript entry measured into rows and drawn on demand (no widget: the transcript draws them).

The entry gives its logical lines (``Entry.lines``: a line that did not change is the same object,
and only a request's last line grows in place). ``update`` converts and measures only the lines that
changed since the last call (a streaming answer's last line), so a 4,000-token answer costs about what
its last paragraph costs per frame; ``row`` draws a line's rows the first time one of them is shown,
with Textual's own ``Visual.to_strips`` and the transcript's CSS (wrapping, folding, tabs, base
style), so a row looks exactly as a whole-entry render would.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.content import Content
from textual.strip import Strip
from textual.visual import Visual
from textual.widget import Widget

from specterm.ui.entries import Entry, ViewOptions


class EntryRows:
    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self._key: Any = None  # (styles, options): any change rebuilds the lines' Content
        self._wkey: Any = None  # (width, base style): any change re-measures and redraws all rows
        self._version = -1  # entry.version the lines reflect
        self._lines: list[Text] = []  # the entry's logical lines (held: their ids stay unique)
        self._sizes: list[int] = []  # len() of each line when it was converted
        self._contents: list[Content] = []  # each logical line as Textual Content (width-free)
        self._starts: list[int] = [0]  # first row of each logical line, then the row count
        self._strips: list[list[Strip] | None] = []  # rows of each logical line, drawn on demand

    @property
    def height(self) -> int:
        return self._starts[-1]

    def update(self, widget: Widget, styles: dict[str, Style], opts: ViewOptions, width: int) -> int:
        """Bring the measurements up to date for ``width`` (the text's width, in cells). Returns the
        first row that changed (``height`` when nothing did). Measuring wraps plain text only; rows
        are drawn when first shown."""
        if (id(styles), opts) != self._key:
            self._key, self._version = (id(styles), opts), -1
            self._lines, self._sizes, self._contents = [], [], []
        same = len(self._lines)  # first logical line whose content changed
        if self.entry.version != self._version:
            self._version = self.entry.version
            lines = self.entry.lines(styles, opts)
            old, sizes = self._lines, self._sizes
            same, limit = 0, min(len(lines), len(old))
            while same < limit and lines[same] is old[same] and len(lines[same]) == sizes[same]:
                same += 1
            self._contents[same:] = [Content.from_rich_text(line) for line in lines[same:]]
            self._lines, self._sizes = list(lines), [len(t) for t in lines]
        wkey = (width, widget.visual_style)
        if wkey != self._wkey:  # a new width (or base style): every row is measured and drawn again
            self._wkey, same = wkey, 0
        n = len(self._contents)
        if same >= n and len(self._starts) == n + 1:
            return self._starts[-1]
        starts = self._starts[: same + 1]
        for content in self._contents[same:]:
            # Textual wraps each logical line on its own, so rows add up to a whole-entry render's.
            starts.append(starts[-1] + content.get_height(widget.styles, width))
        self._starts = starts
        self._strips = self._strips[:same] + [None] * (n - same)
        return starts[same]

    def row(self, widget: Widget, y: int) -> Strip:
        """Row ``y`` of the entry (``0 <= y < height``), as wide as the text it holds."""
        starts = self._starts
        i = bisect_right(starts, y) - 1
        rows = self._strips[i]
        if rows is None:  # Textual's own per-line path (wrap, fold, tabs, base style)
            width = self._wkey[0]
            rows = self._strips[i] = Visual.to_strips(widget, self._contents[i], width, None, widget.visual_style)
        return rows[y - starts[i]] if y - starts[i] < len(rows) else Strip.blank(0)
