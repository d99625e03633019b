"""Where an agent turn's time goes, per agent step, speculative vs target-only in one run.

Usage (defaults: the configured pair, ``sql_analyst``, the agent workload's requests, 1 round)::

    python benchmarks/agent_phases.py [engine flags as for `specterm run`] [--agent NAME]
        [--question TEXT ...] [--rounds N]
    python benchmarks/agent_phases.py --target ~/.cache/specterm/models/qwen-pair/target \\
        --draft ~/.cache/specterm/models/qwen-pair/draft --dtype bfloat16

Both engines live in this process; each question runs on both (order alternating), each from a cold
prefix cache, as ``specterm bench`` does. Every phase is timed with ``perf_counter`` wrappers around
the vLLM functions that do the work (the engine runs in this thread: ``VLLM_ENABLE_V1_MULTIPROCESSING=0``):

* ``retrieve``, ``tool``      — the agent loop's own step latencies (``agent_step_finished`` events)
* ``prompt``                  — generation step latency minus the engine request's wall time: chat
                                template rendering and token counting in ``AgentRunner.fit_prompt``
* ``grammar``                 — ``StructuredOutputManager._create_grammar`` (compiling the call schema)
* ``mask``                    — ``grammar_bitmask`` + ``validate_tokens`` (the grammar's per-step work)
* ``tgt prefill``/``tgt decode`` — ``GPUModelRunner._model_forward`` (the target's forward pass), split
                                by whether the step carries more than k + 1 tokens (a prompt chunk)
* ``draft prefill``/``draft``  — ``propose_draft_token_ids`` on those same two kinds of step: on the
                                prompt step the draft model runs over the whole prompt
* ``other``                   — the rest of ``LLMEngine.step`` (scheduling, input preparation,
                                sampling, output processing, specterm's hook)

Seconds are per agent step, summed over questions and rounds; the last table divides speculative by
target-only per phase. Wrappers add ~1 µs per call; read ratios, not absolute milliseconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PHASES = (
    "retrieve",
    "prompt",
    "grammar",
    "mask",
    "tgt prefill",
    "draft prefill",
    "tgt decode",
    "draft",
    "other",
    "tool",
)


class Clock:
    """Accumulates seconds per (agent step, phase) for the engine currently measured."""

    def __init__(self) -> None:
        self.step = 0  # the agent step (1-based generation index) the engine is serving now
        self.k = 0
        self.prefill_step = False
        self.totals: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.depth = 0  # nesting: inner timed parts are subtracted from ``other``

    def add(self, phase: str, seconds: float) -> None:
        self.totals[self.step][phase] += seconds


CLOCK = Clock()


def _wrap(cls: type, name: str, phase_of) -> None:
    """Replace ``cls.name`` with a timed version; ``phase_of(self, args)`` names the phase."""
    original = getattr(cls, name)

    def timed(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            phase = phase_of(self, args)
            if phase:
                CLOCK.add(phase, time.perf_counter() - t0)

    setattr(cls, name, timed)


def install_timers() -> None:
    from vllm.v1.engine.llm_engine import LLMEngine
    from vllm.v1.structured_output import StructuredOutputManager
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    original_execute = GPUModelRunner.execute_model

    def execute_model(self, scheduler_output, *args, **kwargs):
        # A decode step schedules at most k + 1 tokens per request; more means a prompt (chunk).
        per_request = scheduler_output.num_scheduled_tokens.values()
        CLOCK.prefill_step = any(n > CLOCK.k + 1 for n in per_request)
        return original_execute(self, scheduler_output, *args, **kwargs)

    GPUModelRunner.execute_model = execute_model
    _wrap(GPUModelRunner, "_model_forward", lambda s, a: "tgt prefill" if CLOCK.prefill_step else "tgt decode")
    _wrap(GPUModelRunner, "propose_draft_token_ids", lambda s, a: "draft prefill" if CLOCK.prefill_step else "draft")
    _wrap(StructuredOutputManager, "_create_grammar", lambda s, a: "grammar")
    _wrap(StructuredOutputManager, "grammar_bitmask", lambda s, a: "mask")
    _wrap(StructuredOutputManager, "validate_tokens", lambda s, a: "mask")
    _wrap(LLMEngine, "step", lambda s, a: "engine step")


@contextmanager
def measuring(k: int):
    CLOCK.totals.clear()
    CLOCK.k = k
    yield CLOCK.totals


def run_turn(engine, agent, question: str, totals) -> float:
    """One agent turn; returns its wall time and folds the agent loop's own phases into ``totals``."""
    from specterm.agent import AgentRunner

    events: list = []
    request_wall: dict[str, float] = {}

    def sink(e) -> None:
        events.append(e)
        if e.type == "request_started":
            CLOCK.step += 1
            totals[CLOCK.step]["requests"] += 1
            totals[CLOCK.step]["prompt tokens"] += e.prompt_tokens
        elif e.type == "request_finished":
            request_wall[e.request_id] = e.wall_s
            totals[CLOCK.step]["ttft"] += e.ttft_s or 0.0
            totals[CLOCK.step]["cached tokens"] += e.cached_tokens or 0

    CLOCK.step = 0
    engine.reset_prefix_cache()
    t0 = time.perf_counter()
    AgentRunner(agent, engine).run(question, sink)
    wall = time.perf_counter() - t0
    gen = 0
    for e in events:
        if e.type != "agent_step_finished":
            continue
        if e.kind == "retrieve":
            totals[1]["retrieve"] += e.latency_s
        elif e.kind == "tool":
            totals[gen]["tool"] += e.latency_s
        elif e.kind in ("tool_call", "answer"):
            gen += 1
            engine_wall = request_wall.get(f"{e.request_id}-{e.step}", 0.0)
            totals[gen]["prompt"] += max(0.0, e.latency_s - engine_wall)
    totals[0]["turn wall"] += wall
    return wall


