"""The scrolling transcript: every entry of a ``TranscriptModel`` drawn by one line-API widget.

Events are applied to the model by the app (cheap, no widget work); ``sync`` then measures new and
changed entries, once per drained batch. One ``ScrollView`` draws them all, as Textual's ``Log``
does, and not one widget per entry: a widget per entry made every new entry a reflow of all of them
(≈ 110 widgets after 30 agent turns, 17 ms of a 53 ms frame on this machine) and a repaint of each
through its own styles cache. Here a new entry is a new row range, the screen's layout holds one
widget whatever the transcript's length, and a row is drawn once and kept (``EntryRows``): scrolling
re-composes cached strips.

Rows: each entry is its rows after a coloured edge and a space (the look of the per-entry widgets
this replaced: an ``outer`` left border by kind, padding 1), then one blank row. Tokens that arrive
repaint only the rows they changed; the virtual height (and so a layout, which also keeps an anchored
view at the bottom) changes only when an entry grows by rows. Old entries beyond ``MAX_ENTRIES`` are
dropped, so a 100k-step replay keeps bounded state (the numbers in the panels still cover everything).
Text selection and copying work on the text of the rows, as ``Log``'s do.
"""

from __future__ import annotations

from bisect import bisect_right

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.content import Content
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.selection import Selection
from textual.strip import Strip
from textual.visual import Visual

from specterm.ui.entries import ViewOptions
from specterm.ui.transcript_model import TranscriptModel
from specterm.ui.widgets.entry_rows import EntryRows
from specterm.ui.widgets.styles import COMPONENT_CLASSES, style_map

MAX_ENTRIES = 300
EDGE = "▌"  # Textual's ``outer`` left border
GUTTER = 2  # the edge and a space before an entry's text
EDGE_KINDS = {
    "user": "user",
    "tool": "tool",
    "retrieve": "tool",
    "tool_result": "tool",
    "error": "error",
    "warning": "warning",
    "end": "end",
}
"""Entry kinds whose edge has its own colour (``.transcript--edge-<name>`` in app.tcss); others
take ``.transcript--edge``."""


