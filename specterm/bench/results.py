"""From request records to per-configuration results: medians, spreads, c, and the theory.

Definitions (all per configuration):

* **decode tokens/s** — per request, decode tokens ÷ decode seconds (the part after its first
  token; see ``runner``); per round the median over requests, then median [min–max] over rounds.
  Medians, because on a shared machine one load spike would otherwise own a round's total.
* **speed-up** — for each prompt, this configuration's decode tokens/s ÷ the target-only engine's
  decode tokens/s on the same prompt, run back to back in the same block and round (a *pair*); per
  round the median over its pairs, then median [min–max] over rounds. Pairs adjacent in time and
  medians make it robust to a machine shared with other work (load spikes hit one pair, not a
  round's total).
* **steps per output token** — engine steps ÷ output tokens (1.0 target-only; lower is better).
* acceptance rate, mean acceptance length, per-position acceptance — ``specterm.stats`` over all the
  configuration's requests (vLLM's definitions).
* **c** (draft cost ratio, the theory's input) — for ``draft_model``: median decode-step time of the
  draft loaded as a target-only engine ÷ that of the target, paired per round in the draft timing
  block, median over rounds. A full engine step of each model, so fixed per-step overhead counts
  on both sides, exactly as it does for the target step in the model. For ``ngram`` and ``suffix``
  c = 0 (no model; the lookup's host time shows up as overhead).
* **c_inline** (diagnostic) — what drafting plus the wider verification really added to a step:
  ``(T_spec − T_target) / (k · T_target)`` with T the median decode-step times of the same round.
  c_inline > c means a speculative step costs more than the model's ``k·c + 1`` target steps.
* **theory** — ``theory.theoretical_speedup(α, k, c)`` with α from the mean acceptance length.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from specterm.bench.runner import DRAFT_AS_TARGET, TARGET_ONLY, ConfigSpec, RequestRecord
from specterm.bench.theory import alpha_from_acceptance_length, theoretical_speedup
from specterm.stats import SpecStats, pooled_rate


@dataclass(frozen=True)
class Spread:
    """Median and range of a sample (e.g. one value per round)."""

    median: float
    lo: float
    hi: float
    n: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread | None:
        vals = [v for v in values if v is not None]
        if not vals:
            return None
        return cls(statistics.median(vals), min(vals), max(vals), len(vals))


@dataclass
class ConfigResult:
    label: str
    method: str | None
    k: int
    requests: int
    output_tokens: int
    tokens_per_s: Spread | None
    wall_s: Spread | None
    ttft_s: Spread | None
    step_s: float | None
    """Median decode-step wall time."""
    steps_per_token: float | None
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position: list[float] = field(default_factory=list)
    alpha: float | None = None
    c: float | None = None
    c_inline: float | None = None
    speedup: Spread | None = None
    theory: float | None = None
    measured_over_theory: float | None = None
    ttft_by_step: list[float] = field(default_factory=list)
    """Median TTFT of agent step 1, 2, ... over the records that reached that step (agent turns)."""
    later_cached_share: float | None = None
    """Of the prompt tokens of steps 2+, the share vLLM found in its prefix cache (None: not reported)."""
    grammar: bool = False
    """Grammar drafting was on (``draft_model+grammar``)."""
    draft_passes_per_token: float | None = None
    """Draft-model forward passes ÷ emitted tokens (``SpecStats.draft_passes``; None without a draft model)."""
    grammar_draft_share: float | None = None
    """Of the draft tokens verified, the share the grammar proposed (grammar drafting only)."""

    @property
    def name(self) -> str | None:
        """The method as bench names it (``draft_model+grammar``), as ``ConfigSpec.name``."""
        return ConfigSpec(self.method, self.k, self.grammar).name

    @property
    def later_ttft_share(self) -> float | None:
        """Median TTFT of steps 2+ ÷ step 1's: what a step that resends its prefix still pays for it."""
        if len(self.ttft_by_step) < 2 or not self.ttft_by_step[0]:
            return None
        return statistics.median(self.ttft_by_step[1:]) / self.ttft_by_step[0]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "later_ttft_share": self.later_ttft_share}


