"""From one engine step's record and delta to a ``spec_step`` event; and reconciliation.

Verdict assignment for a step whose scheduler record says the target verified k draft slots
(``drafted`` plus grammar-invalidated ``invalid`` slots) and sampled ``a + 1`` tokens:

* position i < a → ``accepted``;
* position a → ``bonus`` when a == k (every draft kept), else ``correction``;
* a step with k == 0 → every token is ``target``.

Nothing here imports vLLM: the engine hands in plain lists and metric objects, so the logic is
testable on its own and shared by every engine implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from specterm.events import EngineCounters, Error, Sink, SpecStep, Token
from specterm.stats import SpecStats


@dataclass(frozen=True, slots=True)
class StepRecord:
    req_id: str
    drafted: tuple[int, ...]
    """Real draft ids verified this step (grammar-invalidated ``-1`` padding removed)."""
    sampled: tuple[int, ...]
    """Every token the target produced this step, before stop-string/max-token truncation."""
    invalid: int
    """Drafts the grammar rejected before verification (vLLM's ``num_invalid_spec_tokens``)."""
    allowed: tuple[int, ...] | None = None
    """For a structured-output request: how many tokens the grammar allowed at each sampled
    position (row i of this step's grammar bitmask); ``None`` when no grammar applied."""
    padding: int = 0
    """``-1`` slots vLLM scheduled with no draft behind them and no grammar to blame: a new request
    whose prefill is a single token (a prefix-cache hit) is padded to ``1 + k`` rows to keep the
    batch uniform (vLLM ``Scheduler.schedule``: "Pad new decode requests to uniform spec decoding
    size"). Nothing was drafted, so specterm counts no drafts; vLLM's spec-decode counters count
    them as drafted and rejected, and ``reconcile`` adds them back before comparing (vLLM PR #50518,
    open, would exclude them upstream; the comparison would then fail loudly and this must go)."""
    from_grammar: tuple[bool, ...] | None = None
    """Grammar drafting (``grammar_draft.py``): which of ``drafted`` came from the grammar's forced
    run rather than the draft model; ``None`` when it is off."""
    draft_passes: int | None = None
    """Draft-model forward passes the proposer ran in this step (for the next step's drafts; the
    batch's passes: one pass serves every request in it); ``None`` without a draft model."""
    dropped: int = 0
    """Drafts proposed for this step that the grammar forbade and vLLM dropped before scheduling
    (``CapturingScheduler.update_draft_token_ids``); not in ``drafted``, not in vLLM's counters."""
    batch_size: int | None = None
    """Requests scheduled in the step (``SpecStep.batch_size``)."""

    def forced(self, position: int) -> bool:
        """The grammar allowed exactly one token at ``position`` of this step's sampled ids."""
        return self.allowed is not None and position < len(self.allowed) and self.allowed[position] == 1

    @property
    def accepted(self) -> int:
        # vLLM's own definition (scheduler.update_from_output): num_sampled - 1, when drafts existed.
        return max(len(self.sampled) - 1, 0) if self.drafted else 0


SPEC_METRICS = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
}
PER_POS_METRIC = "vllm:spec_decode_num_accepted_tokens_per_pos"


def assign_verdicts(emitted: Sequence[int], record: StepRecord | None) -> tuple[list[str], int, int]:
    """Verdicts for the emitted ids of one step; returns (verdicts, accepted a, draft slots k)."""
    k = len(record.drafted) + record.invalid if record else 0
    if k == 0:
        return ["target"] * len(emitted), 0, 0
    a = record.accepted
    verdicts = ["accepted" if i < a else ("bonus" if a == k else "correction") for i in range(len(emitted))]
    return verdicts, a, k


class StepAssembler:
    """Turns (delta ids, scheduler record) pairs of one request into ``spec_step`` events."""

    def __init__(
        self, request_id: str, hf_tokenizer: Any, prompt_ids: Sequence[int], clock: Callable[[], float], sink: Sink
    ) -> None:
        from tokenizers.decoders import DecodeStream

        self.request_id = request_id
        self.stats = SpecStats()
        self.per_step: list[tuple[int, int]] = []
        """(draft tokens, accepted) of each step with drafts or padding, as vLLM's detailed per-step
        lists count them (``StepRecord.padding`` included)."""
        self.padding = [0, 0]
        """Steps and slots of vLLM's draft-less padding (``StepRecord.padding``), for ``reconcile``."""
        self._hf = hf_tokenizer
        self._backend = hf_tokenizer.backend_tokenizer
        # Primed with the prompt's tail so the first piece decodes in context (leading spaces).
        self._stream = DecodeStream(ids=list(prompt_ids[-4:]), skip_special_tokens=True)
        self._clock, self._sink = clock, sink
        self._index = 0

    def _piece(self, token_id: int) -> str:
        return self._stream.step(self._backend, token_id) or ""

    def add(self, emitted: list[int], record: StepRecord | None, wall_s: float) -> SpecStep | None:
        if not emitted and record is None:
            return None
        verdicts, a, k = assign_verdicts(emitted, record)
        if record is not None and list(record.sampled[: len(emitted)]) != emitted:
            self._sink(
                Error(
                    t=self._clock(),
                    level="warning",
                    where="verdicts",
                    request_id=self.request_id,
                    message=f"step {self._index}: emitted ids {emitted} are not a prefix of "
                    f"the sampled ids {list(record.sampled)}",
                )
            )
        drafted = list(record.drafted) if record else []
        grammar = record.from_grammar if record else None
        rejected = drafted[a:]
        step = SpecStep(
            t=self._clock(),
            request_id=self.request_id,
            index=self._index,
            drafted=drafted,
            accepted=a,
            tokens=[
                Token(
                    id=i,
                    text=self._piece(i),
                    verdict=v,
                    forced=bool(record and record.forced(n)),
                    grammar=bool(grammar and n < a and grammar[n]),
                )
                for n, (i, v) in enumerate(zip(emitted, verdicts))
            ],
            rejected=rejected,
            rejected_text=[self._hf.decode([r]) for r in rejected],
            invalid_drafts=record.invalid if record else 0,
            grammar_drafts=sum(grammar) if grammar else 0,
            draft_passes=record.draft_passes if record else None,
            dropped_drafts=record.dropped if record else 0,
            wall_s=wall_s,
            batch_size=record.batch_size if record else None,
        )
        self._index += 1
        self.stats.add_step(step)
        pad = record.padding if record else 0
        if k or pad:
            self.per_step.append((len(drafted) + pad, a))
        if pad:
            self.padding[0] += not k
            self.padding[1] += pad
        self._sink(step)
        return step


