"""One summary of a stream of events, shared by every consumer.

The headless ``run`` summary line, ``replay --summary``, the dashboard panels and the engine's
reconciliation against vLLM all read these numbers, so they always agree. Definitions follow vLLM's
(see ``vllm/v1/spec_decode/metrics.py``):

* acceptance rate = accepted draft tokens / drafted tokens;
* mean acceptance length = 1 + accepted / drafts, where a *draft* is a step with k > 0;
* per-position acceptance i = drafts whose i-th token was accepted / drafts;
* conditional acceptance i = drafts whose i-th token was accepted / drafts that verified an i-th
  token with every earlier one accepted: where, once it got that far, the draft loses (vLLM PR
  #39359 argues this says more than the unconditional rate).

The accumulators are incremental (``add``), so a live UI and a 100k-step replay cost the same per
event.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from specterm.events import (
    VERDICTS,
    AgentStepFinished,
    BaseEvent,
    Finding,
    ReplicaSeen,
    RequestFinished,
    RequestStarted,
    SpecStep,
)
from specterm.regions import RequestTracker, WhereLost


@dataclass
class SpecStats:
    """Verdict counts for one scope (a request, or a whole session)."""

    by_verdict: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))
    forced: int = 0
    rejected: int = 0
    steps: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    draft_passes: int = 0
    """Draft-model forward passes as the engine ran them (``SpecStep.draft_passes``: k per step for
    vLLM's proposer, fewer with grammar drafting); a session recorded without them counts one per
    draft slot, grammar-invalidated ones included. A method without a draft model (ngram, suffix)
    streams no weights for them."""
    grammar_drafts: int = 0
    """Draft slots the grammar proposed rather than the draft model (grammar drafting)."""
    grammar_accepted: int = 0
    """Emitted tokens that were grammar drafts the target accepted."""
    dropped_drafts: int = 0
    """Drafts the grammar forbade, dropped by vLLM before verification (``SpecStep.dropped_drafts``)."""
    by_k: dict[int, dict[int, int]] = field(default_factory=dict)
    """Steps per k (``SpecStep.k``; 0: target tokens) and, within each, per batch size the step ran
    at (0: not recorded): what a batch-size schedule did, step by step."""
    all_accepted_at_k: list[int] = field(default_factory=list)
    """Drafts with every one of their k tokens accepted, by k: with ``accepted_per_pos`` it gives
    how many drafts reached each position (``conditional_per_position``) at one count per step."""
    where: WhereLost = field(default_factory=WhereLost)
    """Acceptance by region of a structured output and the contexts of corrections (``regions.py``):
    counted by ``SessionSummary``, which knows each request's schema and previous token."""

    def add_step(self, step: SpecStep) -> None:
        by_verdict, forced, grammar = self.by_verdict, 0, 0
        for tok in step.tokens:
            by_verdict[tok.verdict] += 1
            forced += tok.forced
            grammar += tok.grammar
        self._add_step_counts(step, forced, grammar)

    def _add_step_counts(self, step: SpecStep, forced: int, grammar: int = 0) -> None:
        """Everything of ``add_step`` but the per-token verdict counts (``SessionSummary.add_step``
        counts tokens once for both of its scopes: that loop is most of a file summary's time)."""
        self.steps += 1
        self.forced += forced
        self.grammar_accepted += grammar
        self.rejected += len(step.rejected)
        k = len(step.drafted)
        self.dropped_drafts += step.dropped_drafts
        sizes = self.by_k.setdefault(k + step.invalid_drafts, {})
        batch = step.batch_size or 0
        sizes[batch] = sizes.get(batch, 0) + 1
        if step.draft_passes is not None:
            self.draft_passes += step.draft_passes
        elif k or step.invalid_drafts:  # a session recorded before passes were: one per slot
            self.draft_passes += k + step.invalid_drafts
        if k or step.invalid_drafts:
            self.grammar_drafts += step.grammar_drafts
            self.drafts += 1
            self.draft_tokens += k
            self.accepted += step.accepted
            per_pos = self.accepted_per_pos
            if len(per_pos) < k:
                per_pos.extend([0] * (k - len(per_pos)))
            for i in range(step.accepted):
                per_pos[i] += 1
            if step.accepted >= k:
                full = self.all_accepted_at_k
                if len(full) <= k:
                    full.extend([0] * (k + 1 - len(full)))
                full[k] += 1

    def merge(self, other: SpecStats) -> None:
        """Add ``other``'s counts (every figure is a sum, so a session is its requests merged)."""
        for verdict, n in other.by_verdict.items():
            self.by_verdict[verdict] += n
        self.forced += other.forced
        self.rejected += other.rejected
        self.steps += other.steps
        self.drafts += other.drafts
        self.draft_tokens += other.draft_tokens
        self.accepted += other.accepted
        self.draft_passes += other.draft_passes
        self.grammar_drafts += other.grammar_drafts
        self.grammar_accepted += other.grammar_accepted
        self.dropped_drafts += other.dropped_drafts
        for k, sizes in other.by_k.items():
            mine = self.by_k.setdefault(k, {})
            for batch, n in sizes.items():
                mine[batch] = mine.get(batch, 0) + n
        per_pos = self.accepted_per_pos
        if len(per_pos) < len(other.accepted_per_pos):
            per_pos.extend([0] * (len(other.accepted_per_pos) - len(per_pos)))
        for i, n in enumerate(other.accepted_per_pos):
            per_pos[i] += n
        full = self.all_accepted_at_k
        if len(full) < len(other.all_accepted_at_k):
            full.extend([0] * (len(other.all_accepted_at_k) - len(full)))
        for i, n in enumerate(other.all_accepted_at_k):
            full[i] += n
        self.where.merge(other.where)

    @property
    def tokens(self) -> int:
        return sum(self.by_verdict.values())

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.draft_tokens if self.draft_tokens else None

    @property
    def mean_acceptance_length(self) -> float | None:
        return 1.0 + self.accepted / self.drafts if self.drafts else None

    @property
    def draft_passes_per_token(self) -> float | None:
        """Draft-model forward passes per emitted token (what grammar drafting lowers)."""
        return self.draft_passes / self.tokens if self.tokens else None

    @property
    def grammar_draft_share(self) -> float | None:
        """Of the draft tokens verified, the share the grammar proposed (grammar drafting)."""
        return self.grammar_drafts / self.draft_tokens if self.draft_tokens else None

    @property
    def per_position(self) -> list[float]:
        return [a / self.drafts for a in self.accepted_per_pos] if self.drafts else []

    @property
    def conditional_per_position(self) -> list[float | None]:
        """P(position i accepted | positions before it accepted), per position; ``None`` where no
        draft got that far. Drafts reaching i: those with i accepted already (``accepted_per_pos``
        at i - 1; every draft at 0) less those that had only i tokens, all accepted."""
        full = self.all_accepted_at_k
        out: list[float | None] = []
        reached_before = self.drafts
        for i, accepted in enumerate(self.accepted_per_pos):
            reached = reached_before - (full[i] if i < len(full) else 0)
            out.append(accepted / reached if reached > 0 else None)
            reached_before = accepted
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "by_verdict": dict(self.by_verdict),
            "forced": self.forced,
            "rejected": self.rejected,
            "steps": self.steps,
            "drafts": self.drafts,
            "draft_tokens": self.draft_tokens,
            "accepted": self.accepted,
            "draft_passes": self.draft_passes,
            "grammar_drafts": self.grammar_drafts,
            "grammar_accepted": self.grammar_accepted,
            "dropped_drafts": self.dropped_drafts,
            "acceptance_rate": self.acceptance_rate,
            "mean_acceptance_length": self.mean_acceptance_length,
            "per_position": self.per_position,
            "by_k": {k: dict(sorted(v.items())) for k, v in sorted(self.by_k.items())},
            "conditional_per_position": self.conditional_per_position,
            **self.where.as_dict(),
        }

    def k_line(self) -> str:
        """Steps per k and the batch sizes they ran at, compactly: ``k4 ×120 @1 · k0 ×300 @3–8``
        (``@?``: batch size not recorded); "" when no step recorded its batch size (older sessions)."""
        if all(set(v) == {0} for v in self.by_k.values()):
            return ""
        parts = []
        for k, sizes in sorted(self.by_k.items(), reverse=True):
            known = sorted(b for b in sizes if b)
            at = "?" if not known else (f"{known[0]}" if known[0] == known[-1] else f"{known[0]}–{known[-1]}")
            parts.append(f"k{k} ×{sum(sizes.values())} @{at}")
        return " · ".join(parts)


