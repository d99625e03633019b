"""A live session, outside any UI: ``LiveSession`` (clock, header, lazily built engine, runner,
cancellation, recording) and the runners a prompt goes through — ``plain_runner`` (the bare engine,
a multi-turn conversation) and ``agent_runner``. ``specterm run`` drives it on the main thread,
``specterm chat``'s dashboard from worker threads; nothing here imports textual.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from specterm.events import BaseEvent, Sink, UserMessage

Runner = Callable[[str, Sink, threading.Event], Any]
"""Runs one prompt to completion on a worker thread, emitting events to the sink; stops early when
the event is set."""


def plain_runner(
    engine: Any,
    params: Any = None,
    clock: Callable[[], float] | None = None,
    *,
    raw: bool = False,
    system: str | None = None,
) -> Runner:
    """A runner that sends the prompt straight to ``engine`` (no agent): a multi-turn conversation
    through the model's chat template (oldest turns dropped when it outgrows the context), or each
    prompt as raw text with ``raw``."""
    from specterm.engine.base import GenerationParams, SessionClock
    from specterm.engine.chat import ChatPrompt, Message, PromptTooLong, check_fits

    params = params or GenerationParams()
    clock = clock or SessionClock()
    counter = itertools.count()
    history: list[Message] = []

    def conversation(text: str) -> ChatPrompt:
        head = [Message(role="system", content=system)] if system else []
        renderer = getattr(engine, "renderer", None)
        while True:
            chat = ChatPrompt(messages=head + history + [Message(role="user", content=text)])
            if renderer is None:  # an engine that cannot size prompts (the UI tests' scripted one)
                return chat
            try:
                check_fits(len(renderer.ids(chat)) + params.max_tokens, engine.max_model_len + 1)
                return chat
            except PromptTooLong:
                if not history:
                    return chat  # generate() says how long it is
                del history[:2]

    def run(text: str, sink: Sink, cancel: threading.Event) -> Any:
        rid = f"chat-{next(counter)}"
        prompt = text if raw else conversation(text)
        sink(UserMessage(t=clock(), request_id=rid, text=text))
        done = engine.generate(prompt, params, sink, request_id=rid, cancel=cancel)
        if not raw and not done.cancelled:
            history.extend([Message(role="user", content=text), Message(role="assistant", content=done.text)])
        return done

    return run


def agent_runner(
    agent: Any, engine: Any, *, temperature: float = 0.0, clock: Callable[[], float] | None = None
) -> Runner:
    """A runner that sends each prompt to ``agent`` (``specterm.agent.AgentRunner``) on ``engine``."""
    from specterm.agent import AgentRunner
    from specterm.models.defaults import agent_fit

    config = getattr(engine, "config", None)
    notice = agent_fit(getattr(config, "target", None), agent.name)
    runner = AgentRunner(agent, engine, temperature=temperature, clock=clock, notice=notice)
    return lambda text, sink, cancel: runner.run(text, sink, cancel=cancel)


def make_runner(
    engine: Any,
    *,
    agent: Any = None,
    params: Any = None,
    clock: Callable[[], float] | None = None,
    raw: bool = False,
    system: str | None = None,
    temperature: float = 0.0,
) -> Runner:
    """The runner ``specterm chat`` puts around ``engine``: ``agent``'s loop, or plain chat without
    one. Module-level, so ``functools.partial(make_runner, agent=...)`` pickles into an engine
    process (``session/process.py``)."""
    if agent is None:
        return plain_runner(engine, params, clock, raw=raw, system=system)
    return agent_runner(agent, engine, temperature=temperature, clock=clock)


class LiveSession:
    """One live session, outside any UI: its clock and header, the engine (built lazily by ``load``,
    on the caller's thread: a dashboard calls it from a worker), the runner around the engine (plain
    or agent), cancellation of the request in flight, and the fan-out of every event — to the
    recorder first, then to the consumer's sink (a headless printer, or the dashboard's bridge).

    Recording here, on the thread that produces the events, rather than in a consumer means that
    ``run``, ``chat`` and the dashboard record the same stream the same way, and that a consumer that
    lags (the UI coalescing a burst) never delays or reorders what reaches the file.
    """

    def __init__(
        self,
        *,
        header: Any = None,
        engine: Any = None,
        engine_factory: Callable[[], Any] | None = None,
        runner: Runner | None = None,
        runner_factory: Callable[[Any], Runner] | None = None,
        recorder: Any = None,
        clock: Callable[[], float] | None = None,
        diagnoser: Any = None,
    ) -> None:
        from specterm.diagnose import Diagnoser
        from specterm.engine.base import SessionClock

        self.header = header
        self.clock = clock or SessionClock()
        self.engine = engine
        self.recorder = recorder
        self.diagnoser = diagnoser if diagnoser is not None else Diagnoser()
        """One for the whole session (its baselines span prompts), fed on the producing thread."""
        self._engine_factory = engine_factory
        self._runner, self._runner_factory = runner, runner_factory
        self.runner: Runner | None = None
        self._cancel: threading.Event | None = None

    @property
    def needs_loading(self) -> bool:
        """The engine is still to be built (``load`` will block while it is)."""
        return self.engine is None and self._engine_factory is not None

    def load(self) -> Any:
        """Build the engine if it is not built yet, then the runner; returns the engine."""
        if self.engine is None:
            if self._engine_factory is None:
                raise RuntimeError("live session has no engine and no engine factory")
            self.engine = self._engine_factory()
        if self.runner is None:
            if self._runner_factory is not None:
                self.runner = self._runner_factory(self.engine)
            elif self._runner is not None:
                self.runner = self._runner
            else:
                self.runner = plain_runner(self.engine, clock=self.clock)
        return self.engine

    def sink(self, downstream: Sink) -> Sink:
        """``downstream`` behind the recorder and the detectors: each event is written, then handed
        on, then so is each finding it completes (``specterm.diagnose``), so findings are recorded.
        The GPU sampler's thread calls it too: the detectors ignore its events, touching nothing."""
        from specterm.diagnose import diagnosing

        recorder = self.recorder
        if recorder is None:
            return diagnosing(downstream, self.diagnoser)

        def fan_out(event: BaseEvent) -> None:
            recorder.write(event)  # never raises: a failing disk stops recording, not the session
            downstream(event)

        return diagnosing(fan_out, self.diagnoser)

    def run(self, text: str, sink: Sink, cancel: threading.Event | None = None) -> Any:
        """Run one prompt to completion (blocking), events to the recorder and ``sink``."""
        self.load()
        assert self.runner is not None
        self._cancel = cancel or threading.Event()
        try:
            return self.runner(text, self.sink(sink), self._cancel)
        finally:
            self._cancel = None

    def cancel(self) -> None:
        if self._cancel is not None:
            self._cancel.set()

    def close(self, reason: str = "done") -> None:
        """Close the engine and the recording (``session_ended``). Idempotent."""
        engine, self.engine = self.engine, None
        if engine is not None and hasattr(engine, "close"):
            engine.close()
        if self.recorder is not None:
            self.recorder.close(reason)
