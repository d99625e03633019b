"""``specterm compare``'s engine side: two speculative configurations, one request, one session.

How it is fair (also in ``specterm compare --help`` and the README): a speculative configuration is
fixed when a vLLM engine is built, so each side is its own engine, both built in this process before
anything is measured; each gets one unmeasured warm-up request (allocator, caches, first-call costs);
then the rounds alternate A B, B A, A B … so neither side always runs first, and every measured run
starts from a cold prefix cache (as ``specterm bench`` does: from round 2 on, each engine would
otherwise find its own previous run's prompt cached, and a side's TTFT would depend on how many
rounds it had). Both sides share one session clock, so wall times are comparable and the recording
replays in order.

Every event of a side is tagged with its lane (``a``/``b``, ``BaseEvent.lane``) before it reaches the
sink (recorder, headless tally, split view); ``compare_tally.CompareTally`` turns them into figures.
"""

from __future__ import annotations

import platform
import socket
from collections.abc import Callable
from typing import Any

from specterm.bench.compare_tally import LANES, CompareTally
from specterm.engine.base import EngineConfig, GenerationParams, SessionClock
from specterm.errors import ConfigError
from specterm.events import BaseEvent, SessionEnded, SessionStarted, Sink, UserMessage

Loader = Callable[[EngineConfig, SessionClock], Any]

SIDE_KEYS = {
    "method": "method",
    "k": "num_speculative_tokens",
    "target": "target",
    "draft": "draft",
    "dtype": "dtype",
    "schedule": "spec_schedule",
}
"""``schedule=FILE`` (a JSON file: the list's commas would split the SPEC) or ``schedule=none``."""
FAIRNESS = (
    "each side is its own engine, both loaded first; one unmeasured warm-up request each; rounds "
    "alternate A B, B A, …; every measured run starts from a cold prefix cache; one shared clock"
)