class Transcript(ScrollView, can_focus=True):
    COMPONENT_CLASSES = (
        COMPONENT_CLASSES
        | {"transcript--edge", "transcript--hint"}
        | {f"transcript--edge-{name}" for name in set(EDGE_KINDS.values())}
    )
    ALLOW_SELECT = True
    # its own look, and each entry's edge by kind (component classes: rendered by the widget itself)
    DEFAULT_CSS = """
    Transcript {
        height: 1fr;
        padding: 0 1;
        scrollbar-size-vertical: 1;
        overflow-x: hidden;
    }

    Transcript > .transcript--hint {
        color: $foreground 60%;
    }

    Transcript > .transcript--edge {
        color: $primary 60%;
    }

    Transcript > .transcript--edge-user {
        color: $accent;
    }

    Transcript > .transcript--edge-tool {
        color: $secondary;
    }

    Transcript > .transcript--edge-error {
        color: $error;
    }

    Transcript > .transcript--edge-warning {
        color: $warning;
    }

    Transcript > .transcript--edge-end {
        color: $panel;
    }
    """
    options: reactive[ViewOptions] = reactive(ViewOptions, layout=False, repaint=False, init=False)
    """What the tokens show (rejected drafts, forced marks, an answer's tokens): bound to the screen's."""

    def __init__(self, *, id: str | None = None, hint: str = "") -> None:
        super().__init__(id=id)
        self.hint = hint
        """Shown in the empty transcript until the first entry comes."""
        self.model = TranscriptModel()
        self.current_styles: dict[str, Style] = {}
        self._items: list[EntryRows] = []
        self._index: dict[int, int] = {}  # id(entry) -> position in _items
        self._tops: list[int] = [0]  # first row of each item, then the row count
        self._edges: dict[str, Segment] = {}
        self._hint_rows: list[Strip] = []
        self._width = 0  # the text width the rows were measured for

    # -- styles and options ------------------------------------------------------------------------

    def on_mount(self) -> None:
        self._restyle()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:
            self._restyle()

    def _restyle(self) -> None:
        styles = style_map(self)
        self._edges = {}
        self._hint_rows = []
        # A new dict object invalidates every entry's cached text; keep the old one if unchanged.
        if styles != self.current_styles:
            self.current_styles = styles
            self._measure_all()
        self.refresh()

    def watch_options(self, old: ViewOptions, new: ViewOptions) -> None:
        # a reactive compares before calling: only a real change re-measures
        self._measure_all()

    # -- measuring ---------------------------------------------------------------------------------

    def _text_width(self) -> int:
        return max(self.scrollable_content_region.width - GUTTER, 1)

    def on_resize(self) -> None:
        self._rewidth()

    def watch_show_vertical_scrollbar(self) -> None:
        # The scrollbar takes a column from the text without resizing the widget (no Resize event).
        self.call_later(self._rewidth)

    def _rewidth(self) -> None:
        if self._text_width() != self._width:
            self._measure_all()

    def _measure_all(self) -> None:
        self._hint_rows = []
        self._measure(range(len(self._items)), resize=True)

    def _measure(self, changed: range | list[int], resize: bool = False) -> None:
        """Bring the items at ``changed`` (ascending positions) up to date: repaint the rows that
        changed, and set a new virtual height (a layout) only when an item's height changed."""
        if not self.is_mounted or not self.current_styles:
            return  # mounting styles and sizes everything
        self._width = width = self._text_width()
        styles, opts, tops = self.current_styles, self.options, self._tops
        moved = len(tops) - 1  # the first item whose top row or height is not known to be right
        for i in changed:
            item = self._items[i]
            before = tops[i + 1] - tops[i] - 1 if i < moved else -1
            first = item.update(self, styles, opts, width)
            if item.height != before:
                moved = min(moved, i)
            elif first < item.height:
                self.refresh_lines(tops[i] + first, item.height - first)
        if moved < len(self._items):
            del tops[moved + 1 :]
            for item in self._items[moved:]:
                tops.append(tops[-1] + item.height + 1)  # an entry's rows, then a blank row
            # A new height is a layout (it scrolls an anchored view: a repaint of every row shown).
            self.virtual_size = Size(0, self._height())  # no horizontal scrolling: rows wrap
            bottom = max(tops[-1], self.scroll_offset.y + self.size.height)  # rows shrunk: clear them
            self.refresh_lines(tops[moved], bottom - tops[moved])
        if resize:
            self.virtual_size = Size(0, self._height())
            self.refresh()

    def _height(self) -> int:
        return self._tops[-1] if self._items else len(self._hint_strips())

    # -- the model ---------------------------------------------------------------------------------

    def sync(self) -> None:
        """Measure new entries and re-measure changed ones (once per batch)."""
        new = self.model.take_pending()
        dirty = self.model.take_dirty()
        flood = len(new) > MAX_ENTRIES
        if flood:  # bigger than the whole scrollback: never measure what would be dropped at once
            new = new[-MAX_ENTRIES:]
        if new:
            self.hint = ""
        start = len(self._items)
        for entry in new:
            self._index[id(entry)] = len(self._items)
            self._items.append(EntryRows(entry))
        changed = sorted(
            {self._index[key] for key in dirty if key in self._index} | set(range(start, len(self._items)))
        )
        excess = len(self._items) - MAX_ENTRIES
        if excess > 0:
            self._drop(excess)
            changed = [i - excess for i in changed if i >= excess]
        if excess > 0 or flood:  # the model keeps what is shown (the panels' numbers cover the rest)
            self.model.entries = [item.entry for item in self._items]
        self._measure(changed)
        if not self.is_anchored:
            self.call_after_refresh(self._maybe_anchor)

    def _maybe_anchor(self) -> None:
        # Stay at the bottom while tokens stream in, until the user scrolls up. Anchoring only once
        # the content overflows: anchored content shorter than the view would sit at its bottom.
        if not self.is_anchored and self.max_scroll_y > 0:
            self.anchor()

    def _drop(self, count: int) -> None:
        tops = self._tops
        removed_rows = tops[count] if count < len(tops) else 0
        self._tops = [top - removed_rows for top in tops[count:]] if count < len(tops) else [0]
        del self._items[:count]
        self._index = {id(item.entry): i for i, item in enumerate(self._items)}
        if removed_rows and self.scroll_y < self.max_scroll_y:  # scrolled up: keep what they read in view
            self.scroll_to(y=max(self.scroll_y - removed_rows, 0), animate=False, immediate=True)

    def scroll_to_request(self, request_id: str) -> bool:
        """Bring the entry of this engine request to the top of the view (False: not shown any more)."""
        entry = self.model.entry_for(request_id)
        index = self._index.get(id(entry)) if entry is not None else None
        if index is None:
            return False
        self.scroll_to(y=self._tops[index], animate=False)
        return True

    def clear(self) -> None:
        self.model = TranscriptModel()
        self._items, self._index, self._tops = [], {}, [0]
        self._measure([], resize=True)

    # -- drawing -----------------------------------------------------------------------------------

    def _edge(self, kind: str) -> Segment:
        name = EDGE_KINDS.get(kind)
        edge = self._edges.get(kind)
        if edge is None:
            style = self.get_component_rich_style(f"transcript--edge-{name}" if name else "transcript--edge")
            edge = self._edges[kind] = Segment(EDGE, style)
        return edge

    def _hint_strips(self) -> list[Strip]:
        if not self.hint:
            return []
        if not self._hint_rows:  # padding 1 above and below, 2 at the sides
            style = self.get_component_rich_style("transcript--hint")
            width = max(self.scrollable_content_region.width - 4, 1)
            content = Content.from_rich_text(Text(self.hint, style))
            rows = Visual.to_strips(self, content, width, None, self.visual_style)
            pad = Segment("  ", self.visual_style.rich_style)
            blank = Strip([])
            self._hint_rows = [blank, *(Strip.join([Strip([pad]), row]) for row in rows), blank]
        return self._hint_rows

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.visual_style.rich_style
        y += self.scroll_offset.y
        if not self._items:
            hint = self._hint_strips()
            row = hint[y] if y < len(hint) else Strip([])
            return row.crop_extend(0, width, base)
        i = bisect_right(self._tops, y) - 1
        if not 0 <= i < len(self._items):
            return Strip.blank(width, base)
        item = self._items[i]
        r = y - self._tops[i]
        if r >= item.height:  # the blank row after an entry
            return Strip.blank(width, base)
        text = item.row(self, r).crop_extend(0, width - GUTTER, base)
        selection = self.text_selection
        if selection is not None and (span := selection.get_span(y)) is not None:
            start, end = span
            end = text.cell_length if end == -1 else end
            style = self.screen.get_component_rich_style("screen--selection")
            text = Strip.join([text.crop(0, start), text.crop(start, end).apply_style(style), text.crop(end)])
        return Strip.join([Strip([self._edge(item.entry.kind), Segment(" ", base)]), text.apply_offsets(0, y)])

    # -- selection ---------------------------------------------------------------------------------

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The selected text, from the rows' text (selection offsets are text columns: the edge and
        its space carry none)."""
        lines = []
        for item in self._items:
            lines.extend(item.row(self, r).text.rstrip() for r in range(item.height))
            lines.append("")
        return selection.extract("\n".join(lines)), "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self.refresh()
