"""The findings list (F6): what the detectors found, newest last; choosing one closes the list and
the dashboard jumps to its request (transcript scrolled to it, panels following it).

A modal over the dashboard: the replay or live request keeps running underneath. The list is the
findings as they were when it opened (they are rare; reopen it for newer ones)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from specterm.events import Finding
from specterm.render import inert

_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


class FindingsScreen(ModalScreen[str | None]):
    """Dismissed with the chosen finding's request id (``None``: closed, or a session-wide one)."""

    BINDINGS = [Binding("escape,f6,q", "dismiss_none", "close")]
    DEFAULT_CSS = """
    FindingsScreen { align: center middle; }
    FindingsScreen > Vertical { width: 90%; max-width: 110; height: auto; max-height: 80%;
                                border: round $primary; background: $surface; padding: 0 1; }
    FindingsScreen OptionList { height: auto; max-height: 20; border: none; }
    """

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__()
        self.findings = list(findings)

    def compose(self) -> ComposeResult:
        with Vertical():
            n = len(self.findings)
            yield Static(Text(f"findings: {n} · Enter jumps to the request · Esc closes", style="bold"))
            options = []
            for i, f in enumerate(self.findings):
                # Text, never markup: messages quote what the model wrote and what the user asked.
                label = Text(f"⚑ {f.kind} ", style=_STYLE[f.severity])
                label.append(f"t={f.t:.1f}s  ", style="dim")
                label.append(inert(f.message))
                options.append(Option(label, id=str(i)))
            if not options:
                options.append(Option(Text("nothing found so far", style="dim"), id="none", disabled=True))
            yield OptionList(*options, id="findings-list")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        finding = self.findings[int(event.option.id or 0)]
        self.dismiss(finding.request_id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
