"""The event vocabulary every part of specterm speaks.

Event sources (the live engine and agent, the session replayer, the NVML sampler) produce these
models; sinks (the UI, the recorder, the headless printer) consume them. A session file is JSONL:
one event per line, the first a ``session_started`` carrying ``FORMAT_VERSION``.

Glossary — one *speculative step* for one request: the draft proposes tokens d1..dk (k may vary per
step and may be 0); the target verifies them in one forward pass, keeps the longest prefix it agrees
with, d1..da (a <= k), and then emits one token of its own.

``accepted``
    a draft token the target kept (d1..da).
``correction``
    the target's own token at the first disagreeing position (a < k). vLLM calls it "recovered".
``bonus``
    the target's extra token after all k drafts were kept (a = k).
``target``
    a token from a step with no draft at all (k = 0: no n-gram match, speculation off).
``rejected``
    draft tokens d(a+1)..dk: proposed, thrown away, never part of the output. They live in
    ``SpecStep.rejected``, never in ``SpecStep.tokens``.
``forced``
    a flag on top of a verdict: the grammar allowed exactly one token at that position.

Every event has a ``type`` discriminator (snake_case) and ``t``: seconds since the session started.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

FORMAT_VERSION = 1

Verdict = Literal["accepted", "correction", "bonus", "target"]
"""Verdicts of emitted tokens. ``rejected`` drafts are never emitted (see ``SpecStep.rejected``)."""

VERDICTS: tuple[str, ...] = get_args(Verdict)
"""The verdict names in ``Verdict``'s order: the one list every other module derives its own from."""
Lane = Literal["a", "b"]
StepKind = Literal["validate", "retrieve", "tool_call", "tool", "answer"]


class BaseEvent(BaseModel):
    # Unknown fields are ignored so a newer writer's additive fields do not break an older reader.
    model_config = ConfigDict(extra="ignore", frozen=True)
    t: float = 0.0
    lane: Lane | None = Field(None, exclude_if=lambda v: v is None)
    """Which side of a ``specterm compare`` session the event belongs to (``a`` or ``b``); ``None``
    everywhere else. Left out of the JSON when ``None``, so ordinary sessions are byte-for-byte what
    they were, and an older specterm reads a compare session (as one merged stream)."""


class Token(BaseModel):
    """One emitted token: its id, decoded text piece, verdict and grammar-forced flag."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    id: int
    text: str
    verdict: Verdict
    forced: bool = False
    grammar: bool = Field(False, exclude_if=lambda v: not v)
    """An accepted draft the grammar proposed (its forced run), not the draft model (grammar drafting)."""


class Speculation(BaseModel):
    """How a session speculates, as ``SessionStarted.models`` records it (``EngineConfig.models_summary``)
    and a publishing server's hello carries it (``wire.Hello.spec``, read by ``attach``): written through
    this model only, so k's key, ``num_speculative_tokens`` (vLLM's name), is spelt once."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    method: str | None = None
    """``"none"`` in a target-only session's header."""
    num_speculative_tokens: int | None = None
    """k: draft tokens per step (0 target-only)."""


class SessionStarted(BaseEvent):
    type: Literal["session_started"] = "session_started"
    format_version: int = FORMAT_VERSION
    specterm_version: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, Any] = Field(default_factory=dict)
    """target, draft, ``Speculation``'s fields, dtype ..."""
    agent: str | None = None
    host: str = ""


class UserMessage(BaseEvent):
    type: Literal["user_message"] = "user_message"
    request_id: str
    text: str


class RequestStarted(BaseEvent):
    """One engine generation (an agent step may run one) begins."""

    type: Literal["request_started"] = "request_started"
    request_id: str
    prompt_tokens: int = 0
    params: dict[str, Any] = Field(default_factory=dict)
    conversation: str | None = Field(None, exclude_if=lambda v: v is None)
    """``specterm attach``: the client conversation this request continues (its prompt extends an
    earlier request's), and which step of it this is; left out of the JSON when not known."""
    turn: int | None = Field(None, exclude_if=lambda v: v is None)
    replica: str | None = Field(None, exclude_if=lambda v: v is None)
    """``specterm attach`` of a fleet: the ``ReplicaSeen.replica`` whose scheduler ran the request."""


