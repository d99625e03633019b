"""The specterm app: ``make_app`` builds it for the CLI (live chat, replay) and for tests.

Threading: the engine, the replayer and the NVML sampler each run on their own thread and push
events into ``EventBridge``; the UI drains it on ``EventsReady`` and updates widgets once per batch,
at a frame rate that keeps the UI thread's CPU share small (``ui/pacing.py``); panels at most 4 Hz.
Nothing slow runs on the event loop: the engine is built in a thread worker, each prompt runs in a
thread worker, a long session file is read by one (``ui/loading.py``), and cancelling only sets a
``threading.Event``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from specterm.events import BaseEvent, Error, SessionStarted
from specterm.session.live import LiveSession, Runner
from specterm.ui.base_app import ThemedApp
from specterm.ui.bridge import RESET, EventBridge
from specterm.ui.loading import load_rest, open_replay
from specterm.ui.messages import EngineLoaded, EventsReady, RequestDone, SessionLoaded
from specterm.ui.pacing import FramePacer
from specterm.ui.screens.error import EngineErrorScreen
from specterm.ui.screens.main import MainScreen
from specterm.ui.state import ViewState
from specterm.ui.widgets.fleet_list import FleetList
from specterm.ui.widgets.panel import Panel
from specterm.ui.widgets.prompt_input import PromptInput
from specterm.ui.widgets.request_list import RequestList
from specterm.ui.widgets.session_header import SessionHeader
from specterm.ui.widgets.transcript import Transcript

BATCH = 20_000
"""Most events applied per drain; the rest wait one loop turn so keys stay responsive in a flood."""


@dataclass(frozen=True, kw_only=True)
class AppOptions:
    """How the dashboard runs, whatever feeds it: the keywords ``make_app`` and ``make_attach_app`` take
    and hand to ``SpecTermApp`` as this one object, so their names, types and defaults live here only.
    Tests pass ``gpu=False`` (or a fake NVML module), ``theme_dirs=()`` and ``deterministic=True``."""

    speed: float = 1.0
    """Replay: playback speed (0: as fast as it goes)."""
    autostart: bool = True
    """Replay: start playing on mount."""
    gpu: Any = True
    """GPU telemetry: ``True`` samples NVML, ``False`` none, or a (fake) NVML module to sample."""
    theme: str | None = None
    theme_dirs: Iterable[Path] | None = None
    theme_files: Iterable[str | Path] = ()
    deterministic: bool = False
    """Tests and snapshots: no animation, no timers, every event applied at once."""
    export_dir: str | Path | None = None
    """Where ``ctrl+s`` saves the SVG (default: the working directory)."""
    intro: str = ""
    """Live: opens the empty transcript (who answers, an example question), for a newcomer."""
    placeholder: str = "Ask the agent…"
    """Live: the prompt's placeholder."""
    thresholds: Any = None
    """Replay: the detectors' thresholds (the config file's ``[diagnose]``; None: the defaults)."""


