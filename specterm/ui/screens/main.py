"""The dashboard: header, transcript + legend + prompt in the middle, panels at the side (or in a
row below on narrow terminals), footer with the key bindings.

The screen owns what the user does with it: its key bindings and actions (view toggles, copy and
export, replay controls, cancel), its command-palette entries (``commands``, which the app's
``get_system_commands`` yields) and the header's status text (``update_status``). The app keeps the
wiring: event sources, the event pump and live requests. The screen reaches the app only through
``DashboardHost`` (a Protocol), so it does not import the app.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer

from specterm.render import inert
from specterm.ui.entries import ViewOptions
from specterm.ui.screens.findings import FindingsScreen
from specterm.ui.state import ViewState
from specterm.ui.widgets.acceptance_panel import AcceptancePanel
from specterm.ui.widgets.fleet_list import FleetList
from specterm.ui.widgets.gpu_panel import GpuPanel
from specterm.ui.widgets.latency_panel import LatencyPanel
from specterm.ui.widgets.legend import Legend
from specterm.ui.widgets.panel import Panel
from specterm.ui.widgets.prompt_input import PromptInput
from specterm.ui.widgets.request_list import RequestList
from specterm.ui.widgets.session_header import SessionHeader
from specterm.ui.widgets.transcript import Transcript

SPEEDS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 25.0, 100.0, math.inf)


HINT = (
    "Type a prompt below and press Enter. Each token is styled by its verdict (legend below): "
    "accepted drafts, the target's corrections, bonus tokens. F3 shows the rejected drafts, "
    "F2 hides the panels, Esc cancels a request, ctrl+p lists every command."
)
ATTACH_HINT = (
    "Watching a vLLM server: each request its clients send appears here as the server runs it, every "
    "token styled by its verdict (legend below). The requests list picks one for the panels; F3 shows "
    "the rejected drafts, ctrl+p lists every command."
)
SHORT_HINT = (
    "Tokens are styled by verdict (legend below). F3 rejected drafts · F2 panels · Esc cancel · ctrl+p commands."
)
"""After an intro: the two together must fit the transcript of an 80×24 terminal."""


class DashboardHost(Protocol):
    """What the dashboard needs from the app that hosts it."""

    state: ViewState
    replayer: Any
    export_dir: Any
    intro: str
    placeholder: str
    deterministic: bool
    gpu_idle_text: str
    attach_view: bool
    """A replay of an attach session: the requests (and replicas) lists, as ``attach`` showed them."""

    @property
    def runner(self) -> Any: ...

    @property
    def request_in_flight(self) -> Any:
        """The cancel event of the running request, or ``None``."""

    def cancel_request(self) -> None: ...

    def main_screen_ready(self) -> None: ...


class MainScreen(Screen):
    # Below 100 columns the side panels move into a row under the transcript (-narrow in app.tcss).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    options: reactive[ViewOptions] = reactive(ViewOptions)
    """The view options (F3 rejected, F4 forced, F5 answer tokens); the transcript and the legend
    are bound to it (``data_bind``), so a toggle is one assignment."""
    BINDINGS = [
        Binding("escape", "cancel", "cancel"),
        Binding("space", "toggle_pause", "pause"),
        Binding("n,full_stop", "step", "step"),
        Binding("e", "end", "end"),
        Binding("plus,equals_sign", "faster", "faster"),
        Binding("minus", "slower", "slower"),
        # F2 only: a letter would fire while the read-only prompt waits for the engine to start.
        Binding("f2", "toggle_panels", "panels"),
        Binding("f3,r", "toggle_rejected", "rejected"),
        Binding("f4,f", "toggle_forced", "forced"),
        Binding("f5,a", "toggle_answer_tokens", "tokens"),
        Binding("f8", "copy_answer", "copy", show=False),
        # Not in the footer (it is full at 80 columns): the header's ⚑ badge names the key.
        Binding("f6", "findings", "findings", show=False),
    ]
    _REPLAY_ONLY = {"toggle_pause", "step", "end", "faster", "slower"}
    _LIVE_ONLY = {"cancel"}

    def __init__(self, app: DashboardHost) -> None:
        super().__init__()
        self._owner = app

    def compose(self) -> ComposeResult:
        app = self._owner
        state = app.state
        yield SessionHeader(state, id="header")
        with Horizontal(id="body"):
            with Vertical(id="main"):
                hint = {"live": f"{app.intro}\n\n{SHORT_HINT}" if app.intro else HINT, "attach": ATTACH_HINT}.get(
                    state.mode, ""
                )
                yield Transcript(id="transcript", hint=hint).data_bind(MainScreen.options)
                yield Legend(id="legend").data_bind(MainScreen.options)
                if state.mode == "live":
                    yield PromptInput(
                        id="prompt",
                        placeholder=f"{app.placeholder} (Enter sends, ctrl+j new line, ↑ history)",
                        blink=not app.deterministic,
                    )
            with VerticalScroll(id="side"):
                if state.mode == "attach" or app.attach_view:
                    with Vertical(id="lists"):  # one column of the narrow row: the panels keep theirs
                        yield FleetList(state, id="fleet")
                        yield RequestList(state, id="requests")
                yield AcceptancePanel(state, id="acceptance")
                yield LatencyPanel(state, id="latency")
                yield GpuPanel(state, idle_text=app.gpu_idle_text, id="gpu")
        yield Footer()

    def on_mount(self) -> None:
        self._owner.main_screen_ready()

    def action_toggle_rejected(self) -> None:
        self.options = replace(self.options, show_rejected=not self.options.show_rejected)

    def action_toggle_forced(self) -> None:
        self.options = replace(self.options, show_forced=not self.options.show_forced)

    def action_toggle_answer_tokens(self) -> None:
        self.options = replace(self.options, show_answer_tokens=not self.options.show_answer_tokens)

    def action_toggle_panels(self) -> None:
        self.query_one("#side").toggle_class("-hidden")

    def action_copy_answer(self) -> None:
        answer = self.query_one(Transcript).model.last_answer
        if not answer:
            self.notify("no answer to copy yet", severity="warning")
            return
        # Inert: a pasted answer must not carry the model's escape sequences into a terminal.
        self.app.copy_to_clipboard(inert(answer))
        self.notify(f"copied the last answer ({len(answer)} characters)")

    def action_findings(self) -> None:
        self.app.push_screen(FindingsScreen(self._owner.state.summary.findings), self._jump_to_request)

    def _jump_to_request(self, request_id: str | None) -> None:
        """Show ``request_id`` (a finding's): the panels follow it, the transcript scrolls to it."""
        if request_id is None:
            return
        self._owner.state.current_request = request_id
        if not self.query_one(Transcript).scroll_to_request(request_id):
            self.notify(f"{request_id} is not in the transcript any more", severity="warning")
        for panel in self.query(Panel):
            panel.flush()

    # -- replay controls ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self._REPLAY_ONLY:
            return self._owner.replayer is not None
        if action in self._LIVE_ONLY:
            return self._owner.state.mode == "live"
        return True

    def action_toggle_pause(self) -> None:
        self._owner.replayer.toggle_pause()
        self.update_status()

    def action_step(self) -> None:
        self._owner.replayer.step()
        self.update_status()

    def action_end(self) -> None:
        self._owner.replayer.jump_to_end()

    def _change_speed(self, direction: int) -> None:
        speed = self._owner.replayer.speed
        idx = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - speed) if math.isfinite(speed) else -i)
        new = SPEEDS[max(0, min(len(SPEEDS) - 1, idx + direction))]
        self._owner.replayer.set_speed(new)
        self.update_status()

    def action_faster(self) -> None:
        self._change_speed(+1)

    def action_slower(self) -> None:
        self._change_speed(-1)

    def action_cancel(self) -> None:
        if self._owner.request_in_flight is not None:
            self._owner.cancel_request()
            self.update_status()

    def update_status(self) -> None:
        """The header's status: the replay's state, or the live request's; and the findings badge."""
        header = self.query_one(SessionHeader)
        findings = self._owner.state.summary.findings
        if len(findings) != header.findings[0]:  # findings are only ever appended (or all reset)
            header.findings = (len(findings), any(f.severity == "error" for f in findings))
        r = self._owner.replayer
        if r is not None:
            speed = "max" if math.isinf(r.speed) else f"×{r.speed:g}"
            if r.finished:
                state = "done"
            elif r.paused:
                state = "⏸ paused"
            else:
                state = "▶"
            total = f"{r.total}+ (reading)" if r.loading else str(r.total)  # a long file still loading
            header.status = f"{state} {speed} {r.position}/{total}"
        elif (cancel := self._owner.request_in_flight) is not None:
            header.status = "cancelling…" if cancel.is_set() else "generating…"
        elif self._owner.runner is not None:
            header.status = "ready"

    # -- command palette ----------------------------------------------------------------------

    def commands(self, themes: Iterable[str], set_theme: Callable[[str], None]) -> Iterable[SystemCommand]:
        """This screen's command-palette entries (the app's ``get_system_commands`` yields them)."""
        yield SystemCommand(
            "Toggle rejected drafts",
            "Show draft tokens the target threw away, struck through",
            self.action_toggle_rejected,
        )
        yield SystemCommand(
            "Toggle forced marks", "Dim tokens the grammar forced (no real choice)", self.action_toggle_forced
        )
        yield SystemCommand(
            "Toggle answer tokens",
            "Show an answer as text, or as the call it was generated as, token by token in verdict colours",
            self.action_toggle_answer_tokens,
        )
        yield SystemCommand("Toggle panels", "Show or hide the side panels", self.action_toggle_panels)
        yield SystemCommand(
            "Findings", "What the detectors found (F6); choose one to jump to its request", self.action_findings
        )
        yield SystemCommand(
            "Copy last answer", "Copy the last answer to the clipboard (OSC 52)", self.action_copy_answer
        )
        if self._owner.replayer is not None:
            yield SystemCommand("Pause / resume replay", "Space", self.action_toggle_pause)
            yield SystemCommand("Jump to end of replay", "e", self.action_end)
            for n in range(self._owner.replayer.agent_steps):
                yield SystemCommand(
                    f"Jump to agent step {n}",
                    "Replay from the start of this agent step",
                    partial(self._owner.replayer.jump_to_agent_step, n),
                )
        for name in sorted(t for t in themes if t.startswith("specterm-")):
            yield SystemCommand(f"Theme: {name}", "Switch to this theme", partial(set_theme, name))