class ReplicaSeen(BaseEvent):
    """``specterm attach``: one scheduler of the fleet watched (a server, or one data-parallel rank of
    one) said who it is, for the first time or after a restart. Its requests carry ``replica``."""

    type: Literal["replica"] = "replica"
    replica: str
    """``NAME·RANK``: the server's name (given, else r1, r2… in the order given) and its DP rank."""
    addr: str
    model: str = ""
    speculation: dict[str, Any] | None = None
    """``Speculation`` (method, k); ``None``: the replica runs without speculation."""
    pid: int | None = None
    dp_index: int = 0
    weight_bytes: dict[str, int] | None = Field(None, exclude_if=lambda v: v is None)
    restarted: bool = False


class SpecStep(BaseEvent):
    """One engine step for one request, with exact per-token verdicts.

    ``drafted`` holds all k draft ids verified in this step; ``accepted`` = a; ``tokens`` are the
    emitted tokens (a + 1 of them when k > 0, unless the request stopped early on EOS/max tokens);
    ``rejected`` = drafted[a:]. The last step of a request may emit fewer than a + 1 tokens
    (max tokens or EOS cut it); ``accepted`` still counts what the target accepted, as vLLM does.
    """

    type: Literal["spec_step"] = "spec_step"
    request_id: str
    index: int
    drafted: list[int] = Field(default_factory=list)
    accepted: int = 0
    tokens: list[Token] = Field(default_factory=list)
    rejected: list[int] = Field(default_factory=list)
    rejected_text: list[str] = Field(default_factory=list)
    invalid_drafts: int = 0
    """Draft slots the grammar rejected before verification; not in ``drafted`` (vLLM excludes
    them from its draft-token count too), but the step still counts as a draft."""
    grammar_drafts: int = Field(0, exclude_if=lambda v: not v)
    """Of ``drafted``, how many the grammar proposed rather than the draft model (grammar drafting)."""
    draft_passes: int | None = Field(None, exclude_if=lambda v: v is None)
    """Draft-model forward passes run in this step (proposing the next step's drafts; grammar drafting
    skips some); ``None``: not recorded (older sessions: one per draft slot is assumed)."""
    dropped_drafts: int = Field(0, exclude_if=lambda v: not v)
    """Drafts the grammar forbade that vLLM dropped before scheduling them (synchronous scheduling):
    never verified, not in vLLM's counters; ``invalid_drafts`` is the asynchronous path's count."""
    wall_s: float = 0.0
    batch_size: int | None = Field(None, exclude_if=lambda v: v is None)
    """Requests vLLM scheduled in this engine step: the key its batch-size schedule looks k up by
    (``num_speculative_tokens_per_batch_size``); ``None``: not recorded (older sessions)."""

    @property
    def k(self) -> int:
        """Draft slots this step verified (``drafted`` plus grammar-invalidated ones); 0: target tokens.
        Under a batch-size schedule it is what vLLM's scheduler chose for the step that proposed them."""
        return len(self.drafted) + self.invalid_drafts


class RequestFinished(BaseEvent):
    type: Literal["request_finished"] = "request_finished"
    request_id: str
    finish_reason: str | None = None
    text: str = ""
    output_tokens: int = 0
    ttft_s: float | None = None
    wall_s: float = 0.0
    cancelled: bool = False
    cached_tokens: int | None = None
    """Prompt tokens vLLM served from its prefix cache (``RequestOutput.num_cached_tokens``): an agent
    step that resends the previous step's prompt should find most of it there. None: not reported."""


class EngineCounters(BaseEvent):
    """vLLM's own spec-decode counters for one request, reconciled against specterm's verdicts."""

    type: Literal["engine_counters"] = "engine_counters"
    request_id: str
    ours: dict[str, Any] = Field(default_factory=dict)
    vllm: dict[str, Any] = Field(default_factory=dict)
    matched: bool = True
    detail: str = ""
    replica: str | None = Field(None, exclude_if=lambda v: v is None)
    """A fleet's replica whose ``/metrics`` this is (``request_id`` ``all``); ``None``: the one server."""


class AgentStepStarted(BaseEvent):
    type: Literal["agent_step_started"] = "agent_step_started"
    request_id: str
    step: int
    kind: StepKind


class AgentStepFinished(BaseEvent):
    type: Literal["agent_step_finished"] = "agent_step_finished"
    request_id: str
    step: int
    kind: StepKind
    latency_s: float = 0.0
    ttft_s: float | None = None
    tokens: int = 0
    ok: bool = True
    answer: str | None = None
    """The agent's final answer, on the generation step that produced it (so a recording carries
    it: ``replay --headless`` prints it as ``run`` does)."""
    ungrounded: list[str] | None = Field(None, exclude_if=lambda v: v is None)
    """With ``answer``: its figures and dates that no tool result of the turn (nor the question)
    contains (``agent/grounding.py``); empty when all are grounded; left out of the JSON otherwise."""
    withheld: str | None = Field(None, exclude_if=lambda v: v is None)
    """The model's own answer when the agent did not give it: it stated figures no tool result
    contains after a tool call of the turn failed, so ``answer`` says what failed instead."""