def parse_side(text: str, flag: str) -> dict[str, Any]:
    """``method=draft_model,k=4[,target=DIR][,draft=DIR][,dtype=bfloat16]``; ``method=none`` is
    target-only. One line naming the flag for anything else."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ConfigError(f"bad {flag} {text!r}: expected key=value pairs, e.g. method=ngram,k=6")
        if key not in SIDE_KEYS:
            raise ConfigError(f"bad {flag}: unknown key {key!r} (known: {', '.join(SIDE_KEYS)})")
        if key == "k":
            try:
                value = int(value)
            except ValueError:
                raise ConfigError(f"bad {flag}: k must be an integer, not {value!r}") from None
        if key in ("method", "schedule") and value in ("none", "off", "target-only"):
            value = None
        out[SIDE_KEYS[key]] = value
    return out


def side_config(base: EngineConfig, overrides: dict[str, Any], flag: str) -> EngineConfig:
    from pydantic import ValidationError

    from specterm.errors import first_error

    try:
        merged = base.model_dump() | overrides
        if merged["method"] is None and "spec_schedule" not in overrides:
            merged["spec_schedule"] = None  # target-only has no k to schedule
        return EngineConfig.model_validate(merged)
    except ValidationError as err:
        loc, msg = first_error(err)
        raise ConfigError(f"bad {flag}: {loc[0] if loc else ''}: {msg}") from None


def side_label(config: EngineConfig) -> str:
    if config.method is None:
        return "target-only"
    if config.spec_schedule:
        return f"{config.method} schedule {[list(r) for r in config.spec_schedule]}"
    return f"{config.method} k={config.num_speculative_tokens}"


def check_sides(a: EngineConfig, b: EngineConfig) -> None:
    """Before any engine loads: both targets exist, then they share one tokenizer (outputs are
    compared token id by token id), then each side's own checks (its draft and the draft's tokenizer)."""
    from specterm.engine.checks import check_model_dir, check_same_tokenizer
    from specterm.engine.vllm_engine import validate_config

    for lane, config in zip(LANES, (a, b)):
        check_model_dir(config.target, f"side {lane.upper()}'s target")
    if a.target != b.target:  # a hub id is checked by vLLM when it loads
        check_same_tokenizer(
            a.target,
            b.target,
            what="the two sides",
            names=("A", "B"),
            why=f"compare checks their outputs token by token (A: {a.target}; B: {b.target})",
        )
    for config in (a, b):
        validate_config(config)


def compare_header(
    a: EngineConfig, b: EngineConfig, *, rounds: int, params: GenerationParams, request: dict[str, Any]
) -> SessionStarted:
    """The session's first event: both configurations, the request and how the run was made fair;
    ``compare_tally.is_compare`` recognises it, so ``specterm replay`` opens the split view."""
    from specterm import __version__

    a, b = a.as_recorded(), b.as_recorded()
    labels = {"a": side_label(a), "b": side_label(b)}
    if labels["a"] == labels["b"]:
        labels = {lane: f"{labels[lane]} ({cfg.draft or cfg.target})" for lane, cfg in zip(LANES, (a, b))}
    return SessionStarted(
        specterm_version=__version__,
        config={
            "compare": {
                "a": a.model_dump(),
                "b": b.model_dump(),
                "labels": labels,
                "rounds": rounds,
                "order": "".join(lane.upper() for lane in order(rounds)),
                "temperature": params.temperature,
                "max_tokens": params.max_tokens,
                "fairness": FAIRNESS,
                **request,
            }
        },
        models={"a": a.models_summary(), "b": b.models_summary(), "target": a.target},
        agent=request.get("agent"),
        host=f"{socket.gethostname()} ({platform.system()} {platform.machine()}, Python {platform.python_version()})",
    )


def order(rounds: int) -> list[str]:
    """A B, B A, A B …: round r runs A first when r is even."""
    out: list[str] = []
    for r in range(rounds):
        out += ["a", "b"] if r % 2 == 0 else ["b", "a"]
    return out


def tagged(sink: Sink, lane: str) -> Sink:
    return lambda event: sink(event.model_copy(update={"lane": lane}))


class CompareRun:
    """Loads both sides and runs the request ``rounds`` times on each, alternating.

    ``request`` is a user message (``ChatPrompt`` rendering, ``raw`` for plain text) or, with
    ``agent``, a question for that agent. ``loader(config, clock)`` builds an engine
    (``specterm.engine.load_engine`` by default)."""

    def __init__(
        self,
        a: EngineConfig,
        b: EngineConfig,
        text: str,
        *,
        params: GenerationParams,
        rounds: int = 1,
        agent: Any = None,
        raw: bool = False,
        clock: SessionClock | None = None,
        loader: Loader | None = None,
    ) -> None:
        if rounds < 1:
            raise ConfigError("--rounds must be at least 1")
        self.configs = {"a": a, "b": b}
        self.text, self.params, self.rounds = text, params, rounds
        self.agent, self.raw = agent, raw
        self.clock = clock or SessionClock()
        if loader is None:
            from specterm.engine import load_engine

            loader = lambda config, clock: load_engine(config, clock=clock)  # noqa: E731
        self._load = loader
        self.engines: dict[str, Any] = {}

    def load(self, progress: Callable[[str], None] | None = None) -> None:
        """Build both engines and warm each up (one short request, not emitted anywhere)."""
        for lane in LANES:
            if progress:
                progress(f"loading {lane.upper()} ({side_label(self.configs[lane])})")
            engine = self.engines[lane] = self._load(self.configs[lane], self.clock)
            self._one(engine, lambda e: None, f"warmup-{lane}", warmup=True)

    def run(self, sink: Sink, header: SessionStarted, cancel: Any = None) -> CompareTally:
        """Load (if needed), then the measured rounds; events go to ``sink`` tagged with their lane."""
        if not self.engines:
            self.load()
        tally = CompareTally(header)

        def both(event: BaseEvent) -> None:
            tally.add(event)
            sink(event)

        for i, lane in enumerate(order(self.rounds)):
            if cancel is not None and cancel.is_set():
                break
            engine = self.engines[lane]
            engine.reset_prefix_cache()
            self._one(engine, tagged(both, lane), f"{lane}{i // 2 + 1}", cancel=cancel)
        tally.close()
        sink(SessionEnded(t=self.clock(), reason="cancelled" if cancel is not None and cancel.is_set() else "done"))
        return tally

    def _one(self, engine: Any, sink: Sink, rid: str, *, warmup: bool = False, cancel: Any = None) -> None:
        if warmup:  # raw text: every model completes it, with or without a chat template
            engine.generate(self.text, self.params.model_copy(update={"max_tokens": 4}), sink)
            return
        if self.agent is not None:
            from specterm.agent import AgentRunner

            AgentRunner(self.agent, engine, temperature=self.params.temperature, clock=self.clock).run(
                self.text, sink, request_id=rid, cancel=cancel
            )
            return
        from specterm.engine.chat import ChatPrompt

        sink(UserMessage(t=self.clock(), request_id=rid, text=self.text))
        prompt = self.text if self.raw else ChatPrompt.user(self.text)
        engine.generate(prompt, self.params, sink, request_id=rid, cancel=cancel)

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()
        self.engines.clear()
