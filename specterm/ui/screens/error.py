"""Shown instead of the dashboard when the engine cannot start: one plain sentence with the reason,
and what still works. The app never crashes with a traceback for a missing engine extra."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Center, Middle
from textual.screen import Screen
from textual.widgets import Footer, Static

from specterm.render import inert


class EngineErrorScreen(Screen):
    BINDINGS = [Binding("q", "app.quit", "quit"), Binding("escape", "app.quit", "quit", show=False)]
    DEFAULT_CSS = """
    EngineErrorScreen #engine-error {
        width: auto;
        max-width: 76;
        padding: 1 2;
        border: heavy $error;
    }
    """

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason

    def compose(self) -> ComposeResult:
        message = Text()
        message.append("engine failed to start: ", "bold")
        message.append(inert(self.reason))
        message.append(
            "\n\nsee `specterm doctor`; the engine needs the vLLM extra "
            "(pip install 'specterm[cpu]' or 'specterm[cuda]').\n"
            "`specterm replay FILE` works without an engine."
        )
        with Middle():
            with Center():
                yield Static(message, id="engine-error")
        yield Footer()
