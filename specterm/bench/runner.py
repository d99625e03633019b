"""Drive the engines for a benchmark: every configuration through the same ``SpecEngine`` code.

Terms:

* **configuration** — target-only, or one speculative method at one k (``ConfigSpec``).
* **block** — one speculative configuration measured together with the target-only engine: both
  engines stay loaded and the requests alternate A B A B (the order flips every prompt) so machine
  drift (other processes, thermal state) hits both equally. Only two or three small engines are
  alive at a time; each vLLM CPU engine reserves about 1 GiB of KV cache.
* **round** — one pass of the workload within a block (``--repeats`` rounds per block). Speed-ups
  are computed per round from paired runs, then summarised (median, min–max) over rounds.
* **draft timing block** — the draft model loaded *as a target-only engine* and interleaved with
  the target: its step time ÷ the target's step time is the draft cost ratio c (``results.py``).

A request's *decode* part is everything after its first emitted token (the first engine step is the
prefill); decode tokens/s and step times use only that part, so prompt length does not skew them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from specterm.engine.base import EngineConfig, GenerationParams, SpecEngine
from specterm.engine.chat import Prompt
from specterm.events import RequestFinished, RequestStarted, SpecStep
from specterm.stats import SpecStats

TARGET_ONLY = "target-only"
DRAFT_AS_TARGET = "draft-as-target"
METHODS = ("draft_model", "draft_model+grammar", "ngram", "suffix")
GRAMMAR_SUFFIX = "+grammar"


@dataclass(frozen=True)
class ConfigSpec:
    """One configuration: ``method=None`` is target-only."""

    method: str | None
    k: int = 0
    grammar: bool = False
    """Grammar drafting (``engine/grammar_draft.py``); bench's method name ``draft_model+grammar``."""
    schedule: tuple[tuple[int, int, int], ...] | None = None
    """A batch-size schedule (``--spec-schedule``, under ``--concurrency``), k at most ``k``."""

    @property
    def name(self) -> str | None:
        return f"{self.method}{GRAMMAR_SUFFIX}" if self.grammar else self.method

    @property
    def label(self) -> str:
        if self.method is None:
            return TARGET_ONLY
        return f"{self.name} schedule" if self.schedule else f"{self.name} k={self.k}"


@dataclass
class RequestRecord:
    """What one request measured; plain numbers so aggregation is testable without an engine."""

    config: str
    block: str
    round: int
    prompt: int
    tokens: int
    first_step_tokens: int
    steps: int
    wall_s: float
    ttft_s: float | None
    decode_step_s: list[float] = field(default_factory=list)
    """Wall time of every engine step after the first (the prefill step)."""
    stats: SpecStats = field(default_factory=SpecStats)
    token_ids: list[int] = field(default_factory=list)
    text: str = ""
    workload: str = ""

    @property
    def decode_tokens(self) -> int:
        return self.tokens - self.first_step_tokens

    step_cached: list[tuple[int, int | None]] = field(default_factory=list)
    """(prompt tokens, of which found in vLLM's prefix cache) per engine request, as ``step_ttft_s``."""
    step_ttft_s: list[float | None] = field(default_factory=list)
    """TTFT of each engine request of the unit in order: agent step 1, 2, ... (one for a plain request).
    Steps 2+ resend step 1's prompt plus a few dozen tokens, so with prefix caching they should cost
    a fraction of step 1."""

    @property
    def prefill_s(self) -> float:
        """Sum of the TTFTs of the unit's engine requests (``ttft_s`` for a record built without them)."""
        if self.step_ttft_s:
            return sum(t for t in self.step_ttft_s if t is not None)
        return self.ttft_s or 0.0

    @property
    def decode_s(self) -> float:
        return max(self.wall_s - self.prefill_s, 0.0)


