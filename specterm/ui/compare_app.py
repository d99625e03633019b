"""The compare split view's app: ``make_compare_app`` builds it for ``specterm compare`` (live: a
``CompareRun`` on a thread worker) and for ``specterm replay`` of a compare session (a ``Replayer``
on its own thread), and for the snapshot tests (``deterministic``, events applied directly).

Events cross from those threads only through ``EventBridge`` (one ``EventsReady`` per batch); the
UI routes each by its lane to that side's transcript and feeds the shared ``CompareTally``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from textual import work

from specterm.bench.compare_tally import LANES, CompareTally
from specterm.events import BaseEvent, Error, SessionStarted
from specterm.ui.base_app import ThemedApp
from specterm.ui.bridge import RESET, EventBridge
from specterm.ui.messages import EventsReady
from specterm.ui.screens.compare import CompareScreen


class CompareApp(ThemedApp):
    TITLE = "specterm compare"

    def __init__(
        self,
        header: SessionStarted,
        *,
        run: Any = None,
        recorder: Any = None,
        events: Sequence[BaseEvent] = (),
        speed: float = 1.0,
        deterministic: bool = False,
        theme: str | None = None,
        theme_dirs: Iterable[Path] | None = None,
        theme_files: Iterable[str | Path] = (),
    ) -> None:
        super().__init__()
        self.header = header
        self.tally = CompareTally(header)
        self.bridge = EventBridge(lambda: self.post_message(EventsReady()))
        self.deterministic = deterministic
        if deterministic:
            self.animation_level = "none"
        self._run, self._recorder = run, recorder
        self._cancel = threading.Event()
        self.replayer = None
        if run is None and not deterministic:
            from specterm.session.replay import Replayer

            self.replayer = Replayer(list(events), self.bridge.push, speed=speed, on_reset=self.bridge.reset)
        self._screen: CompareScreen | None = None
        self.setup_themes(theme, theme_dirs, theme_files)

    def get_default_screen(self) -> CompareScreen:
        self._screen = CompareScreen(self.tally)
        return self._screen

    def start_sources(self) -> None:
        """Called by the screen once its widgets exist (events arriving earlier would find no transcript)."""
        self.show_theme_errors()
        if self._run is not None:
            self.set_status("loading both engines…")
            self._live()
        elif self.replayer is not None:
            self.set_status("replay")
            self.replayer.start()

    def set_status(self, text: str) -> None:
        """What the live run is doing (loading A, running, done), on the screen's status line."""
        self.sub_title = text
        if isinstance(self.screen, CompareScreen):
            self.screen.set_status(text)

    @work(thread=True, exit_on_error=False)
    def _live(self) -> None:  # worker thread: loads the engines, runs the rounds
        recorder = self._recorder

        def sink(event: BaseEvent) -> None:
            if recorder is not None:
                recorder.write(event)
            self.bridge.push(event)

        status = "done"
        try:
            self._run.load(progress=lambda line: self.call_from_thread(self.set_status, line))
            self.call_from_thread(self.set_status, "running")
            self._run.run(sink, self.header, cancel=self._cancel)
        except Exception as err:  # noqa: BLE001 - shown in the view, never a traceback over it
            self.bridge.push(Error(message=f"compare failed: {err}", where="compare"))
            status = f"failed: {err}"
        finally:
            self._run.close()
            if recorder is not None:
                recorder.close()
        if not self._cancel.is_set():  # "done" only once both engines are closed and the file is complete
            self.call_from_thread(self.set_status, status)

    def on_events_ready(self, _: EventsReady) -> None:
        self.apply_events(self.bridge.drain())

    def apply_events(self, events: Iterable[Any]) -> None:
        screen = self.screen
        if not isinstance(screen, CompareScreen):
            return
        sides = {lane: screen.side(lane).transcript for lane in LANES}
        for ev in events:
            if ev is RESET:  # a replay rewound: start both sides over
                self.tally = screen.tally = CompareTally(self.header)
                for transcript in sides.values():
                    transcript.clear()
                continue
            self.tally.add(ev)
            if ev.lane in sides:
                sides[ev.lane].model.add(ev)
            elif isinstance(ev, Error):  # a failure of the run itself: both sides show it
                for transcript in sides.values():
                    transcript.model.add(ev)
        for transcript in sides.values():
            transcript.sync()
        screen.refresh_figures()

    def on_unmount(self) -> None:
        self._cancel.set()  # a live run stops after its current step; the worker then closes both engines
        if self.replayer is not None:
            self.replayer.stop()


def make_compare_app(
    header: SessionStarted,
    *,
    run: Any = None,
    recorder: Any = None,
    events: Sequence[BaseEvent] = (),
    speed: float = 1.0,
    **kw: Any,
) -> CompareApp:
    """Live (``run``: a ``specterm.bench.compare.CompareRun``, recorded by ``recorder``) or a replay of
    a compare session's ``events``. Tests pass ``deterministic=True`` and apply events themselves."""
    return CompareApp(header, run=run, recorder=recorder, events=events, speed=speed, **kw)


def run_compare_replay(data: Any, speed: float = 1.0) -> int:
    """``specterm replay FILE`` of a compare session: the same split view, played back."""
    make_compare_app(data.header, events=data.events, speed=speed).run()
    return 0