class SpecTermApp(ThemedApp):
    """Wiring: event sources (live session, replayer, GPU sampler), the event pump, live requests.
    The dashboard screen (``screens/main.py``) owns the bindings, actions, commands and status."""

    TITLE = "specterm"
    # Export works on every screen (the engine-error screen too), so it stays the app's.
    BINDINGS = [Binding("ctrl+s", "export_svg", "svg")]

    def __init__(
        self,
        *,
        mode: str,
        options: AppOptions = AppOptions(),
        session: LiveSession | None = None,
        engine_error: str | None = None,
        header: SessionStarted | None = None,
        events: Sequence[BaseEvent] = (),
        warnings: Sequence[str] = (),
        loader: Any = None,
        attach: Callable[[Callable[[BaseEvent], None]], Any] | None = None,
    ) -> None:
        super().__init__()
        self.state = ViewState(mode)
        self.bridge = EventBridge(lambda: self.post_message(EventsReady()))
        self.deterministic = options.deterministic
        if self.deterministic:
            self.animation_level = "none"
        self.export_dir = Path(options.export_dir) if options.export_dir is not None else Path.cwd()
        self.intro, self.placeholder = options.intro, options.placeholder
        self.session = session if session is not None else LiveSession(header=header)
        self._session_ready = False
        config = header.config if header is not None else {}
        self.attach_view = mode == "replay" and "attach" in config
        """A replay of an attach session: shown with its requests (and replicas) lists."""
        self._lists = mode == "attach" or self.attach_view
        self._engine_error = engine_error
        self._cancel: threading.Event | None = None
        self._warnings = list(warnings)
        self._gpu = options.gpu
        self.sampler: Any = None
        self.replayer: Any = None
        if mode == "replay":
            from specterm.diagnose import Diagnoser, diagnosing
            from specterm.session.replay import Replayer

            # The detectors run on the replayer's thread, as on the engine's live (session.live).
            diagnoser = Diagnoser(options.thresholds)

            def rewind() -> None:
                diagnoser.reset()
                self.bridge.reset()

            self.replayer = Replayer(
                list(events),
                diagnosing(self.bridge.push, diagnoser),
                speed=options.speed,
                on_reset=rewind,
                loading=loader is not None,
            )
        self._loader = loader
        self._attach_factory = attach
        self.source: Any = None
        """``attach`` mode: the ``session.attach.Attach`` reading the server (on a worker thread)."""
        self._quitting = False
        """A ``SessionReader`` with the rest of a long file still to read (replay), or ``None``."""
        self._autostart = options.autostart
        self._dashboard_ready = False
        self._pacer = FramePacer()
        self._apply_timer_pending = False
        self._early: list[Any] = []
        self._panels: list[Panel] | None = None
        self.gpu_idle_text = (
            "no GPU samples in this session"
            if mode == "replay"
            else ("waiting for GPU telemetry" if self._gpu else "GPU telemetry off")
        )
        self.setup_themes(options.theme, options.theme_dirs, options.theme_files)

    # -- setup --------------------------------------------------------------------------------

    def get_default_screen(self) -> Screen:
        self.main_screen = MainScreen(self)
        return self.main_screen

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Export SVG", "Save the current view as an SVG file", self.action_export_svg)
        if isinstance(screen, MainScreen):
            yield from screen.commands(self.available_themes, partial(setattr, self, "theme"))

    def action_export_svg(self) -> None:
        path = self.save_screenshot(path=str(self.export_dir))
        self.notify(f"saved the view to {path}")

    def _update_status(self) -> None:
        if self._dashboard_ready:
            self.main_screen.update_status()

    @property
    def options(self):
        """The dashboard's view options (rejected drafts, forced marks)."""
        return self.main_screen.options

    def main_screen_ready(self) -> None:
        """Called by ``MainScreen.on_mount`` (its widgets exist only from then on)."""
        self._dashboard_ready = True
        self._pacer.reset_cpu()  # startup's own work is not a frame's
        self.show_theme_errors()
        self._show_warnings()
        if self.session.header is not None:  # shown, not recorded: the recorder wrote it when it opened
            self.apply_events([self.session.header], force=True)
        if self.state.mode == "replay":
            self.query_one(Transcript).focus()
            if self._loader is not None:
                # After the first frame is painted: reading holds the GIL, and would delay it.
                self.call_after_refresh(
                    self.run_worker, self._load_rest, thread=True, group="load", exit_on_error=False
                )
            if self._autostart:
                self.replayer.start()
            if not self.deterministic:
                # The replayer flips `finished` / `position` on its own thread: poll the badge.
                self.set_interval(0.5, self._update_status)
        elif self.state.mode == "attach":
            self.query_one(Transcript).focus()
            self.source = self._attach_factory(self.bridge.push)
            if self._gpu:  # the server's GPU, when it is this machine's (a Unix socket)
                from specterm.telemetry import GpuSampler

                self.sampler = GpuSampler(self.bridge.push, nvml=None if self._gpu is True else self._gpu)
                self.sampler.start()
            self.query_one(SessionHeader).status = f"watching {self.source.addr}"
            self.run_worker(self._run_source, thread=True, group="attach", exit_on_error=False)
        else:
            self.query_one(PromptInput).focus()
            self._start_live()
        if self._early:
            early, self._early = self._early, []
            self.apply_events(early, force=True)
        self._update_status()

    def _run_source(self) -> None:  # worker thread
        try:
            self.source.run()
        except Exception as err:  # noqa: BLE001 - shown, the app stays open on what it has
            self.bridge.push(Error(where="attach", message=str(err) or type(err).__name__))

    def on_request_list_picked(self, message: RequestList.Picked) -> None:
        state = self.state
        if message.request_id is not None:
            state.current_request = message.request_id
            self.query_one(Transcript).scroll_to_request(message.request_id)
        else:
            transcript = self.query_one(Transcript)
            transcript.scroll_end(animate=False)
        for panel in self._panels or []:
            panel.flush()

    def on_fleet_list_picked(self, message: FleetList.Picked) -> None:
        for requests in self.main_screen.query(RequestList):
            requests.refilter()

    def _load_rest(self) -> None:  # worker thread
        """Read the rest of a long session file into the replayer, then report its warnings."""
        self.post_message(SessionLoaded(load_rest(self._loader, self.replayer, lambda: self._quitting)))

    def on_session_loaded(self, message: SessionLoaded) -> None:
        self._loader = None
        self._warnings = message.warnings
        self._show_warnings()
        self._update_status()

    def _show_warnings(self) -> None:
        for warning in self._warnings[:5]:
            self.notify(warning, title="session file", severity="warning", timeout=10)
        if len(self._warnings) > 5:
            self.notify(f"… and {len(self._warnings) - 5} more warnings", severity="warning", timeout=10)

    def _start_live(self) -> None:
        if self._engine_error is not None:
            self.push_screen(EngineErrorScreen(self._engine_error))
            return
        if self._gpu:
            from specterm.telemetry import GpuSampler

            nvml = None if self._gpu is True else self._gpu
            self.sampler = GpuSampler(self.session.sink(self.bridge.push), nvml=nvml)
            self.sampler.start()
        if self.session.engine is not None:
            self.session.load()  # builds the runner only: the engine is there
            self._engine_ready()
        elif self.session.needs_loading:
            self.query_one(PromptInput).read_only = True
            self.query_one(SessionHeader).status = "starting engine…"
            self.run_worker(self._load_engine, thread=True, group="engine", exit_on_error=False)

    def _load_engine(self) -> None:  # worker thread
        try:
            self.session.load()
        except Exception as err:  # noqa: BLE001 - any failure becomes the error screen
            self.post_message(EngineLoaded(str(err) or type(err).__name__))
            return
        self.post_message(EngineLoaded())

    def on_engine_loaded(self, message: EngineLoaded) -> None:
        if message.error is not None:
            self.push_screen(EngineErrorScreen(message.error))
            return
        self.query_one(PromptInput).read_only = False
        self._engine_ready()

    def _engine_ready(self) -> None:
        engine = self.session.engine
        self._session_ready = True
        if self.state.session is None:
            config = getattr(engine, "config", None)
            caps = getattr(engine, "capabilities", None)
            models = dict(config.models_summary()) if config is not None else {}
            if caps is not None:
                models.setdefault("backend", caps.backend)
            self.apply_events([SessionStarted(models=models, config=config.model_dump() if config else {})], force=True)
        self._update_status()

    @property
    def engine(self) -> Any:
        return self.session.engine

    @property
    def runner(self) -> Runner | None:
        """What a prompt runs, once the engine is ready (``None`` before)."""
        return self.session.runner if self._session_ready else None

    def on_unmount(self) -> None:
        self._quitting = True  # the session-file reader stops at its next chunk
        if self._cancel is not None:
            self._cancel.set()
        if self.replayer is not None:
            self.replayer.stop()
        if self.sampler is not None:
            self.sampler.stop()
        if self.source is not None:
            self.source.stop()

    # -- the event pump -----------------------------------------------------------------------

    def on_events_ready(self, _: EventsReady) -> None:
        if self.deterministic:
            self._apply_queued()
        elif not self._apply_timer_pending:
            # The bridge's wake-up flag stays set until the frame drains it, so producers post
            # nothing meanwhile: one timer, one batch.
            self._next_frame()

    def _next_frame(self) -> None:
        wait = self._pacer.wait()  # asked again when the timer fires (see ui/pacing.py)
        if wait > 0.001:
            self._apply_timer_pending = True
            self.set_timer(wait, self._frame_timer)
        else:
            self._apply_queued()

    def _frame_timer(self) -> None:
        self._apply_timer_pending = False
        self._next_frame()

    def _apply_queued(self) -> None:
        self._apply_timer_pending = False
        self._pacer.frame_started()
        events = self.bridge.drain(BATCH)
        if events:
            self.apply_events(events)

    def drain_now(self) -> int:
        """Apply everything queued, synchronously, panels included (tests, snapshots)."""
        n = 0
        while len(self.bridge):
            events = self.bridge.drain()
            n += len(events)
            self.apply_events(events, force=True)
        return n

    def apply_events(self, events: Iterable[Any], *, force: bool = False) -> None:
        """Apply a batch on the UI thread: cheap bookkeeping per event, widget work once."""
        if not self._dashboard_ready:
            # Before the dashboard's widgets exist (first frames): keep them for main_screen_ready.
            self._early.extend(events)
            return
        transcript = self.query_one(Transcript)
        state = self.state
        model = transcript.model
        requests = self.main_screen.query(RequestList).first() if self._lists else None
        fleet = self.main_screen.query(FleetList).first() if self._lists else None
        for ev in events:
            if ev is RESET:
                state.reset()
                transcript.clear()
                model = transcript.model
                continue
            state.add(ev)
            model.add(ev)
            if requests is not None:
                requests.note(ev)
        transcript.sync()
        if requests is not None:
            requests.sync()
        if fleet is not None:
            fleet.sync()
        if self._panels is None:  # a DOM query per batch costs more than the panels' own check
            self._panels = list(self.main_screen.query(Panel))
        for panel in self._panels:
            panel.flush() if force else panel.mark_stale()
        self._update_status()

    # -- live requests ------------------------------------------------------------------------

    def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        if self.runner is None:
            self.notify("the engine is not ready yet", severity="warning")
            return
        if self._cancel is not None:
            self.notify("a request is running — Esc cancels it", severity="warning")
            return
        self._cancel = threading.Event()
        self.run_worker(
            partial(self._run_prompt, message.text, self._cancel), thread=True, group="request", exit_on_error=False
        )
        self._update_status()

    def _run_prompt(self, text: str, cancel: threading.Event) -> None:  # worker thread
        error = None
        try:
            self.session.run(text, self.bridge.push, cancel)
        except Exception as err:  # noqa: BLE001 - shown in the transcript, the app keeps running
            error = str(err) or type(err).__name__
            self.session.sink(self.bridge.push)(Error(where="request", message=error))
        self.post_message(RequestDone(error))

    def on_request_done(self, _: RequestDone) -> None:
        self._cancel = None
        self._update_status()

    @property
    def request_in_flight(self) -> threading.Event | None:
        """The cancel event of the running live request, or ``None``."""
        return self._cancel

    def cancel_request(self) -> None:
        if self._cancel is not None:
            self._cancel.set()


