"""The dashboard: header, transcript + legend + prompt in the middle, panels at the side (or in a
row below on narrow terminals), footer with the key bindings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer

from specterm.ui.widgets.acceptance_panel import AcceptancePanel
from specterm.ui.widgets.gpu_panel import GpuPanel
from specterm.ui.widgets.latency_panel import LatencyPanel
from specterm.ui.widgets.legend import Legend
from specterm.ui.widgets.prompt_input import PromptInput
from specterm.ui.widgets.session_header import SessionHeader
from specterm.ui.widgets.transcript import Transcript

if TYPE_CHECKING:
    from specterm.ui.app import SpecTermApp


HINT = (
    "Type a prompt below and press Enter. Each token is styled by its verdict (legend below): "
    "accepted drafts, the target's corrections, bonus tokens. F3 shows the rejected drafts, "
    "F2 hides the panels, Esc cancels a request, ctrl+p lists every command."
)
SHORT_HINT = "Tokens are styled by verdict (legend below). F3 rejected drafts · F2 panels · Esc cancel · ctrl+p commands."
"""After an intro: the two together must fit the transcript of an 80×24 terminal."""


class MainScreen(Screen):
    # Below 100 columns the side panels move into a row under the transcript (-narrow in app.tcss).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]

    def __init__(self, app: "SpecTermApp") -> None:
        super().__init__()
        self._owner = app

    def compose(self) -> ComposeResult:
        app = self._owner
        state = app.state
        yield SessionHeader(state, id="header")
        with Horizontal(id="body"):
            with Vertical(id="main"):
                hint = (f"{app.intro}\n\n{SHORT_HINT}" if app.intro else HINT) if state.mode == "live" else ""
                yield Transcript(id="transcript", hint=hint)
                yield Legend(id="legend")
                if state.mode == "live":
                    yield PromptInput(
                        id="prompt",
                        placeholder=f"{app.placeholder} (Enter sends, ctrl+j new line, ↑ history)",
                        blink=not app.deterministic,
                    )
            with VerticalScroll(id="side"):
                yield AcceptancePanel(state, id="acceptance")
                yield LatencyPanel(state, id="latency")
                yield GpuPanel(state, idle_text=app.gpu_idle_text, id="gpu")
        yield Footer()

    def on_mount(self) -> None:
        self._owner.main_screen_ready()
