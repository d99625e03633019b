"""Test doubles for the UI: a scripted engine, a hand-built session showing every verdict kind, and
fake GPU readings; no vLLM, no NVML. Used by the UI and session tests and ``benchmarks/ui_frame_cost.py``
(which puts ``tests/`` on ``sys.path``, as for ``fake_nvml``). They live here, not in the package, so an
installed specterm never carries an engine that only pretends to generate
(``tests/test_import_contracts.py`` checks that nothing in ``specterm`` imports them).
"""

from __future__ import annotations

import threading
from typing import Any

from specterm.engine.base import Capabilities, EngineConfig, GenerationParams, SpecEngine
from specterm.events import (
    AgentStepFinished,
    AgentStepStarted,
    BaseEvent,
    EngineCounters,
    GpuSample,
    GpuStatus,
    Passage,
    RequestFinished,
    RequestStarted,
    Retrieval,
    SessionStarted,
    SpecStep,
    Token,
    ToolCall,
    ToolResult,
    UserMessage,
)

FAKE_CONFIG = EngineConfig(target="/models/fake-target-8m", draft="/models/fake-draft-1m", num_speculative_tokens=4)


def tok(text: str, verdict: str = "accepted", forced: bool = False, id: int = 0) -> Token:
    return Token(id=id, text=text, verdict=verdict, forced=forced)  # type: ignore[arg-type]


def step(
    rid: str,
    index: int,
    t: float,
    accepted: list[Token],
    last: Token | None,
    rejected: list[str] = (),
    k: int | None = None,
    wall_s: float = 0.012,
) -> SpecStep:  # type: ignore[assignment]
    """A speculative step: ``accepted`` drafts kept, then ``last`` (correction / bonus / target)."""
    drafted = k if k is not None else len(accepted) + len(rejected)
    tokens = list(accepted) + ([last] if last is not None else [])
    return SpecStep(
        t=t,
        request_id=rid,
        index=index,
        drafted=list(range(100, 100 + drafted)),
        accepted=len(accepted),
        tokens=tokens,
        rejected=list(range(200, 200 + len(rejected))),
        rejected_text=list(rejected),
        wall_s=wall_s,
    )


def demo_header() -> SessionStarted:
    return SessionStarted(
        specterm_version="0.0.0-test",
        config={"backend": "fake"},
        # the fake pair's sizes as fp32 weights (8 M and 1 M parameters): the bandwidth panel's input
        models={
            **FAKE_CONFIG.models_summary(),
            "backend": "fake",
            "weight_bytes": {"target": 32_000_000, "draft": 4_000_000},
        },
        agent="orders",
        host="test",
    )


def demo_events() -> list[BaseEvent]:
    """One agent turn with every verdict kind (accepted, correction, bonus, target, rejected,
    forced), a retrieval, a tool call and result, and hostile text (markup and an escape
    sequence) that must print literally."""
    ev: list[BaseEvent] = [UserMessage(t=0.0, request_id="u0", text="Where is order #42? [bold]not markup[/bold]")]
    ev += [
        AgentStepStarted(t=0.01, request_id="u0", step=0, kind="retrieve"),
        Retrieval(
            t=0.02,
            request_id="u0",
            step=0,
            query="order 42 shipping",
            passages=[Passage(doc="shipping.md", score=0.83, text="Orders ship within 2 days.")],
        ),
        AgentStepFinished(t=0.03, request_id="u0", step=0, kind="retrieve", latency_s=0.02),
        AgentStepStarted(t=0.04, request_id="u0", step=1, kind="tool_call"),
        RequestStarted(t=0.04, request_id="r1", prompt_tokens=80),
        step(
            "r1",
            0,
            0.05,
            [tok('{"', forced=True), tok("name", forced=True), tok('": "', forced=True)],
            tok("lookup_order", "bonus"),
            k=3,
        ),
        step("r1", 1, 0.06, [tok('", "'), tok("arguments")], tok('": {"', "correction"), rejected=['":', " ["]),
        step("r1", 2, 0.07, [tok("order_id")], tok('": ', "correction", forced=True), rejected=["\x1b[31mX"]),
        step("r1", 3, 0.08, [], tok("42", "correction"), rejected=["24", "}}"]),
        step("r1", 4, 0.09, [tok("}}", forced=True)], None, k=1),
        RequestFinished(t=0.09, request_id="r1", finish_reason="stop", output_tokens=12, ttft_s=0.011, wall_s=0.05),
        EngineCounters(t=0.09, request_id="r1", matched=True),
        ToolCall(t=0.09, request_id="u0", step=1, name="lookup_order", arguments={"order_id": 42}),
        AgentStepFinished(t=0.09, request_id="u0", step=1, kind="tool_call", latency_s=0.05, ttft_s=0.011, tokens=12),
        AgentStepStarted(t=0.10, request_id="u0", step=2, kind="tool"),
        ToolResult(
            t=0.11,
            request_id="u0",
            step=2,
            name="lookup_order",
            content='{"status": "shipped", "eta": "Friday"}',
            latency_s=0.004,
        ),
        AgentStepFinished(t=0.11, request_id="u0", step=2, kind="tool", latency_s=0.004),
        AgentStepStarted(t=0.12, request_id="u0", step=3, kind="answer"),
        RequestStarted(t=0.12, request_id="r3", prompt_tokens=140),
        step("r3", 0, 0.13, [tok("Order"), tok(" #"), tok("42")], tok(" ships", "correction"), rejected=[" is"]),
        step("r3", 1, 0.14, [tok(" on"), tok(" Friday"), tok(".")], tok(" [red]ok[/red]", "bonus"), k=3),
        step("r3", 2, 0.15, [], tok(" \x1b]0;pwned\x07Thanks", "target"), k=0),
        RequestFinished(
            t=0.15,
            request_id="r3",
            finish_reason="stop",
            output_tokens=9,
            ttft_s=0.009,
            wall_s=0.03,
            text="Order #42 ships on Friday.",
        ),
        AgentStepFinished(t=0.15, request_id="u0", step=3, kind="answer", latency_s=0.03, ttft_s=0.009, tokens=9),
    ]
    return ev


