"""The prompt: multi-line, Enter submits, ctrl+j (or shift+enter where the terminal reports it)
inserts a newline, ↑/↓ on the first/last line walk the prompt history."""

from __future__ import annotations

from textual import events
from textual.message import Message
from textual.widgets import TextArea


class PromptInput(TextArea):
    DEFAULT_CSS = """
    PromptInput { height: auto; max-height: 6; min-height: 3; }
    """

    class Submitted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, *, id: str | None = None, placeholder: str = "", blink: bool = True) -> None:
        super().__init__(id=id, soft_wrap=True, placeholder=placeholder, highlight_cursor_line=False)
        self.cursor_blink = blink
        self.prompt_history: list[str] = []
        self._history_pos: int | None = None
        self._draft = ""

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.submit()
            return
        if event.key in ("ctrl+j", "shift+enter"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        await super()._on_key(event)

    def submit(self) -> None:
        text = self.text.strip()
        if not text or self.read_only:
            return
        if not self.prompt_history or self.prompt_history[-1] != text:
            self.prompt_history.append(text)
        self._history_pos = None
        self.load_text("")
        self.post_message(self.Submitted(text))

    def action_cursor_up(self, select: bool = False) -> None:
        if not select and self.cursor_location[0] == 0 and self.prompt_history:
            if self._history_pos is None:
                self._draft = self.text
                self._history_pos = len(self.prompt_history)
            if self._history_pos > 0:
                self._history_pos -= 1
                self._show(self.prompt_history[self._history_pos])
            return
        super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        if not select and self._history_pos is not None and self.cursor_location[0] == self.document.line_count - 1:
            self._history_pos += 1
            if self._history_pos >= len(self.prompt_history):
                self._history_pos = None
                self._show(self._draft)
            else:
                self._show(self.prompt_history[self._history_pos])
            return
        super().action_cursor_down(select)

    def _show(self, text: str) -> None:
        self.load_text(text)
        self.move_cursor(self.document.end)
