"""Speculation under load: ``bench --concurrency 1,2,4,8``.

Terms (as ``runner.py``, plus):

* **level** — a concurrency: that many requests in flight on one engine at once, vLLM batching
  them into each step (``engine/batch.py``); a finished request's place goes to the next waiting.
* **run** — one level's requests on one configuration: ``max(len(prompts), 2 × level)`` requests
  cycling through the workload's prompts, so the batch stays full for most of the run.
* **output throughput** — every output token of the run ÷ the run's wall time (first request in to
  last out): what a server's operator pays for. Per-request latency and TTFT are each request's own.

Speculation trades spare compute for fewer memory-bound passes. A batch fills that spare compute
itself, and verification of k + 1 positions per request becomes compute-bound, so the speed-up falls
as the level rises; the **crossover** is the lowest level where speculative throughput drops below
target-only's. Each level runs target-only and speculative back to back (the order flips every
round) on two engines loaded side by side, so drift hits both.
"""

from __future__ import annotations

import datetime
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from specterm.bench.runner import GRAMMAR_SUFFIX, TARGET_ONLY, ConfigSpec, engine_config
from specterm.engine.base import EngineConfig, GenerationParams, SpecEngine
from specterm.engine.chat import Prompt
from specterm.errors import ConfigError
from specterm.events import SpecStep
from specterm.stats import SpecStats

Progress = Callable[[str, int], None]