@dataclass(frozen=True)
class WeightTraffic:
    """Weight bytes read per emitted token, speculative and as target-only would read them.

    Every engine step is one target pass (verification, or the prefill), reading the target's
    weights once (``engine/weights.py``); each draft pass (``SpecStats.draft_passes``) the draft's. Target-only reads the
    target once per token. One request's stream, as the in-process engine runs it: requests batched
    together share their passes, so under load each reads less than this (``specterm attach``)."""

    target_bytes: int
    draft_bytes: int
    """0 for a method without a draft model (ngram, suffix)."""
    per_token: float
    tokens: int
    seconds: float
    """Wall time of the engine steps the bytes were read in."""

    @property
    def ratio(self) -> float:
        """Speculative ÷ target-only bytes per token (target-only reads ``target_bytes`` per token)."""
        return self.per_token / self.target_bytes

    @property
    def bytes_per_s(self) -> float | None:
        """Weight bytes read per second of engine steps: a floor on the memory traffic they needed."""
        return None if self.seconds <= 0 else self.per_token * self.tokens / self.seconds

    @classmethod
    def of(
        cls, stats: SpecStats, seconds: float, target_bytes: int | None, draft_bytes: int | None
    ) -> WeightTraffic | None:
        if not target_bytes or not stats.tokens:
            return None
        draft = draft_bytes or 0
        per_token = (target_bytes * stats.steps + draft * stats.draft_passes) / stats.tokens
        return cls(target_bytes, draft, per_token, stats.tokens, seconds)


