"""Is this backend's speculative decoding correct? Two checks any correct backend passes.

(a) **Identical draft** — the draft model *is* the target (same path, same weights), drafting by
    sampling (``draft_sample_method="probabilistic"``) so the draft distribution q equals the
    target's p. Rejection sampling accepts a draft token with probability min(1, p/q) = 1, so the
    acceptance rate (accepted ÷ drafted) must be ≈ 100 % (≥ ``MIN_ACCEPTANCE``) at temperature 0
    and at temperature > 0 with a seed. (With vLLM's default greedy drafting, q is one-hot and even
    a correct backend accepts only with probability p(argmax) at T > 0 — hence sampled drafts here.)
(b) **Lossless greedy** — at temperature 0 the speculative output (token ids) must equal the
    target-only output, for the identical draft and for the configured real draft.
(c) **Same distribution** — at each temperature > 0, the first tokens sampled with the configured
    real draft are distributed as target-only samples (``bench.distribution``: chi-square, 2,000
    seeded samples a side). Check (a) never rejects a draft, so only (c) exercises the rejected-draft
    path (the recovered token's distribution).

A *violation* names the check, the configuration and the evidence; any violation means exit 1.
The verdict logic (``judge``) works on plain numbers so it is tested without an engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from specterm.bench.distribution import compare
from specterm.engine.base import EngineConfig, GenerationParams, SpecEngine
from specterm.events import SpecStep
from specterm.stats import SpecStats

MIN_ACCEPTANCE = 0.98
DISTRIBUTION_SAMPLES = 2000
DISTRIBUTION_POSITIONS = 3
DISTRIBUTION_PROMPT = "The customer"
SANITY_PROMPTS = (
    '{"tool": "query_sql", "arguments": {"sql": "SELECT',
    "Runbook: if the payments queue backs up,",
    "The customer alice placed",
)


@dataclass
class SanityRun:
    """What one configuration produced on the sanity prompts."""

    check: str
    """``identical_draft`` (check a, plus b at T = 0) or ``lossless`` (check b only)."""
    config: str
    """Human description: method, k, draft, temperature, seed, draft sampling."""
    temperature: float
    stats: SpecStats = field(default_factory=SpecStats)
    outputs: list[list[int]] = field(default_factory=list)
    reference: list[list[int]] | None = None
    """Target-only token ids for the same prompts (temperature 0 only)."""
    distribution: Any = None
    """``bench.distribution.DistributionCheck`` (check ``distribution`` only)."""


@dataclass(frozen=True)
class Violation:
    check: str
    config: str
    message: str

    def __str__(self) -> str:
        return f"{self.check} [{self.config}]: {self.message}"


def one_draft_then_nothing(per_position: Sequence[float]) -> bool:
    """The signature reported for the vLLM CPU build at T > 0: drafts at position 1 are sometimes
    accepted, at positions ≥ 2 never."""
    return len(per_position) >= 2 and per_position[0] > 0 and all(p == 0 for p in per_position[1:])


def judge_acceptance(run: SanityRun, minimum: float = MIN_ACCEPTANCE) -> Violation | None:
    rate = run.stats.acceptance_rate
    if rate is None:
        return Violation("identical draft", run.config, "no draft tokens were proposed, so nothing was verified")
    if rate >= minimum:
        return None
    pos = " ".join(f"{p:.2f}" for p in run.stats.per_position)
    msg = f"acceptance {rate:.1%} < {minimum:.0%} with the draft identical to the target (per position: {pos})"
    if one_draft_then_nothing(run.stats.per_position):
        msg += "; at most one draft accepted per step — the known vLLM CPU-build sampling-verification failure"
    zeros = sum(1 for ids in run.outputs for t in ids if t == 0)
    if zeros:
        msg += f"; token id 0 emitted {zeros}×"
    return Violation("identical draft", run.config, msg)


def judge_outputs(run: SanityRun) -> Violation | None:
    """First prompt and position where speculative ids differ from target-only ids."""
    if run.reference is None:
        return None
    if len(run.reference) != len(run.outputs):
        return Violation(
            "lossless greedy", run.config, f"{len(run.outputs)} outputs for {len(run.reference)} target-only outputs"
        )
    for i, (ref, got) in enumerate(zip(run.reference, run.outputs)):
        if ref != got:
            pos = next((j for j, (a, b) in enumerate(zip(ref, got)) if a != b), min(len(ref), len(got)))
            return Violation(
                "lossless greedy",
                run.config,
                f"prompt {i + 1}: speculative output differs from target-only at token {pos} "
                f"(target-only {ref[pos : pos + 3]}, speculative {got[pos : pos + 3]}; "
                f"lengths {len(ref)} vs {len(got)})",
            )
    return None


def judge(runs: Sequence[SanityRun], minimum: float = MIN_ACCEPTANCE) -> list[Violation]:
    """Every violation over all runs (empty: the backend passed)."""
    out = []
    for run in runs:
        if run.distribution is not None and not run.distribution.ok:
            out.append(
                Violation(
                    "same distribution",
                    run.config,
                    "speculative samples are not distributed as target-only samples: " + run.distribution.describe(),
                )
            )
        if run.check == "identical_draft":
            out.append(judge_acceptance(run, minimum))
        out.append(judge_outputs(run))
    return [v for v in out if v is not None]


# -- running it on real engines --------------------------------------------------------------------


def identical_draft_config(target: str, k: int, base: EngineConfig | None = None) -> EngineConfig:
    """draft_model speculation with the target as its own draft and sampled (not greedy) drafts."""
    base = base or EngineConfig(target=target)
    spec = {
        "method": "draft_model",
        "model": target,
        "num_speculative_tokens": k,
        "draft_sample_method": "probabilistic",
    }
    # speculative_config is passed whole: EngineConfig has no field for draft_sample_method.
    return base.model_copy(
        update={
            "target": target,
            "draft": target,
            "method": "draft_model",
            "num_speculative_tokens": k,
            "extra_engine_args": {**base.extra_engine_args, "speculative_config": spec},
        }
    )


def _ids(engine: SpecEngine, prompt: str, params: GenerationParams, stats: SpecStats | None) -> list[int]:
    events: list[Any] = []
    engine.generate(prompt, params, events.append)
    steps = [e for e in events if isinstance(e, SpecStep)]
    if stats is not None:
        for s in steps:
            stats.add_step(s)
    return [t.id for s in steps for t in s.tokens]


def run_sanity(
    base: EngineConfig,
    *,
    temperatures: Sequence[float] = (0.0, 1.0),
    seed: int = 1234,
    k: int = 4,
    prompts: Sequence[str] = SANITY_PROMPTS,
    max_tokens: int = 32,
    samples: int = DISTRIBUTION_SAMPLES,
    loader: Callable[[EngineConfig], SpecEngine] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[SanityRun]:
    """Run the checks for ``base.target`` (and ``base.draft`` when it is a different model)."""
    if loader is None:
        from specterm.engine import load_engine

        loader = load_engine
    say = progress or (lambda _msg: None)
    greedy = GenerationParams(max_tokens=max_tokens, temperature=0.0)
    target = base.target
    say("target-only reference")
    plain = {k: v for k, v in base.extra_engine_args.items() if k != "speculative_config"}
    real_draft = bool(base.draft and base.draft != target)
    sampled = [t for t in temperatures if t > 0] if real_draft and samples > 0 else []
    target_samples = {}
    with loader(base.model_copy(update={"method": None, "extra_engine_args": plain})) as engine:
        reference = [_ids(engine, p, greedy, None) for p in prompts]
        for temp in sampled:
            say(f"target-only samples T={temp:g}")
            target_samples[temp] = engine.sample_token_ids(
                DISTRIBUTION_PROMPT, n=samples, temperature=temp, max_tokens=DISTRIBUTION_POSITIONS, seed0=10_000_000
            )
    runs: list[SanityRun] = []
    say("identical draft")
    with loader(identical_draft_config(target, k, base)) as engine:
        for temp in temperatures:
            use_seed = seed if temp > 0 else None
            params = GenerationParams(max_tokens=max_tokens, temperature=temp, seed=use_seed)
            run = SanityRun(
                "identical_draft",
                _describe("draft_model", k, "= target", temp, use_seed, "sampled"),
                temp,
                reference=reference if temp == 0 else None,
            )
            run.outputs = [_ids(engine, p, params, run.stats) for p in prompts]
            runs.append(run)
            say(f"identical draft T={temp:g} done")
    if real_draft:
        say("real draft, greedy")
        cfg = base.model_copy(update={"method": "draft_model", "num_speculative_tokens": k})
        with loader(cfg) as engine:
            run = SanityRun(
                "lossless", _describe("draft_model", k, base.draft, 0.0, None, "greedy"), 0.0, reference=reference
            )
            run.outputs = [_ids(engine, p, greedy, run.stats) for p in prompts]
            runs.append(run)
            for temp in sampled:
                say(f"real draft, samples T={temp:g}")
                spec = engine.sample_token_ids(
                    DISTRIBUTION_PROMPT, n=samples, temperature=temp, max_tokens=DISTRIBUTION_POSITIONS, seed0=0
                )
                run = SanityRun(
                    "distribution",
                    _describe("draft_model", k, base.draft, temp, None, "greedy") + f", {samples} samples",
                    temp,
                )
                run.distribution = compare(
                    spec, target_samples[temp], temperature=temp, positions=DISTRIBUTION_POSITIONS
                )
                runs.append(run)
    return runs


def _describe(method: str, k: int, draft: str, temp: float, seed: int | None, drafting: str) -> str:
    seed_part = f", seed {seed}" if seed is not None else ""
    return f"{method} k={k}, draft {draft}, {drafting} drafts, T={temp:g}{seed_part}"


def doctor_check(temperatures: Sequence[float] = (0.0, 1.0)) -> dict[str, Any]:
    """``specterm doctor --deep``: the sanity check on the small pair (it checks the engine), as plain data."""
    import sys

    from specterm.models.defaults import ensure_small_models

    # stdout may be `doctor --json`: the one-time build notice goes to stderr.
    target, draft = ensure_small_models(log=lambda msg: print(msg, file=sys.stderr))
    runs = run_sanity(EngineConfig(target=str(target), draft=str(draft)), temperatures=temperatures)
    return {
        "temperatures": list(temperatures),
        "violations": [str(v) for v in judge(runs)],
        "runs": [
            {
                "check": r.check,
                "config": r.config,
                "acceptance_rate": r.stats.acceptance_rate,
                "per_position": r.stats.per_position,
                "lossless": None if r.reference is None else r.outputs == r.reference,
                "distribution": None if r.distribution is None else r.distribution.describe(),
            }
            for r in runs
        ],
    }