@dataclass
class LevelRun:
    """One run: one configuration at one level, one round."""

    config: str
    level: int
    round: int
    wall_s: float
    tokens: int
    latencies_s: list[float]
    ttfts_s: list[float]
    stats: SpecStats = field(default_factory=SpecStats)
    reconciled: bool | None = None

    @property
    def throughput(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else 0.0


def _pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class LevelResult:
    """One configuration at one level over its rounds; ``ratio``: its throughput ÷ target-only's
    (median of the per-round ratios, rounds paired as they ran)."""

    config: str
    level: int
    throughput: float
    p50_s: float | None
    p95_s: float | None
    ttft_s: float | None
    acceptance: float | None
    mal: float | None
    ratio: float | None = None
    reconciled: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summarize(runs: Sequence[LevelRun]) -> list[LevelResult]:
    by: dict[tuple[str, int], list[LevelRun]] = {}
    for r in runs:
        by.setdefault((r.config, r.level), []).append(r)
    out = []
    for (config, level), rs in by.items():
        stats = SpecStats()
        for r in rs:
            stats.merge(r.stats)
        lat = [x for r in rs for x in r.latencies_s]
        ttft = [x for r in rs for x in r.ttfts_s]
        result = LevelResult(
            config,
            level,
            statistics.median(r.throughput for r in rs),
            _pct(lat, 0.5),
            _pct(lat, 0.95),
            _pct(ttft, 0.5),
            stats.acceptance_rate,
            stats.mean_acceptance_length,
            reconciled=None if rs[0].reconciled is None else all(r.reconciled for r in rs),
        )
        if config != TARGET_ONLY:
            base = {r.round: r for r in by.get((TARGET_ONLY, level), [])}
            ratios = [
                r.throughput / base[r.round].throughput for r in rs if r.round in base and base[r.round].throughput > 0
            ]
            result.ratio = statistics.median(ratios) if ratios else None
        out.append(result)
    return sorted(out, key=lambda r: (r.config != TARGET_ONLY, r.config, r.level))


def crossover(results: Sequence[LevelResult], config: str) -> int | None:
    """The lowest level from which ``config``'s throughput stays below target-only's; None if never."""
    levels = sorted((r.level, r.ratio) for r in results if r.config == config and r.ratio is not None)
    for i, (level, _) in enumerate(levels):
        if all(ratio < 1.0 for _, ratio in levels[i:]):
            return level
    return None


def verdict_line(results: Sequence[LevelResult], config: str) -> str:
    levels = sorted((r.level, r.ratio) for r in results if r.config == config and r.ratio is not None)
    if not levels:
        return f"{config}: no paired runs"
    at = crossover(results, config)
    ratios = ", ".join(f"{ratio:.2f}× at {level}" for level, ratio in levels)
    if at is None:
        return f"{config} pays at every level measured ({ratios})"
    if at == levels[0][0]:
        return f"{config} never pays here: slower than target-only from concurrency {at} ({ratios})"
    last_paid = max(level for level, ratio in levels if level < at and ratio >= 1.0)
    return (
        f"{config} stops paying at concurrency {at}: keep it on up to {last_paid} in flight, off from {at} ({ratios})"
    )


def recommend_per_load(results: Sequence[LevelResult], base: EngineConfig):
    """``--recommend`` with ``--concurrency``: the best configuration at each level by throughput ratio
    (none where nothing beats target-only), the level from which speculation should be off, and for
    the config file the winner at the lowest level measured, saying that level."""
    from specterm.bench.recommend import NO_SPECULATION, Recommendation

    levels = sorted({r.level for r in results})
    best: dict[int, LevelResult | None] = {}
    for level in levels:
        paid = [r for r in results if r.level == level and " k=" in r.config and (r.ratio or 0) > 1.0]
        best[level] = max(paid, key=lambda r: r.ratio or 0.0, default=None)
    off_from = next((lv for i, lv in enumerate(levels) if all(best[x] is None for x in levels[i:])), None)
    first = best[levels[0]]
    label = first.config if first is not None else NO_SPECULATION
    method, _, k = label.partition(" k=")
    target_only = next((r.throughput for r in results if r.level == levels[0] and r.config == TARGET_ONLY), None)
    common = dict(
        target=base.target,
        workloads=["load"],
        concurrency=levels[0],
        candidates={r.config: round(r.ratio, 3) for r in results if r.level == levels[0] and r.ratio is not None},
        per_load={str(lv): (b.config if b is not None else NO_SPECULATION) for lv, b in best.items()},
        speculation_off_from=off_from,
        target_only_tok_s=round(target_only, 2) if target_only else None,
        measured=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    )
    if first is None:
        return Recommendation(method=NO_SPECULATION, k=0, speedup=1.0, draft=None, **common)
    if method == "draft_model" and any(GRAMMAR_SUFFIX in r.config for r in results):
        common["grammar_drafting"] = False  # plain beat grammar drafting (its label is split by Recommendation)
    return Recommendation(
        method=method,
        k=int(k),
        speedup=round(first.ratio or 1.0, 3),
        draft=base.draft if method.startswith("draft_model") else None,
        **common,
    )


class LoadSweep:
    """Runs the levels for each speculative configuration against target-only."""

    def __init__(
        self,
        base: EngineConfig,
        prompts: Sequence[Prompt],
        specs: Sequence[ConfigSpec],
        levels: Sequence[int],
        *,
        params: GenerationParams,
        repeats: int = 1,
        loader: Callable[[EngineConfig], SpecEngine] | None = None,
        request_params: Sequence[GenerationParams] | None = None,
    ) -> None:
        if not prompts:
            raise ConfigError("the workload has no prompts")
        if not levels or any(c < 1 for c in levels):
            raise ConfigError("bad --concurrency: each level must be >= 1")
        self.base, self.prompts, self.specs = base, list(prompts), list(specs)
        self.levels, self.params, self.repeats = sorted(set(levels)), params, repeats
        self.request_params = list(request_params or [params] * len(self.prompts))
        """Each prompt's own parameters (``bench --requests``), else ``params`` for all."""
        if loader is None:
            from specterm.engine import load_engine

            loader = load_engine
        self.loader = loader
        self.runs: list[LevelRun] = []
        self.max_num_seqs: int | None = None
        """The engine's ``max_num_seqs`` (where a measured schedule ends); known once ``run`` loaded it."""

    def requests_at(self, level: int) -> int:
        return max(len(self.prompts), 2 * level)

    @property
    def total_runs(self) -> int:
        return len(self.specs) * len(self.levels) * self.repeats * 2

    def check_capacity(self, engine: SpecEngine) -> None:
        """A level the KV cache cannot hold at once is one line, before any run: how many fit."""
        from specterm.engine.batch import kv_capacity

        longest = max(len(engine.renderer.ids(p)) + q.max_tokens for p, q in zip(self.prompts, self.request_params))
        fits = kv_capacity(engine, longest)
        if fits is not None and (top := max(self.levels)) > fits:
            raise ConfigError(
                f"concurrency {top} does not fit the KV cache: {fits} requests of up to {longest} "
                f"tokens fit at once (fewer levels, a shorter --max-tokens, or more KV cache)"
            )

    def run(self, progress: Progress = lambda _d, _n: None) -> list[LevelRun]:
        target = self.loader(engine_config(self.base, ConfigSpec(None)))
        self.max_num_seqs = getattr(target, "max_num_seqs", None)
        try:
            self.check_capacity(target)
            self._warm(target)
            for spec in self.specs:
                engine = self.loader(engine_config(self.base, spec))
                try:
                    self._warm(engine)
                    for level in self.levels:
                        for rnd in range(self.repeats):
                            pair = [(TARGET_ONLY, target), (spec.label, engine)]
                            for label, eng in pair if rnd % 2 == 0 else pair[::-1]:
                                progress(f"{label} · concurrency {level} · round {rnd + 1}", 1)
                                self.runs.append(self._one(eng, label, level, rnd))
                finally:
                    engine.close()
        finally:
            target.close()
        return self.runs

    def _warm(self, engine: SpecEngine) -> None:
        """A first batch pays one-off costs (allocations, kernel selection): not measured."""
        from specterm.engine.batch import BatchItem

        warm = self.params.model_copy(update={"max_tokens": 4, "json_schema": None})
        engine.generate_concurrent(
            [BatchItem(p, warm, f"warm{i}") for i, p in enumerate(self.prompts[:2])], lambda _e: None, concurrency=2
        )

    def _one(self, engine: SpecEngine, label: str, level: int, rnd: int) -> LevelRun:
        from specterm.engine.batch import BatchItem

        engine.reset_prefix_cache()  # each run starts cold, whichever ran before it
        n = self.requests_at(level)
        m = len(self.prompts)
        items = [BatchItem(self.prompts[i % m], self.request_params[i % m], f"l{level}r{rnd}-{i}") for i in range(n)]
        stats = SpecStats()

        def sink(event: Any) -> None:
            if isinstance(event, SpecStep):
                stats.add_step(event)

        result = engine.generate_concurrent(items, sink, concurrency=level)
        return LevelRun(
            label,
            level,
            rnd,
            result.wall_s,
            sum(f.output_tokens for f in result.finished),
            [f.wall_s for f in result.finished],
            [f.ttft_s for f in result.finished if f.ttft_s is not None],
            stats,
            None if result.counters is None else bool(result.counters["matched"]),
        )