@dataclass
class RequestSummary:
    request_id: str
    stats: SpecStats = field(default_factory=SpecStats)
    ttft_s: float | None = None
    wall_s: float | None = None
    finish_reason: str | None = None
    cancelled: bool = False
    prefill_tokens: int | None = None
    """Tokens of the first step that emitted any: the prefill step, not decoding (as the bench counts)."""
    tracker: RequestTracker = field(default_factory=lambda: RequestTracker(False), repr=False, compare=False)
    """Its JSON lexer (set by its ``request_started`` when it ran under a schema) and last token."""

    @property
    def tokens_per_s(self) -> float | None:
        return tokens_per_s(self.stats.tokens, self.wall_s)

    @property
    def decode(self) -> tuple[int, float] | None:
        """(decode tokens, decode seconds) of a finished request: after its prefill step and TTFT,
        the bench's definition (``bench.runner.RequestRecord``), so a live rate compares with it."""
        if self.wall_s is None or self.ttft_s is None or self.prefill_tokens is None:
            return None
        return self.stats.tokens - self.prefill_tokens, max(self.wall_s - self.ttft_s, 0.0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            **self.stats.as_dict(),
            "ttft_s": self.ttft_s,
            "wall_s": self.wall_s,
            "tokens_per_s": self.tokens_per_s,
            "finish_reason": self.finish_reason,
            "cancelled": self.cancelled,
        }


