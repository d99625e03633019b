"""Synthetic but valid sessions, for tests, benchmarks and demos without an engine.

``synthetic_session(spec_steps=…)`` returns a header and a plausible event stream: a user message,
agent steps (each one engine request) made of speculative steps with k = 4 drafts and a seeded
mix of acceptance lengths, tool calls and results, and a final ``session_ended``. Deterministic for
a given seed. Timestamps advance 10 ms per engine step.
"""

from __future__ import annotations

import random

from specterm import __version__
from specterm.engine.verdicts import StepRecord, assign_verdicts
from specterm.events import (
    AgentStepFinished,
    AgentStepStarted,
    BaseEvent,
    RequestFinished,
    RequestStarted,
    SessionEnded,
    SessionStarted,
    SpecStep,
    Speculation,
    Token,
    ToolCall,
    ToolResult,
    UserMessage,
)

_WORDS = ("the", " order", " #", "4", "2", " ships", " on", " Friday", "{", '"', "name", '":', " }", ".")
_KINDS = ("validate", "retrieve", "tool_call", "tool", "answer")


def synthetic_header(**models: object) -> SessionStarted:
    return SessionStarted(
        specterm_version=__version__,
        config={"engine": "synthetic", "num_speculative_tokens": 4},
        models={
            "target": "synthetic-target",
            "draft": "synthetic-draft",
            **Speculation(method="draft_model", num_speculative_tokens=4).model_dump(),
            **models,
        },
        agent="synthetic",
        host="test",
    )


def spec_step(request_id: str, index: int, t: float, k: int, a: int, rng: random.Random) -> SpecStep:
    """One step with ``k`` drafts of which the first ``a`` were accepted (``a <= k``); its verdicts
    come from the engine's own rule (``engine.verdicts.assign_verdicts``) on the record it implies."""
    drafted = [rng.randrange(1000) for _ in range(k)]
    texts = [rng.choice(_WORDS) for _ in range(a)]
    emitted = [*drafted[:a], rng.randrange(1000)]  # the accepted drafts and the target's own token
    texts.append(rng.choice(_WORDS))
    last_forced = rng.random() < 0.1
    record = StepRecord(request_id, tuple(drafted), tuple(emitted), 0) if k else None
    verdicts, _, _ = assign_verdicts(emitted, record)
    tokens = [
        Token(id=i, text=text, verdict=v, forced=last_forced and n == len(emitted) - 1)
        for n, (i, text, v) in enumerate(zip(emitted, texts, verdicts, strict=True))
    ]
    return SpecStep(
        t=t,
        request_id=request_id,
        index=index,
        drafted=drafted,
        accepted=a,
        tokens=tokens,
        rejected=drafted[a:],
        rejected_text=[rng.choice(_WORDS) for _ in drafted[a:]],
        wall_s=0.008 + rng.random() * 0.004,
    )


def synthetic_session(
    spec_steps: int = 100, *, steps_per_request: int = 50, seed: int = 0
) -> tuple[SessionStarted, list[BaseEvent]]:
    """A header and ``spec_steps`` engine steps wrapped in agent steps (see module docstring)."""
    rng = random.Random(seed)
    events: list[BaseEvent] = [UserMessage(t=0.0, request_id="user-0", text="Where is order #42?")]
    t = 0.0
    done = 0
    agent_step = 0
    while done < spec_steps:
        rid = f"req-{agent_step}"
        kind = _KINDS[agent_step % len(_KINDS)]
        events.append(AgentStepStarted(t=t, request_id=rid, step=agent_step, kind=kind))
        events.append(RequestStarted(t=t, request_id=rid, prompt_tokens=120))
        n = min(steps_per_request, spec_steps - done)
        out = 0
        start = t
        for i in range(n):
            t += 0.01
            k = 0 if rng.random() < 0.05 else 4
            step = spec_step(rid, i, t, k, rng.randint(0, k), rng)
            out += len(step.tokens)
            events.append(step)
        done += n
        events.append(
            RequestFinished(t=t, request_id=rid, finish_reason="stop", output_tokens=out, ttft_s=0.02, wall_s=t - start)
        )
        if kind == "tool_call":
            events.append(
                ToolCall(t=t, request_id=rid, step=agent_step, name="lookup_order", arguments={"order_id": 42})
            )
            events.append(
                ToolResult(t=t, request_id=rid, step=agent_step, name="lookup_order", content='{"status": "shipped"}')
            )
        events.append(
            AgentStepFinished(
                t=t, request_id=rid, step=agent_step, kind=kind, latency_s=t - start, ttft_s=0.02, tokens=out
            )
        )
        agent_step += 1
    events.append(SessionEnded(t=t + 0.01))
    return synthetic_header(), events