def merge_stats(records: Iterable[RequestRecord]) -> SpecStats:
    """One ``SpecStats`` holding the counts of many requests (same definitions, summed counts)."""
    out = SpecStats()
    for rec in records:
        out.merge(rec.stats)
    return out


def ttft_by_step(records: Sequence[RequestRecord]) -> list[float]:
    """Per step index (agent step 1, 2, ...): the median TTFT over the records that reached it."""
    by_step: dict[int, list[float]] = defaultdict(list)
    for rec in records:
        for i, t in enumerate(rec.step_ttft_s):
            if t is not None:
                by_step[i].append(t)
    out = []
    for i in range(len(by_step)):
        if not by_step.get(i):
            break
        out.append(statistics.median(by_step[i]))
    return out


def later_cached_share(records: Sequence[RequestRecord]) -> float | None:
    """Prompt tokens served from the prefix cache ÷ prompt tokens, over every step after the first."""
    pairs = [(p, c) for rec in records for p, c in rec.step_cached[1:] if c is not None and p]
    total = sum(p for p, _ in pairs)
    return sum(c for _, c in pairs) / total if total else None


def decode_rate(records: Sequence[RequestRecord]) -> float | None:
    """Decode tokens ÷ decode seconds, summed over the records (None without decode time)."""
    return pooled_rate((r.decode_tokens, r.decode_s) for r in records)


def median_rate(records: Sequence[RequestRecord]) -> float | None:
    """Median over requests of each request's decode tokens/s."""
    rates = [x for x in (decode_rate([r]) for r in records) if x is not None]
    return statistics.median(rates) if rates else None


def median_step(records: Sequence[RequestRecord]) -> float | None:
    steps = [s for r in records for s in r.decode_step_s]
    return statistics.median(steps) if steps else None


def paired_ratios(base: Sequence[RequestRecord], other: Sequence[RequestRecord]) -> list[float]:
    """Per prompt: decode rate of ``other`` ÷ decode rate of ``base`` (prompts present in both)."""
    by_prompt = {r.prompt: r for r in base}
    out = []
    for rec in other:
        ref = by_prompt.get(rec.prompt)
        if ref is None:
            continue
        a, b = decode_rate([rec]), decode_rate([ref])
        if a is not None and b:
            out.append(a / b)
    return out


MODEL_FREE = ("ngram", "suffix")
"""Methods that draft by lookup, without a model: c = 0 (their lookup cost shows in measured ÷ theory)."""


def units_by_turn(records: Sequence[RequestRecord], label: str) -> list[RequestRecord]:
    """``label``'s measured units in the order its engine ran them (round by round, prompt by
    prompt): entry 0 met a fresh engine, entry n had seen n units before."""
    return sorted((r for r in records if r.config == label), key=lambda r: (r.round, r.prompt))


def speedup_by_turn(records: Sequence[RequestRecord], label: str) -> list[float | None]:
    """Paired decode speed-up of ``label`` over target-only per unit, in ``units_by_turn`` order.
    What suffix decoding learns across turns shows as a rise along this list (and, free of timing
    noise, as more tokens per step)."""
    target = {(r.block, r.round, r.prompt): r for r in records if r.config == TARGET_ONLY and r.block == label}
    out: list[float | None] = []
    for rec in units_by_turn(records, label):
        ref = target.get((rec.block, rec.round, rec.prompt))
        a, b = decode_rate([rec]), decode_rate([ref]) if ref else None
        out.append(a / b if a is not None and b else None)
    return out