@dataclass
class SessionSummary:
    """Whole-session and per-request figures, fed one event at a time."""

    session: SpecStats = field(default_factory=SpecStats)
    requests: dict[str, RequestSummary] = field(default_factory=dict)
    agent_steps: list[AgentStepFinished] = field(default_factory=list)
    step_wall_s: list[float] = field(default_factory=list)
    """Wall time of every engine step, in order (the latency sparkline)."""
    step_accept: list[float] = field(default_factory=list)
    """Per engine step with drafts: accepted / drafted (the acceptance sparkline)."""
    findings: list[Finding] = field(default_factory=list)
    """What the detectors found (``specterm.diagnose``), in stream order: rare, so kept whole."""
    first_step_start: float | None = None
    """When the first engine step began (its ``t`` less its ``wall_s``), and the last one ended (its
    ``t``): counted by ``add_step`` only, not by ``session/fast_summary.py`` (which prints no rate)."""
    last_step_end: float = 0.0
    replicas: dict[str, SessionSummary] = field(default_factory=dict)
    """A fleet's schedulers (``specterm attach`` of several): each replica's own summary, fed its
    requests' events, so every figure above exists per replica by the same definitions."""
    replica_seen: dict[str, ReplicaSeen] = field(default_factory=dict)
    """What each replica said of itself (model, speculation, weight bytes), latest first seen."""
    replica_of: dict[str, str] = field(default_factory=dict)
    """Request id → the replica that ran it."""
    of_replica: bool = False
    """One of ``replicas``: fed its own requests, routes nothing further."""

    def request(self, request_id: str) -> RequestSummary:
        req = self.requests.get(request_id)
        if req is None:
            req = self.requests[request_id] = RequestSummary(request_id)
        return req

    def weight_traffic(self, models: dict[str, Any] | None) -> WeightTraffic | None:
        """The session's ``WeightTraffic``, with the weight bytes the header records (``models``:
        ``weight_bytes`` of target and draft); None when it records none (an older session, a hub id)."""
        weights = (models or {}).get("weight_bytes") or {}
        return WeightTraffic.of(self.session, sum(self.step_wall_s), weights.get("target"), weights.get("draft"))

    @property
    def served_s(self) -> float | None:
        """Seconds from the first engine step's start to the last one's end; None before a step."""
        return None if self.first_step_start is None else self.last_step_end - self.first_step_start

    def served_tokens_per_s(self) -> float | None:
        """Output tokens ÷ ``served_s``: what a server gave all its clients together while watched, idle
        gaps included (``vllm bench serve``'s output throughput); not a rolling window, which nothing
        would redraw while the server idles (it would go on showing a rate no one is served)."""
        return tokens_per_s(self.session.tokens, self.served_s)

    def decode_tokens_per_s(self) -> float | None:
        """Decode tokens ÷ decode seconds over the finished requests (``RequestSummary.decode``)."""
        return pooled_rate(d for d in (r.decode for r in self.requests.values()) if d is not None)

    def add_step(self, step: SpecStep) -> None:
        """One engine step. Duck-typed: anything with ``SpecStep``'s fields (the fast file summary
        passes its own slim structs, ``session/fast_summary.py``)."""
        summary = self.request(step.request_id)
        if summary.prefill_tokens is None and step.tokens:
            summary.prefill_tokens = len(step.tokens)
        session, request = self.session, summary.stats
        in_session, in_request, forced, grammar = session.by_verdict, request.by_verdict, 0, 0
        for tok in step.tokens:
            verdict = tok.verdict
            in_session[verdict] += 1
            in_request[verdict] += 1
            forced += tok.forced
            grammar += tok.grammar
        session._add_step_counts(step, forced, grammar)
        request._add_step_counts(step, forced, grammar)
        summary.tracker.count(step, (session.where, request.where))
        self.step_wall_s.append(step.wall_s)
        if step.drafted:
            self.step_accept.append(step.accepted / len(step.drafted))
        if self.first_step_start is None:
            self.first_step_start = step.t - step.wall_s
        self.last_step_end = step.t
        if self.replica_of:
            replica = self.replica_of.get(step.request_id)
            if replica is not None:
                self.replicas[replica].add_step(step)

    def _replica(self, name: str) -> SessionSummary:
        summary = self.replicas.get(name)
        if summary is None:
            summary = self.replicas[name] = SessionSummary(of_replica=True)
        return summary

    def add(self, event: BaseEvent) -> None:
        if isinstance(event, SpecStep):
            self.add_step(event)
        elif isinstance(event, RequestStarted):
            self.request(event.request_id).tracker = RequestTracker(bool(event.params.get("json_schema")))
            if event.replica is not None and not self.of_replica:
                self.replica_of[event.request_id] = event.replica
                self._replica(event.replica).add(event)
        elif isinstance(event, RequestFinished):
            req = self.request(event.request_id)
            req.ttft_s, req.wall_s = event.ttft_s, event.wall_s
            req.finish_reason, req.cancelled = event.finish_reason, event.cancelled
            replica = self.replica_of.get(event.request_id)
            if replica is not None:
                self.replicas[replica].add(event)
        elif isinstance(event, ReplicaSeen):
            self.replica_seen[event.replica] = event
            self._replica(event.replica)
        elif isinstance(event, AgentStepFinished):
            self.agent_steps.append(event)
        elif isinstance(event, Finding):
            self.findings.append(event)

    def replica_dict(self) -> dict[str, Any]:
        """One replica's figures (``replicas``): its session's, its request count and served rate."""
        return {**self.session.as_dict(), "requests": len(self.requests), "tokens_per_s": self.served_tokens_per_s()}

    def findings_by_kind(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for finding in self.findings:
            counts[finding.kind] = counts.get(finding.kind, 0) + 1
        return counts

    def as_dict(self) -> dict[str, Any]:
        return {
            "session": self.session.as_dict(),
            "requests": [r.as_dict() for r in self.requests.values()],
            "agent_steps": [s.model_dump(exclude={"type"}) for s in self.agent_steps],
            "answers": sum(s.answer is not None for s in self.agent_steps),
            # given with a figure no tool returned; withheld: the model's was replaced by what failed
            "ungrounded_answers": sum(
                s.answer is not None and bool(s.ungrounded) and s.withheld is None for s in self.agent_steps
            ),
            "withheld_answers": sum(s.withheld is not None for s in self.agent_steps),
            "findings_by_kind": self.findings_by_kind(),
            # a fleet's schedulers (attach of several): each one's figures, by the same definitions
            **(
                {"replicas": {name: r.replica_dict() for name, r in sorted(self.replicas.items())}}
                if self.replicas
                else {}
            ),
            "findings": [f.model_dump(exclude={"type"}, exclude_none=True) for f in self.findings],
        }


def summarize(events: Iterable[BaseEvent]) -> SessionSummary:
    summary = SessionSummary()
    for event in events:
        summary.add(event)
    return summary


def tokens_per_s(tokens: int, seconds: float | None) -> float | None:
    """The one definition of a rate every display uses (a request, an agent step, a run): tokens ÷
    seconds; None when there is no time or no token to divide."""
    return tokens / seconds if tokens and seconds else None


def pooled_rate(parts: Iterable[tuple[int, float]]) -> float | None:
    """Tokens ÷ seconds pooled over (tokens, seconds) parts: the decode rate of a session and of a
    bench configuration (``bench.results.decode_rate``) alike; None without time."""
    parts = list(parts)
    seconds = sum(s for _, s in parts)
    return sum(n for n, _ in parts) / seconds if seconds > 0 else None  # 0 tokens in real time: 0.0


def fmt_opt(value: float | None, spec: str = ".2f", none: str = "–") -> str:
    """Format an optional number for display (``–`` when undefined, e.g. no drafts yet)."""
    return none if value is None else format(value, spec)
