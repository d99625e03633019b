"""Key actions and command-palette entries of the app: view toggles, copy / export, replay
controls, and the header's status text. A mixin of ``SpecTermApp`` (kept apart to keep app.py
about wiring: sources, the event pump, live requests)."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Iterable

from textual.app import SystemCommand
from textual.screen import Screen

from specterm.render import inert
from specterm.ui.entries import ViewOptions
from specterm.ui.screens.main import MainScreen
from specterm.ui.widgets.legend import Legend
from specterm.ui.widgets.session_header import SessionHeader
from specterm.ui.widgets.transcript import Transcript

SPEEDS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 25.0, 100.0, math.inf)


class ControlsMixin:
    """Needs from the app: ``options``, ``replayer``, ``runner``, ``_cancel``, ``export_dir`` and the
    Textual ``App`` API."""

    _REPLAY_ONLY = {"toggle_pause", "step", "end", "faster", "slower"}
    _LIVE_ONLY = {"cancel"}
    options: ViewOptions
    replayer: Any
    runner: Any
    _cancel: Any
    export_dir: Any

    def _set_options(self, options: ViewOptions) -> None:
        self.options = options
        self.query_one(Transcript).set_options(options)
        self.query_one(Legend).set_options(options)

    def action_toggle_rejected(self) -> None:
        self._set_options(ViewOptions(not self.options.show_rejected, self.options.show_forced))

    def action_toggle_forced(self) -> None:
        self._set_options(ViewOptions(self.options.show_rejected, not self.options.show_forced))

    def action_toggle_panels(self) -> None:
        self.screen.query_one("#side").toggle_class("-hidden")

    def action_copy_answer(self) -> None:
        answer = self.query_one(Transcript).model.last_answer
        if not answer:
            self.notify("no answer to copy yet", severity="warning")
            return
        # Inert: a pasted answer must not carry the model's escape sequences into a terminal.
        self.copy_to_clipboard(inert(answer))
        self.notify(f"copied the last answer ({len(answer)} characters)")

    def action_export_svg(self) -> None:
        path = self.save_screenshot(path=str(self.export_dir))
        self.notify(f"saved the view to {path}")

    # -- replay controls ----------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self._REPLAY_ONLY:
            return self.replayer is not None
        if action in self._LIVE_ONLY:
            return self.replayer is None and isinstance(self.screen, MainScreen)
        if action in {"toggle_rejected", "toggle_forced", "toggle_panels", "export_svg", "copy_answer"}:
            return isinstance(self.screen, MainScreen) or action == "export_svg"
        return True

    def action_toggle_pause(self) -> None:
        self.replayer.toggle_pause()
        self._update_status()

    def action_step(self) -> None:
        self.replayer.step()
        self._update_status()

    def action_end(self) -> None:
        self.replayer.jump_to_end()

    def _change_speed(self, direction: int) -> None:
        speed = self.replayer.speed
        idx = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - speed) if math.isfinite(speed) else -i)
        new = SPEEDS[max(0, min(len(SPEEDS) - 1, idx + direction))]
        self.replayer.set_speed(new)
        self._update_status()

    def action_faster(self) -> None:
        self._change_speed(+1)

    def action_slower(self) -> None:
        self._change_speed(-1)

    def _update_status(self) -> None:
        if not isinstance(self.screen, MainScreen):
            return
        header = self.screen.query_one(SessionHeader)
        r = self.replayer
        if r is not None:
            speed = "max" if math.isinf(r.speed) else f"×{r.speed:g}"
            if r.finished:
                state = "done"
            elif r.paused:
                state = "⏸ paused"
            else:
                state = "▶"
            header.set_status(f"{state} {speed} {r.position}/{r.total}")
        elif self._cancel is not None:
            header.set_status("cancelling…" if self._cancel.is_set() else "generating…")
        elif self.runner is not None:
            header.set_status("ready")

    # -- command palette ----------------------------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Toggle rejected drafts", "Show draft tokens the target threw away, struck through", self.action_toggle_rejected)
        yield SystemCommand("Toggle forced marks", "Dim tokens the grammar forced (no real choice)", self.action_toggle_forced)
        yield SystemCommand("Toggle panels", "Show or hide the side panels", self.action_toggle_panels)
        yield SystemCommand("Export SVG", "Save the current view as an SVG file", self.action_export_svg)
        yield SystemCommand("Copy last answer", "Copy the last answer to the clipboard (OSC 52)", self.action_copy_answer)
        if self.replayer is not None:
            yield SystemCommand("Pause / resume replay", "Space", self.action_toggle_pause)
            yield SystemCommand("Jump to end of replay", "e", self.action_end)
            for n in range(self.replayer.agent_steps):
                yield SystemCommand(f"Jump to agent step {n}", "Replay from the start of this agent step", partial(self.replayer.jump_to_agent_step, n))
        for name in sorted(t for t in self.available_themes if t.startswith("specterm-")):
            yield SystemCommand(f"Theme: {name}", "Switch to this theme", partial(setattr, self, "theme", name))
