"""One block of the transcript (a user message, an agent step, a tool result ...).

Drawn with Textual's line API (``render_line``), not one ``render()`` of the whole block: the
block keeps the wrapped strips of each logical line of its entry and, when tokens arrive, re-wraps
only the lines that changed (a streaming answer's last line) and repaints only the rows they
cover. A 4,000-token answer therefore costs about what its last paragraph costs per frame, where a
whole-block ``render()`` re-converted and re-wrapped every token each frame (O(n) per frame).

Why not a stock widget: ``Log`` draws plain strings (no per-token styles); ``RichLog`` appends
whole lines and cannot grow its last one; ``Markdown`` streaming would parse model output as
Markdown (untrusted text, and a different look). Each line is still rendered by Textual's own
``Visual.to_strips``, with the block's CSS, so it looks exactly as a whole-block render did; while
text is being selected the block falls back to that whole-block render (selection spans lines).
"""

from __future__ import annotations

from typing import Any, Protocol

from rich.text import Text
from textual.content import Content
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.visual import Visual
from textual.widget import Widget

from specterm.ui.entries import Entry, ViewOptions


class StyleSource(Protocol):
    """What a block reads from its transcript (the transcript itself; a Protocol, so this module
    does not import the one that imports it)."""

    current_styles: dict[str, Any]
    options: ViewOptions


class TranscriptBlock(Widget):
    DEFAULT_CSS = """
    TranscriptBlock { height: auto; }
    """

    def __init__(self, entry: Entry, transcript: StyleSource) -> None:
        super().__init__(classes=f"kind-{entry.kind}")
        self.entry = entry
        self._transcript = transcript
        self._key: Any = None  # (width, styles, options, base style): any change re-wraps all
        self._version = -1  # entry.version the strips reflect
        self._lines: list[Text] = []  # the entry's logical lines (held: their ids stay unique)
        self._sizes: list[int] = []  # len() of each line when it was wrapped
        self._wrapped: list[list[Strip]] = []  # strips of each logical line
        self._strips: list[Strip] = []  # all rows, flat

    # -- whole-block render: text selection and copying read it -----------------------------------

    def render(self) -> Content:
        styles, opts = self._transcript.current_styles, self._transcript.options
        return Content.from_rich_text(self.entry.render(styles, opts))

    # -- the line API ------------------------------------------------------------------------------

    def _update(self, width: int) -> tuple[int, int, int]:
        """Bring the strips up to date for ``width``. Returns ``(first changed row, rows before,
        rows now)``; the first changed row equals the row count when nothing changed."""
        styles, opts = self._transcript.current_styles, self._transcript.options
        key = (width, id(styles), opts, self.visual_style)
        before = len(self._strips)
        if key != self._key:
            self._key, self._version = key, -1
            self._lines, self._sizes, self._wrapped, self._strips = [], [], [], []
        elif self.entry.version == self._version:
            return before, before, before
        self._version = self.entry.version
        lines = self.entry.lines(styles, opts)
        old, sizes = self._lines, self._sizes
        same = 0
        limit = min(len(lines), len(old))
        while same < limit and lines[same] is old[same] and len(lines[same]) == sizes[same]:
            same += 1
        if same == len(lines) == len(old):
            return before, before, before
        wrapped = self._wrapped[:same]
        first_row = sum(map(len, wrapped))
        style = self.visual_style
        for line in lines[same:]:
            # Textual's own per-line path (wrap, fold, tabs, base style): the same rows a
            # whole-block render gives, as Content wraps each logical line on its own.
            wrapped.append(Visual.to_strips(self, Content.from_rich_text(line), width, None, style))
        self._lines, self._sizes, self._wrapped = list(lines), [len(line) for line in lines], wrapped
        self._strips = self._strips[:first_row]
        for strips in wrapped[same:]:
            self._strips.extend(strips)
        return first_row, before, len(self._strips)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if not width:
            return 0
        self._update(width)
        return len(self._strips)

    def render_line(self, y: int) -> Strip:
        if self.text_selection is not None:  # selection styles span lines: whole-block render
            return super().render_line(y)
        self._update(self.size.width)
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width, self.visual_style.rich_style)

    def entry_changed(self) -> None:
        """The entry changed (tokens, a line, the footer): repaint the rows that changed, and lay
        the transcript out again only when the block's height changed."""
        width = self.size.width
        if not width or self._key is None:  # not laid out yet: the first layout wraps everything
            self.refresh(layout=True)
            return
        first, before, now = self._update(width)
        if now != before:
            self.refresh(layout=True)
        elif first < now:
            self.refresh(Region(0, first, width, now - first))
