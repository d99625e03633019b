"""One block of the transcript (a user message, an agent step, a tool result ...).

Drawn with Textual's line API (``render_line``), not one ``render()`` of the whole block: the
block measures each logical line of its entry once, draws a line's rows only when they are shown,
and when tokens arrive re-measures only the lines that changed (a streaming answer's last line) and
repaints only the rows they cover. A 4,000-token answer therefore costs about what its last paragraph costs per frame, where a
whole-block ``render()`` re-converted and re-wrapped every token each frame (O(n) per frame).

Why not a stock widget: ``Log`` draws plain strings (no per-token styles); ``RichLog`` appends
whole lines and cannot grow its last one; ``Markdown`` streaming would parse model output as
Markdown (untrusted text, and a different look). Each line is still rendered by Textual's own
``Visual.to_strips``, with the block's CSS, so it looks exactly as a whole-block render did; while
text is being selected the block falls back to that whole-block render (selection spans lines).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Protocol

from rich.text import Text
from textual.content import Content
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.visual import Visual
from textual.widget import Widget

from specterm.ui.entries import Entry, ViewOptions
from specterm.ui.widgets.no_echo import NoEchoLayout


class StyleSource(Protocol):
    """What a block reads from its transcript (the transcript itself; a Protocol, so this module
    does not import the one that imports it)."""

    current_styles: dict[str, Any]
    options: ViewOptions


class TranscriptBlock(NoEchoLayout, Widget):
    DEFAULT_CSS = """
    TranscriptBlock { height: auto; }
    """

    def __init__(self, entry: Entry, transcript: StyleSource) -> None:
        super().__init__(classes=f"kind-{entry.kind}")
        self.entry = entry
        self._transcript = transcript
        self._key: Any = None  # (styles, options): any change rebuilds the lines' Content
        self._wkey: Any = None  # (width, base style): any change re-measures and redraws all rows
        self._version = -1  # entry.version the lines reflect
        self._lines: list[Text] = []  # the entry's logical lines (held: their ids stay unique)
        self._sizes: list[int] = []  # len() of each line when it was converted
        self._contents: list[Content] = []  # each logical line as Textual Content (width-free)
        self._starts: list[int] = [0]  # first row of each logical line, then the row count
        self._strips: list[list[Strip] | None] = []  # rows of each logical line, drawn on demand

    # -- whole-block render: text selection and copying read it -----------------------------------

    def render(self) -> Content:
        styles, opts = self._transcript.current_styles, self._transcript.options
        return Content.from_rich_text(self.entry.render(styles, opts))

    # -- the line API ------------------------------------------------------------------------------

    def _update(self, width: int) -> tuple[int, int, int]:
        """Bring the measurements up to date for ``width``. Returns ``(first changed row, rows
        before, rows now)``; the first changed row equals the row count when nothing changed.
        Measuring wraps plain text only; rows are drawn (styled strips) when first shown."""
        styles, opts = self._transcript.current_styles, self._transcript.options
        before = self._starts[-1]
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
        wkey = (width, self.visual_style)
        if wkey != self._wkey:  # a new width (or base style): every row is measured and drawn again
            self._wkey, same = wkey, 0
        n = len(self._contents)
        if same >= n and len(self._starts) == n + 1:
            return before, before, before
        starts = self._starts[: same + 1]
        for content in self._contents[same:]:
            # Textual wraps each logical line on its own, so rows add up to a whole-block render's.
            starts.append(starts[-1] + content.get_height(self.styles, width))
        self._starts = starts
        self._strips = self._strips[:same] + [None] * (n - same)
        return starts[same], before, starts[-1]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if not width:
            return 0
        self._update(width)
        return self._starts[-1]

    def render_line(self, y: int) -> Strip:
        if self.text_selection is not None:  # selection styles span lines: whole-block render
            return super().render_line(y)
        width = self.size.width
        self._update(width)
        starts = self._starts
        i = bisect_right(starts, y) - 1
        if 0 <= y < starts[-1] and i < len(self._strips):
            rows = self._strips[i]
            if rows is None:  # Textual's own per-line path (wrap, fold, tabs, base style)
                rows = self._strips[i] = Visual.to_strips(self, self._contents[i], width, None, self.visual_style)
            if y - starts[i] < len(rows):
                return rows[y - starts[i]]
        return Strip.blank(width, self.visual_style.rich_style)

    def entry_changed(self) -> None:
        """The entry changed (tokens, a line, the footer): repaint the rows that changed, and lay
        the transcript out again only when the block's height changed."""
        if not self.is_mounted:
            return  # mounting applies its CSS, which lays it out: asking now meant a second reflow
        width = self.size.width
        if not width or self._key is None:  # not laid out yet: the first layout wraps everything
            self.refresh(layout=True)
            return
        first, before, now = self._update(width)
        if now != before:
            self.refresh(layout=True)
        elif first < now:
            self.refresh(Region(0, first, width, now - first))