def spec_counters(metrics: Sequence[Any]) -> dict[str, Any]:
    """vLLM's cumulative spec-decode counters, summed over label sets."""
    out: dict[str, Any] = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "accepted_per_pos": []}
    for m in metrics:
        if m.name in SPEC_METRICS:
            out[SPEC_METRICS[m.name]] += int(m.value)
        elif m.name == PER_POS_METRIC:
            pos = out["accepted_per_pos"]
            for i, v in enumerate(m.values):
                if i < len(pos):
                    pos[i] += int(v)
                else:
                    pos.append(int(v))
    return out


def vllm_counts(stats: SpecStats, padding: Sequence[int] = (0, 0)) -> dict[str, int]:
    """Drafts, draft tokens and accepted as vLLM's spec-decode counters count them: specterm's own,
    with the draft-less padding (``StepRecord.padding``: steps, slots) added back. The one place it
    is added back, so the day vLLM stops counting padding (PR #50518) one line changes."""
    return {
        "drafts": stats.drafts + padding[0],
        "draft_tokens": stats.draft_tokens + padding[1],
        "accepted": stats.accepted,
    }


def vllm_totals(assemblers: Iterable[StepAssembler]) -> dict[str, int]:
    """``vllm_counts`` summed over requests: comparable with vLLM's counter deltas over a batch or
    with a server's ``/metrics``."""
    out = dict.fromkeys(SPEC_METRICS.values(), 0)
    for a in assemblers:
        for key, value in vllm_counts(a.stats, a.padding).items():
            out[key] += value
    return out


def _trim(values: list[int]) -> list[int]:
    values = list(values)
    while values and values[-1] == 0:
        values.pop()
    return values


def reconcile(
    stats: SpecStats,
    per_step: list[tuple[int, int]],
    before: dict[str, Any],
    after: dict[str, Any],
    detailed: Any,
    padding: Sequence[int] = (0, 0),
) -> tuple[dict, dict, list[str]]:
    """Compare our counts for one request with vLLM's counter deltas and per-request metrics.
    ``padding`` = (steps, slots) of draft-less padding (``StepRecord.padding``): vLLM counts them as
    drafts, we do not, so they are added to ours for the comparison and reported in ``ours``."""
    ours: dict[str, Any] = {
        "drafts": stats.drafts,
        "draft_tokens": stats.draft_tokens,
        "accepted": stats.accepted,
        "accepted_per_pos": _trim(stats.accepted_per_pos),
    }
    expected = ours | vllm_counts(stats, padding)
    if padding[1]:
        ours["vllm_padding"] = {"steps": padding[0], "slots": padding[1]}
    pos_before = before["accepted_per_pos"] + [0] * len(after["accepted_per_pos"])
    theirs: dict[str, Any] = {key: after[key] - before[key] for key in ("drafts", "draft_tokens", "accepted")}
    theirs["accepted_per_pos"] = _trim([v - pos_before[i] for i, v in enumerate(after["accepted_per_pos"])])
    problems = [
        f"{key}: ours {expected[key]} vs vllm {theirs[key]}" for key in expected if expected[key] != theirs[key]
    ]
    steps, problem = per_step_check(per_step, detailed)
    if steps is not None:
        theirs["per_step"] = steps
    problems += [problem] if problem else []
    return ours, theirs, problems


def report_check(sink: Sink, t: float, request_id: str, ours: dict, theirs: dict, problem: str, against: str) -> None:
    """One request's reconciliation as the event stream carries it: an ``EngineCounters`` always, and
    a warning naming what disagreed (``against``: which of vLLM's numbers) when something did."""
    sink(EngineCounters(t=t, request_id=request_id, ours=ours, vllm=theirs, matched=not problem, detail=problem))
    if problem:
        sink(
            Error(
                t=t,
                level="warning",
                where="reconcile",
                request_id=request_id,
                message=f"specterm's verdicts disagree with {against}: {problem}",
            )
        )


def per_step_check(per_step: list[tuple[int, int]], detailed: Any) -> tuple[list[tuple[int, int]] | None, str]:
    """One request's (drafted, accepted) per step, ours against vLLM's per-request metrics: (theirs,
    the problem or "")."""
    if detailed is None:
        return None, "vLLM returned no per-request spec-decode metrics"
    steps = list(zip(detailed.per_step_drafted, detailed.per_step_accepted))
    if steps == per_step:
        return steps, ""
    first = next((i for i, (x, y) in enumerate(zip(steps, per_step)) if x != y), min(len(steps), len(per_step)))
    return steps, f"per-step (drafted, accepted) differ from step {first} ({len(per_step)} ours vs {len(steps)} vllm)"