def finish(totals) -> dict[int, dict[str, float]]:
    """``engine step`` minus the timed parts inside it → ``other``."""
    out: dict[int, dict[str, float]] = {}
    for step, phases in totals.items():
        row = dict(phases)
        inner = sum(row.get(p, 0.0) for p in ("tgt prefill", "draft prefill", "tgt decode", "draft", "mask"))
        row["other"] = max(0.0, row.pop("engine step", 0.0) - inner)
        out[step] = row
    return out


def print_tables(results: dict[str, dict[int, dict[str, float]]]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    steps = sorted({s for r in results.values() for s in r if s > 0})
    for label, rows in results.items():
        # Phases are rows and agent steps columns, so the table fits an 80-column terminal.
        table = Table(title=f"{label}: seconds per phase and agent step (summed over questions × rounds)")
        table.add_column("phase")
        for s in steps:
            table.add_column(f"step {s}", justify="right")
        table.add_column("all", justify="right", style="bold")
        total = {
            p: sum(rows.get(s, {}).get(p, 0.0) for s in steps)
            for p in (*PHASES, "ttft", "prompt tokens", "cached tokens", "requests")
        }
        cols = [rows.get(s, {}) for s in steps] + [total]
        for p in PHASES:
            table.add_row(p, *(f"{c.get(p, 0.0):.2f}" for c in cols))
        table.add_row("sum", *(f"{sum(c.get(p, 0.0) for p in PHASES):.2f}" for c in cols), end_section=True)
        table.add_row("ttft", *(f"{c.get('ttft', 0.0):.2f}" for c in cols))
        table.add_row(
            "prompt cached",
            *(
                f"{c.get('cached tokens', 0.0) / c['prompt tokens']:.0%}" if c.get("prompt tokens") else "–"
                for c in cols
            ),
        )
        table.add_row("requests", *(f"{c.get('requests', 0.0):.0f}" for c in cols))
        console.print(table)
        mean = {s: rows[s]["ttft"] / rows[s]["requests"] for s in steps if rows.get(s, {}).get("requests")}
        if len(mean) > 1 and mean.get(1):
            later = ", ".join(f"step {s} {mean[s] / mean[1]:.0%}" for s in steps if s > 1 and s in mean)
            console.print(f"  mean TTFT ÷ step 1's: {later}")
        console.print(f"  measured turn wall time: {rows.get(0, {}).get('turn wall', 0.0):.2f} s")
    if len(results) == 2:
        (a, ra), (b, rb) = results.items()
        table = Table(title=f"{b} ÷ {a}, per phase over all steps (and its share of {a}'s turn)")
        table.add_column("phase")
        table.add_column(a, justify="right")
        table.add_column(b, justify="right")
        table.add_column("ratio", justify="right")
        table.add_column(f"share of {a}", justify="right")
        wall_a = ra.get(0, {}).get("turn wall", 0.0)
        for p in (*PHASES, "ttft", "turn wall"):
            sa = sum(r.get(p, 0.0) for r in ra.values())
            sb = sum(r.get(p, 0.0) for r in rb.values())
            table.add_row(
                p, f"{sa:.2f}", f"{sb:.2f}", f"{sb / sa:.2f}" if sa else "–", f"{sa / wall_a:.0%}" if wall_a else "–"
            )
        console.print(table)


def main(argv: list[str] | None = None) -> int:
    from specterm.cli.common import add_engine_args, engine_config_from_args

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_engine_args(p)
    p.add_argument("--agent", default="sql_analyst")
    p.add_argument("--question", action="append", help="a user request (repeatable; default: the agent workload's)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument(
        "--block-size",
        type=int,
        help="vLLM KV-cache block size (prefix-cache granularity; specterm's CPU default 32, vLLM's own 128)",
    )
    args = p.parse_args(argv)

    from specterm.agent import load_agent
    from specterm.bench.workloads import builtin_prompts
    from specterm.engine import load_engine

    config = engine_config_from_args(args)
    if config.method is None:
        config = config.model_copy(update={"method": "draft_model"})
    if args.block_size:
        config = config.model_copy(
            update={"extra_engine_args": {**config.extra_engine_args, "block_size": args.block_size}}
        )
    questions = args.question or builtin_prompts("agent")
    agent = load_agent(args.agent)
    install_timers()
    sides = {
        "target-only": config.model_copy(update={"method": None}),
        f"{config.method} k={config.num_speculative_tokens}": config,
    }
    engines = {label: load_engine(cfg) for label, cfg in sides.items()}
    results: dict[str, dict] = {}
    try:
        for engine in engines.values():  # warm-up: one-off costs (allocator, first grammar) unmeasured
            with measuring(config.num_speculative_tokens):
                run_turn(engine, agent, questions[0], CLOCK.totals)
        raw = {label: defaultdict(lambda: defaultdict(float)) for label in engines}
        for rnd in range(args.rounds):
            for i, q in enumerate(questions):
                order = list(engines.items())
                if (rnd + i) % 2:
                    order.reverse()
                for label, engine in order:
                    k = sides[label].num_speculative_tokens if sides[label].method else 0
                    with measuring(k) as totals:
                        run_turn(engine, agent, q, totals)
                        for s, phases in totals.items():
                            for ph, v in phases.items():
                                raw[label][s][ph] += v
                    print(
                        f"round {rnd + 1} q{i + 1} {label}: {raw[label][0]['turn wall']:.1f} s so far", file=sys.stderr
                    )
        results = {label: finish(rows) for label, rows in raw.items()}
    finally:
        for engine in engines.values():
            engine.close()
    print_tables(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