def _rounds(records: Iterable[RequestRecord]) -> dict[tuple[str, int], dict[str, list[RequestRecord]]]:
    """(block, round) → config label → records."""
    out: dict[tuple[str, int], dict[str, list[RequestRecord]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        out[(rec.block, rec.round)][rec.config].append(rec)
    return out


def draft_cost_ratio(records: Sequence[RequestRecord]) -> Spread | None:
    """c per round of the draft timing block: median step(draft as target) ÷ median step(target)."""
    ratios = []
    for (block, _), by_cfg in _rounds(records).items():
        if block != DRAFT_AS_TARGET:
            continue
        d, t = median_step(by_cfg.get(DRAFT_AS_TARGET, [])), median_step(by_cfg.get(TARGET_ONLY, []))
        if d is not None and t:
            ratios.append(d / t)
    return Spread.of(ratios)


def _base(label: str, method: str | None, k: int, recs: Sequence[RequestRecord], rates: list[float]) -> ConfigResult:
    tokens = sum(r.tokens for r in recs)
    return ConfigResult(
        label=label,
        method=method,
        k=k,
        requests=len(recs),
        output_tokens=tokens,
        tokens_per_s=Spread.of(rates),
        wall_s=Spread.of(r.wall_s for r in recs),
        ttft_s=Spread.of(r.ttft_s for r in recs),
        step_s=median_step(recs),
        steps_per_token=sum(r.steps for r in recs) / tokens if tokens else None,
        ttft_by_step=ttft_by_step(recs),
        later_cached_share=later_cached_share(recs),
    )


def aggregate(records: Sequence[RequestRecord], specs: Sequence[ConfigSpec]) -> list[ConfigResult]:
    """Target-only first, then each configuration in ``specs`` order (see the module docstring)."""
    rounds = _rounds(records)
    target_recs = [r for r in records if r.config == TARGET_ONLY]
    target_rates = [median_rate(by[TARGET_ONLY]) for by in rounds.values() if by.get(TARGET_ONLY)]
    target = _base(TARGET_ONLY, None, 0, target_recs, [x for x in target_rates if x is not None])
    target.speedup = Spread(1.0, 1.0, 1.0, len(target_rates))
    c_draft = draft_cost_ratio(records)
    out = [target]
    for spec in specs:
        label = spec.label
        recs = [r for r in records if r.config == label]
        rates, speedups, inline = [], [], []
        for (block, _), by_cfg in rounds.items():
            if block != label or not by_cfg.get(label):
                continue
            rate = median_rate(by_cfg[label])
            if rate is not None:
                rates.append(rate)
            pairs = paired_ratios(by_cfg.get(TARGET_ONLY, []), by_cfg[label])
            if pairs:
                speedups.append(statistics.median(pairs))
            ts, tt = median_step(by_cfg[label]), median_step(by_cfg.get(TARGET_ONLY, []))
            if ts is not None and tt and spec.k:
                inline.append((ts - tt) / (spec.k * tt))
        res = _base(label, spec.method, spec.k, recs, rates)
        stats = merge_stats(recs)
        res.acceptance_rate, res.mean_acceptance_length = stats.acceptance_rate, stats.mean_acceptance_length
        res.per_position = stats.per_position
        res.grammar = spec.grammar
        if spec.method not in MODEL_FREE:
            res.draft_passes_per_token = stats.draft_passes_per_token
        if spec.grammar:
            res.grammar_draft_share = stats.grammar_draft_share
        res.speedup = Spread.of(speedups)
        res.c_inline = statistics.median(inline) if inline else None
        res.c = 0.0 if spec.method in MODEL_FREE else (c_draft.median if c_draft else None)
        if res.mean_acceptance_length is not None and spec.k:
            res.alpha = alpha_from_acceptance_length(res.mean_acceptance_length, spec.k)
            if res.c is not None:
                res.theory = theoretical_speedup(res.alpha, spec.k, res.c)
                if res.speedup is not None:
                    res.measured_over_theory = res.speedup.median / res.theory
        out.append(res)
    return out
