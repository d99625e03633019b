"""The scrolling transcript: one ``TranscriptBlock`` per entry of a ``TranscriptModel``.

Events are applied to the model by the app (cheap, no widget work); ``sync`` then mounts new blocks
and repaints changed ones, once per drained batch: a block repaints only the rows its new tokens
touched, and the transcript is laid out again only when a block's height changed. Old blocks beyond ``MAX_BLOCKS`` are removed so
a 100k-step replay keeps a bounded widget tree (the numbers in the panels still cover everything).
"""

from __future__ import annotations

from rich.style import Style
from textual.containers import VerticalScroll
from textual.widgets import Static

from specterm.ui.entries import ViewOptions
from specterm.ui.transcript_model import TranscriptModel
from specterm.ui.widgets.no_echo import NoEchoLayout
from specterm.ui.widgets.styles import COMPONENT_CLASSES, style_map
from specterm.ui.widgets.transcript_block import TranscriptBlock

MAX_BLOCKS = 300


class Transcript(NoEchoLayout, VerticalScroll, can_focus=True):
    COMPONENT_CLASSES = COMPONENT_CLASSES

    def __init__(self, *, id: str | None = None, hint: str = "") -> None:
        super().__init__(id=id)
        self._hint = hint
        self.model = TranscriptModel()
        self.options = ViewOptions()
        self.current_styles: dict[str, Style] = {}
        self._blocks: dict[int, TranscriptBlock] = {}

    def on_mount(self) -> None:
        self._restyle()
        if self._hint:
            self.mount(Static(self._hint, id="transcript-hint", markup=False))

    def _maybe_anchor(self) -> None:
        # Stay at the bottom while tokens stream in, until the user scrolls up. Anchoring only once
        # the content overflows: Textual bottom-aligns shorter anchored content, leaving a gap on top.
        if not self.is_anchored and self.max_scroll_y > 0:
            self.anchor()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:
            self._restyle()

    def _restyle(self) -> None:
        styles = style_map(self)
        # A new dict object invalidates every block's cached text; keep the old one if unchanged.
        if styles != self.current_styles:
            self.current_styles = styles
            for block in self._blocks.values():
                block.refresh(layout=True)

    def set_options(self, options: ViewOptions) -> None:
        if options != self.options:
            self.options = options
            for block in self._blocks.values():
                block.refresh(layout=True)

    def sync(self) -> None:
        """Mount new entries and repaint changed ones (once per batch)."""
        new = self.model.take_pending()
        dirty = self.model.take_dirty()
        if len(new) > MAX_BLOCKS:
            # A flood bigger than the whole scrollback: never mount what would be pruned at once.
            new = new[-MAX_BLOCKS:]
        if new and self._hint:
            self._hint = ""
            self.query("#transcript-hint").remove()
        if new:
            blocks = [TranscriptBlock(entry, self) for entry in new]
            for block in blocks:
                self._blocks[id(block.entry)] = block
            self.mount_all(blocks)
        for key in dirty:
            block = self._blocks.get(key)
            if block is not None:
                block.entry_changed()  # repaints the rows that changed; a layout only if it grew
        if not self.is_anchored:
            self.call_after_refresh(self._maybe_anchor)
        excess = len(self._blocks) - MAX_BLOCKS
        if excess > 0:
            old = list(self._blocks)[:excess]
            doomed = [self._blocks.pop(key) for key in old]
            self.model.entries = self.model.entries[excess:]
            self.remove_children(doomed)

    def clear(self) -> None:
        self.model = TranscriptModel()
        self._blocks.clear()
        self.remove_children()