def make_app(
    *,
    session: LiveSession | None = None,
    engine: Any = None,
    engine_factory: Callable[[], Any] | None = None,
    engine_config: Any = None,
    runner: Runner | None = None,
    runner_factory: Callable[[Any], Runner] | None = None,
    header: SessionStarted | None = None,
    replay: str | Path | Any = None,
    **options: Any,
) -> SpecTermApp:
    """Build the app.

    Live: pass a ``session`` (``specterm.session.live.LiveSession``: what ``specterm chat`` does; it
    records), or build one here from ``engine`` (built), ``engine_factory`` (called on a worker thread), or
    ``engine_config`` (loaded with ``specterm.engine.load_engine``); ``header`` is the
    ``session_started`` to show (default: built from the engine's config once it is loaded). A factory that raises shows the
    "engine failed to start" screen. ``runner`` overrides what a prompt runs; ``runner_factory(engine)`` builds
    one once the engine is loaded (e.g. an agent around it).
    Replay: ``replay`` is a session file path or a ``SessionData`` (``header``, ``events``,
    ``warnings``); it raises ``SessionFileError`` for an unreadable file before any UI starts.
    ``options``: ``AppOptions``' fields (a keyword it has not is a ``TypeError``).
    """
    opts = AppOptions(**options)
    if replay is not None:
        loader = None
        if isinstance(replay, (str, Path)):
            # The header and the first lines now (a bad file fails here, before any UI); the rest
            # is read by a worker while the replay plays (ui/loading.py).
            replay, loader = open_replay(replay)
        return SpecTermApp(
            mode="replay",
            header=replay.header,
            events=replay.events,
            warnings=replay.warnings if loader is None else (),  # complete once the file is read
            loader=loader,
            options=replace(opts, gpu=False),  # a recording's GPU samples are in its events
        )
    if session is None:
        if engine is None and engine_factory is None and engine_config is not None:
            engine_factory = partial(_load_engine, engine_config)
        session = LiveSession(
            header=header, engine=engine, engine_factory=engine_factory, runner=runner, runner_factory=runner_factory
        )
    return SpecTermApp(mode="live", session=session, options=opts)


def _load_engine(config: Any) -> Any:
    try:
        from specterm.engine import load_engine  # type: ignore[attr-defined]
    except ImportError as err:
        raise RuntimeError(f"this specterm has no engine loader ({err})") from None
    return load_engine(config)


def run_replay_app(path: str | Path, speed: float = 1.0, **kwargs: Any) -> int:
    """``specterm replay FILE``: open the dashboard on a recorded session."""
    make_app(replay=path, speed=speed, **kwargs).run()
    return 0