def record_from_events(
    events: Sequence[Any], *, config: str, block: str, round: int, prompt: int, workload: str = ""
) -> RequestRecord:
    """Fold one measured unit's events into a ``RequestRecord`` (stats via ``specterm.stats``).

    A unit is one engine request, or one agent turn made of several: then tokens and steps add up,
    ``wall_s`` and the decode time sum over the engine requests (tool time excluded), and TTFT is
    the first request's."""
    steps = [e for e in events if isinstance(e, SpecStep)]
    finished = [e for e in events if isinstance(e, RequestFinished)]
    if not finished:
        raise ValueError("request produced no request_finished event")
    stats = SpecStats()
    for step in steps:
        stats.add_step(step)
    # Each engine request's first emitting step is its prefill; steps that emitted nothing (a
    # partial prefill chunk) are not decode steps either.
    first: dict[str, SpecStep] = {}
    decode_steps = []
    for s in steps:
        if not s.tokens:
            continue
        if s.request_id in first:
            decode_steps.append(s.wall_s)
        else:
            first[s.request_id] = s
    prompts = [e.prompt_tokens for e in events if isinstance(e, RequestStarted)]
    wall = sum(f.wall_s for f in finished)
    return RequestRecord(
        config=config,
        block=block,
        round=round,
        prompt=prompt,
        tokens=stats.tokens,
        first_step_tokens=sum(len(s.tokens) for s in first.values()),
        steps=len(steps),
        wall_s=wall,
        ttft_s=finished[0].ttft_s,
        decode_step_s=decode_steps,
        stats=stats,
        token_ids=[t.id for s in steps for t in s.tokens],
        text="".join(f.text for f in finished),
        workload=workload,
        step_ttft_s=[f.ttft_s for f in finished],
        step_cached=[(p, f.cached_tokens) for p, f in zip(prompts, finished)],
    )


def engine_config(base: EngineConfig, spec: ConfigSpec) -> EngineConfig:
    # A fixed k is measured as that k: a batch-size schedule given to the bench is not applied to it.
    if spec.method is None:
        return base.model_copy(update={"method": None, "spec_schedule": None})
    return base.model_copy(
        update={
            "method": spec.method,
            "num_speculative_tokens": spec.k,
            "grammar_drafting": spec.grammar,
            "spec_schedule": None if spec.schedule is None else [list(r) for r in spec.schedule],
        }
    )


def spec_of(method: str, k: int, grammar: bool = False) -> ConfigSpec:
    """``draft_model+grammar`` is ``draft_model`` with grammar drafting, ``draft_model`` without (vLLM's
    own drafting, so the two compare) unless ``grammar`` (``--grammar-drafting`` given)."""
    if method.endswith(GRAMMAR_SUFFIX):
        return ConfigSpec(method.removesuffix(GRAMMAR_SUFFIX), k, True)
    return ConfigSpec(method, k, grammar and method == "draft_model")


def plan(methods: Iterable[str], ks: Iterable[int], *, grammar: bool = False) -> list[ConfigSpec]:
    return list(dict.fromkeys(spec_of(m, k, grammar) for m in methods for k in ks))


Progress = Callable[[str, int], None]
"""``progress(description, advance)``: advance 1 after every measured request, 0 while loading."""

Loader = Callable[[EngineConfig], SpecEngine]


