"""One block of the transcript (a user message, an agent step, a tool result ...)."""

from __future__ import annotations

from typing import Any, Protocol

from textual.content import Content
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
        self._cache_key: tuple[int, int, object] | None = None
        self._cache = Content("")

    def render(self) -> Content:
        # render() runs more than once per frame (measure, then paint): rebuild only on change,
        # and cache the converted Content, not the Rich Text (the conversion is the costly part).
        styles, opts = self._transcript.current_styles, self._transcript.options
        key = (self.entry.version, id(styles), opts)
        if key != self._cache_key:
            self._cache = Content.from_rich_text(self.entry.render(styles, opts))
            self._cache_key = key
        return self._cache