def fake_gpu_samples(n: int = 8) -> list[BaseEvent]:
    """Readings from a named fake device (never mistaken for a real GPU in a snapshot). Utilisation
    climbs 20 → 92 % and starts over: a real GPM reading is a percentage of peak, never above 100."""
    out: list[BaseEvent] = [GpuStatus(t=0.0, state="ok", message="1 device (fake NVML)")]
    for i in range(n):
        pct = 20.0 + 8.0 * (i % 10)
        out.append(
            GpuSample(
                t=0.25 * i,
                device=0,
                name="FAKE-NVML H200",
                source="gpm_dram_bw",
                bw_util_pct=pct,
                est_gbps=pct / 100 * 4800,
                peak_gbps=4800.0,
                mem_used_bytes=40 * 2**30,
                mem_total_bytes=141 * 2**30,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                power_w=450.0,
            )
        )
    return out


class FakeEngine(SpecEngine):
    """A fake: no model, no vLLM. It replays ``script`` (events, with ``request_id`` rewritten) for
    every prompt, so the UI and session tests see a real engine's event stream, deterministic and in
    milliseconds. With ``block=True`` it waits for ``cancel`` after the first step and then finishes
    cancelled."""

    def __init__(self, script: list[BaseEvent] | None = None, *, block: bool = False) -> None:
        self.config = FAKE_CONFIG
        self.capabilities = Capabilities(
            speculative=True, verdicts=True, structured_output=False, reconcile=False, backend="fake"
        )
        self.script = (
            script if script is not None else [e for e in demo_events() if getattr(e, "request_id", None) == "r3"]
        )
        self.block = block
        self.prompts: list[str] = []
        """The user's text of each request."""
        self.requests: list[Any] = []
        self.started = threading.Event()
        self.closed = False

    def generate(
        self,
        prompt: Any,
        params: GenerationParams,
        sink: Any,
        *,
        request_id: str | None = None,
        cancel: threading.Event | None = None,
    ) -> RequestFinished:
        self.requests.append(prompt)  # a ChatPrompt (or raw text)
        self.prompts.append(prompt if isinstance(prompt, str) else prompt.messages[-1].content)
        rid = request_id or "fake"
        finished = RequestFinished(request_id=rid)
        for i, event in enumerate(self.script):
            event = event.model_copy(update={"request_id": rid}) if hasattr(event, "request_id") else event
            if isinstance(event, RequestFinished):
                finished = event
            sink(event)
            if i == 1:
                self.started.set()
                if self.block and cancel is not None:
                    cancel.wait(10)
            if cancel is not None and cancel.is_set():
                finished = RequestFinished(request_id=rid, cancelled=True, finish_reason="cancelled")
                sink(finished)
                return finished
        return finished

    def close(self) -> None:
        self.closed = True