class BenchRunner:
    """Runs the blocks. ``loader`` builds an engine (``specterm.engine.load_engine`` by default);
    tests may pass another."""

    def __init__(
        self,
        base: EngineConfig,
        workloads: dict[str, Sequence[Prompt]],
        specs: Sequence[ConfigSpec],
        *,
        repeats: int = 3,
        params: GenerationParams | None = None,
        loader: Loader | None = None,
        time_draft: bool = True,
        warmup: bool = True,
        agent: str = "sql_analyst",
        suffix_cold: bool = False,
        request_params: dict[str, Sequence[GenerationParams]] | None = None,
    ) -> None:
        if repeats < 1:
            raise ValueError("repeats must be >= 1")
        # (workload, prompt) pairs: every workload runs in the same blocks, so engines load once.
        self.prompts = [(name, p) for name, prompts in workloads.items() for p in prompts]
        if not self.prompts:
            raise ValueError("no prompts to run")
        self.base, self.specs = base, list(specs)
        self.repeats, self.params = repeats, params or GenerationParams(max_tokens=64)
        # each prompt's own parameters where a workload brings them (bench --requests), else ``params``
        own = request_params or {}
        self._params = [
            p for name, prompts in workloads.items() for p in (own.get(name) or [self.params] * len(prompts))
        ]
        self.time_draft = time_draft and base.draft is not None and any(s.method == "draft_model" for s in specs)
        self.warmup = warmup
        self.suffix_cold = suffix_cold
        """Reset suffix decoding's tree before every measured unit (else it learns across them)."""
        self.agent_name = agent
        self._agent_def: Any = None
        if loader is None:
            from specterm.engine import load_engine

            loader = load_engine
        self._load = loader
        self.records: list[RequestRecord] = []
        self.load_s: dict[str, float] = {}

    @property
    def blocks(self) -> int:
        return len(self.specs) + (1 if self.time_draft else 0)

    @property
    def total_requests(self) -> int:
        """Measured requests (two per prompt per round per block); the progress bar's total."""
        return self.blocks * self.repeats * len(self.prompts) * 2

    def _engine(self, label: str, config: EngineConfig, progress: Progress | None) -> SpecEngine:
        if progress:
            progress(f"loading {label}", 0)
        t0 = time.perf_counter()
        engine = self._load(config)
        self.load_s[label] = time.perf_counter() - t0
        if self.warmup:
            # The first request of an engine pays one-off costs (allocator, caches): not measured.
            engine.generate(self.prompts[0][1], self.params.model_copy(update={"max_tokens": 4}), lambda e: None)
            # ... and teaches nothing: suffix decoding's first measured unit meets an empty tree.
            engine.reset_suffix_cache()
        return engine

    def run(self, progress: Progress | None = None) -> list[RequestRecord]:
        target = self._engine(TARGET_ONLY, engine_config(self.base, ConfigSpec(None)), progress)
        try:
            if self.time_draft:
                draft_cfg = self.base.model_copy(update={"target": self.base.draft, "method": None})
                self._block(target, DRAFT_AS_TARGET, draft_cfg, progress)
            for spec in self.specs:
                self._block(target, spec.label, engine_config(self.base, spec), progress)
        finally:
            target.close()
        return self.records

    def _block(self, target: SpecEngine, label: str, config: EngineConfig, progress: Progress | None) -> None:
        other = self._engine(label, config, progress)
        try:
            for rnd in range(self.repeats):
                for i, (workload, prompt) in enumerate(self.prompts):
                    pair = [(TARGET_ONLY, target), (label, other)]
                    if (rnd + i) % 2:
                        pair.reverse()  # A B, then B A (and swapped next round): neither side always runs first
                    for name, engine in pair:
                        # Every measured unit starts from a cold prefix cache. The target-only engine
                        # lives through every block and has seen each prompt before, a speculative one
                        # has not: left warm, target-only TTFT and wall time would win by cache hits
                        # alone (measured on the Qwen pair: 0.9 s vs 4.9 s TTFT). Within an agent turn
                        # the steps still reuse their own prefix, as for a user's new question.
                        engine.reset_prefix_cache()
                        # Suffix decoding's tree is *not* reset by default: learning from earlier
                        # turns is its point. Units run in order, so unit n has seen n - 1 before it
                        # (results.speedup_by_turn); --suffix-cold measures every unit on an empty tree.
                        if self.suffix_cold:
                            engine.reset_suffix_cache()
                        self.records.append(self._one(engine, prompt, name, label, rnd, i, workload))
                        if progress:
                            progress(f"{label}: round {rnd + 1}/{self.repeats}", 1)
        finally:
            other.close()

    def _one(
        self, engine: SpecEngine, prompt: Prompt, config: str, block: str, rnd: int, i: int, workload: str
    ) -> RequestRecord:
        events: list[Any] = []
        if workload == "agent":
            from specterm.agent import AgentRunner, load_agent

            if self._agent_def is None:
                self._agent_def = load_agent(self.agent_name)
            AgentRunner(self._agent_def, engine, temperature=self.params.temperature).run(prompt, events.append)
        else:
            engine.generate(prompt, self._params[i], events.append)
        return record_from_events(events, config=config, block=block, round=rnd, prompt=i, workload=workload)
