"""What a live prompt runs, outside any UI: the plain runner (the bare engine, a multi-turn
conversation) and the agent runner. ``specterm chat``'s dashboard, and the benchmarks that drive it,
call a ``Runner`` on a worker thread; nothing here imports textual.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable

from specterm.events import BaseEvent, UserMessage

Sink = Callable[[BaseEvent], None]
Runner = Callable[[str, Sink, threading.Event], Any]
"""Runs one prompt to completion on a worker thread, emitting events to the sink; stops early when
the event is set."""


def plain_runner(engine: Any, params: Any = None, clock: Callable[[], float] | None = None, *,
                  raw: bool = False, system: str | None = None) -> Runner:
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


def agent_runner(agent: Any, engine: Any, *, temperature: float = 0.0,
                 clock: Callable[[], float] | None = None) -> Runner:
    """A runner that sends each prompt to ``agent`` (``specterm.agent.AgentRunner``) on ``engine``."""
    from specterm.agent import AgentRunner

    runner = AgentRunner(agent, engine, temperature=temperature, clock=clock)
    return lambda text, sink, cancel: runner.run(text, sink, cancel=cancel)