class ToolCall(BaseEvent):
    type: Literal["tool_call"] = "tool_call"
    request_id: str
    step: int
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw: str = ""


class ToolResult(BaseEvent):
    type: Literal["tool_result"] = "tool_result"
    request_id: str
    step: int
    name: str
    ok: bool = True
    content: str = ""
    error: str | None = None
    truncated: bool = False
    latency_s: float = 0.0


class Passage(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    doc: str
    score: float
    text: str


class Retrieval(BaseEvent):
    type: Literal["retrieval"] = "retrieval"
    request_id: str
    step: int
    query: str
    passages: list[Passage] = Field(default_factory=list)


class GpuSample(BaseEvent):
    """One NVML reading for one device. ``source`` names what ``bw_util_pct`` means:
    ``gpm_dram_bw`` is real DRAM bandwidth utilisation (GPM, Hopper+); ``mem_duty_cycle`` is the
    percent of time memory was read or written (not bandwidth); ``none`` means unavailable."""

    type: Literal["gpu_sample"] = "gpu_sample"
    device: int = 0
    name: str = ""
    source: Literal["gpm_dram_bw", "mem_duty_cycle", "none"] = "none"
    bw_util_pct: float | None = None
    est_gbps: float | None = None
    peak_gbps: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    power_w: float | None = None


class GpuStatus(BaseEvent):
    """Sampler state changes: ``ok``, ``no_gpu``, ``no_driver``, ``permission``, ``device_lost``,
    ``error``; ``message`` is one human-readable line."""

    type: Literal["gpu_status"] = "gpu_status"
    state: str
    message: str = ""
    device: int | None = None


class Error(BaseEvent):
    type: Literal["error"] = "error"
    level: Literal["warning", "error"] = "error"
    where: str = ""
    message: str
    request_id: str | None = None


FindingKind = Literal["collapse", "outlier", "loop", "mismatch", "invalid_drafts", "draft_passes", "latency_spike"]
Severity = Literal["info", "warning", "error"]


class Finding(BaseEvent):
    """Something a detector (``specterm.diagnose``) found in the stream: one per episode, not one per
    step. ``evidence`` holds the numbers it decided on (rates, counts, seconds), so a reader can judge
    the threshold; ``request_id`` is the request to jump to (``None``: the session as a whole)."""

    type: Literal["finding"] = "finding"
    kind: FindingKind
    severity: Severity = "warning"
    request_id: str | None = None
    message: str
    evidence: dict[str, float] = Field(default_factory=dict)


class SessionEnded(BaseEvent):
    type: Literal["session_ended"] = "session_ended"
    reason: str = "done"


EVENT_CLASSES: tuple[type[BaseEvent], ...] = (
    SessionStarted,
    UserMessage,
    RequestStarted,
    ReplicaSeen,
    SpecStep,
    RequestFinished,
    EngineCounters,
    AgentStepStarted,
    AgentStepFinished,
    ToolCall,
    ToolResult,
    Retrieval,
    GpuSample,
    GpuStatus,
    Error,
    Finding,
    SessionEnded,
)
# Not UP007's `X | Y`: Union[...] spreads the tuple into a union; `|` has no spelling for that (ruff's "safe" fix drops it)
Event = Annotated[Union[EVENT_CLASSES], Field(discriminator="type")]  # type: ignore[valid-type]  # noqa: UP007

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
EVENT_TYPES: frozenset[str] = frozenset(c.model_fields["type"].default for c in EVENT_CLASSES)


Sink = Callable[[BaseEvent], None]
"""Where events go: the one type of every consumer (the UI's bridge, the recorder, the headless
printer) and every producer's ``sink`` argument (engine, agent, sampler, attach, compare)."""


def dump_event(event: BaseEvent) -> str:
    """One JSON line, no trailing newline."""
    return event.model_dump_json()


def parse_event(data: str | bytes | dict[str, Any]) -> Event:
    """Parse one event; raises ``pydantic.ValidationError`` on a bad shape or unknown type."""
    if isinstance(data, dict):
        return EVENT_ADAPTER.validate_python(data)
    return EVENT_ADAPTER.validate_json(data)
