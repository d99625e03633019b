"""Live engine tokens/s with the dashboard attached ÷ headless, and what the UI thread costs.

Each workload loads one engine once and runs the same requests alternately (A B, then B A, ...)
through:

* **headless**: a ``LiveSession`` into ``HeadlessPrinter`` writing to an in-memory console, i.e.
  what ``specterm run`` does minus the real terminal;
* **UI**: the real app under ``App.run_test()`` (headless Textual, 160×48, live pacing, not the
  deterministic test mode): the request is submitted as a user does, runs on the app's worker
  thread, its events cross the bridge and are drawn. As ``specterm chat`` runs it, the engine and the
  runner are in a process of their own (``session/process.py``; a second engine of the same
  configuration, loaded and warmed up like the first); ``--in-process`` runs the UI side on the
  headless side's engine in this process instead (one interpreter, one GIL: the old arrangement).

Engine speed on each side = output tokens ÷ the request's wall time on the thread that runs it (for
the UI, until the worker returns; the UI's catch-up on the last batch is counted in its CPU below).

Workloads:

* ``agent`` — the embedded pair running the ``sql_analyst`` agent on its own in-distribution
  requests (``bench.workloads.AGENT_REQUESTS``): several engine requests, tool calls and results.
* ``long`` — one answer of ≥ 2,000 tokens: SmolLM2-135M (``specterm models fetch smollm2``) with n-gram
  speculation (k=4) on a raw prompt, EOS ignored so it runs to ``--max-tokens``; skipped when that
  model is not in the cache.

Prints, per workload: the median per-pair ratio of tokens/s (UI ÷ headless) with its range, and the
ratio of the two sides' total tokens ÷ total time with a 95 % bootstrap interval over the pairs
(single agent requests last 0.2–0.5 s, so one pair swings ±30 %: use ``--rounds 10``); the UI
(event-loop) thread's CPU time while the engine ran as a share of that wall time; and the UI thread's
CPU seconds per 1,000 live tokens (its catch-up on the last events included). Also the load averages before and after: other processes share the cores.

    .venv/bin/python benchmarks/ui_overhead.py [--workload agent|long|all] [--rounds 2] [--in-process]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import random
import statistics
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from rich.console import Console

from specterm.session.live import make_runner

LONG_MODEL = Path("~/.cache/specterm/models/smollm2-135m-instruct").expanduser()
LONG_PROMPTS = ["def fibonacci(n):\n"]
POLL_S = 0.02
"""How often the benchmark looks whether a UI request is done: rarely, so that its own wake-ups
do not take the GIL from the engine (a 2 ms poll cost the UI side a few per cent)."""


@dataclass
class Side:
    rates: list[float] = field(default_factory=list)
    busy: list[float] = field(default_factory=list)
    cpu_per_k: list[float] = field(default_factory=list)


def count_tokens(sink, counter: list[int]):
    def counting(event):
        if event.type == "spec_step":
            counter[0] += len(event.tokens)
        sink(event)

    return counting


def headless(engine, runner, prompt) -> tuple[int, float]:
    from specterm.headless import HeadlessPrinter
    from specterm.session.live import LiveSession

    printer = HeadlessPrinter(Console(file=io.StringIO(), force_terminal=True, color_system="truecolor"))
    session = LiveSession(engine=engine, runner=runner)
    counter = [0]
    t0 = time.perf_counter()
    session.run(prompt, count_tokens(printer, counter))
    return counter[0], time.perf_counter() - t0


async def with_ui(app, prompt, ui: Side) -> tuple[int, float]:
    from specterm.ui.widgets.prompt_input import PromptInput

    ends: list[float] = []
    run = app.session.run

    def timed_run(*args, **kw):  # on the worker thread: the engine's own wall time
        try:
            return run(*args, **kw)
        finally:
            ends.append(time.perf_counter())

    app.session.run = timed_run
    before = app.state.summary.session.tokens
    cpu0 = time.thread_time()  # this coroutine runs on the event loop's thread: the UI's CPU
    t0 = time.perf_counter()
    app.post_message(PromptInput.Submitted(prompt))
    while not ends:
        await asyncio.sleep(POLL_S)
    during = time.thread_time() - cpu0  # UI CPU while the engine ran (to within one poll)
    while app.request_in_flight is not None or len(app.bridge):
        await asyncio.sleep(POLL_S)
    app.drain_now()
    cpu = time.thread_time() - cpu0  # and the catch-up on the last events
    app.session.run = run
    wall = ends[-1] - t0
    tokens = app.state.summary.session.tokens - before
    ui.busy.append(during / wall)
    ui.cpu_per_k.append(cpu / max(tokens, 1) * 1000)
    return tokens, wall


IN_PROCESS = False


def total_ratio(pairs: list[tuple[int, float, int, float]]) -> float:
    """(UI tokens ÷ UI time) ÷ (headless tokens ÷ headless time) over ``(h_n, h_s, u_n, u_s)`` pairs."""
    return (sum(p[2] for p in pairs) / sum(p[3] for p in pairs)) / (sum(p[0] for p in pairs) / sum(p[1] for p in pairs))


def bootstrap(pairs, n: int = 2000) -> tuple[float, float]:
    rng = random.Random(0)
    ratios = sorted(total_ratio([rng.choice(pairs) for _ in pairs]) for _ in range(n))
    return ratios[int(0.025 * n)], ratios[int(0.975 * n) - 1]


async def run_workload(
    name: str, engine, runner_factory, prompts: list[str], rounds: int, warm: bool = True, engine_factory=None
) -> list[float]:
    """``runner_factory`` and ``engine_factory`` are picklable (the engine process builds its own)."""
    from specterm.session.live import LiveSession
    from specterm.ui.app import make_app

    if IN_PROCESS:
        session = LiveSession(engine=engine, runner_factory=runner_factory)
    else:
        from specterm.session.process import process_factories

        load, runner = process_factories(engine_factory, runner_factory)
        session = LiveSession(engine_factory=load, runner_factory=runner)
    app = make_app(session=session, gpu=False, theme_dirs=(), deterministic=False)
    ui, ratios, pairs = Side(), [], []
    async with app.run_test(size=(160, 48)):
        while app.runner is None:  # the engine process loads on the app's worker thread
            await asyncio.sleep(0.2)
        for prompt in prompts if warm else ():  # warm-up: first-use costs (grammar, caches) on neither side
            headless(engine, runner_factory(engine), prompt)
            if not IN_PROCESS:
                await with_ui(app, prompt, Side())
        for r in range(rounds):
            for prompt in prompts:
                order = ("h", "u") if r % 2 == 0 else ("u", "h")
                rate, count, wall = {}, {}, {}
                for side in order:
                    if side == "h":
                        n, s = headless(engine, runner_factory(engine), prompt)
                    else:
                        n, s = await with_ui(app, prompt, ui)
                    rate[side], count[side], wall[side] = n / s, n, s
                ratios.append(rate["u"] / rate["h"])
                pairs.append((count["h"], wall["h"], count["u"], wall["u"]))
                print(
                    f"  {name} round {r} {prompt[:28]!r}: headless {rate['h']:.1f} tok/s ({count['h']} tok), "
                    f"UI {rate['u']:.1f} tok/s ({count['u']} tok)",
                    flush=True,
                )
    low, high = bootstrap(pairs)
    print(
        f"{name}: UI-attached ÷ headless tokens/s: median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}, n={len(ratios)}); totals {total_ratio(pairs):.3f} "
        f"(95 % {low:.3f}–{high:.3f}); UI thread busy "
        f"{statistics.median(ui.busy):.1%} of the wall time (median); UI CPU "
        f"{statistics.median(ui.cpu_per_k):.3f} s per 1,000 live tokens (median)",
        flush=True,
    )
    return ratios


def agent_workload(rounds: int) -> None:
    from specterm.agent import load_agent
    from specterm.bench.workloads import AGENT_REQUESTS
    from specterm.engine import EngineConfig, load_engine
    from specterm.models.defaults import ensure_small_models

    target, draft = ensure_small_models()
    config = EngineConfig(target=str(target), draft=str(draft), method="draft_model")
    engine = load_engine(config)
    agent = load_agent("sql_analyst")
    try:
        asyncio.run(
            run_workload(
                "agent",
                engine,
                partial(make_runner, agent=agent),
                list(AGENT_REQUESTS),
                rounds,
                engine_factory=partial(load_engine, config),
            )
        )
    finally:
        engine.close()


def long_engine(config):
    """The long workload's engine: EOS ignored so each answer runs to ``max_tokens`` on both sides (the
    135M model ends its answers within ~150 tokens; a benchmark-only patch, the product has no such
    option). Module-level so the engine process can build it too."""
    from specterm.engine import load_engine

    engine = load_engine(config)
    sampling = engine._sampling_params

    def long_answer(p):
        out = sampling(p)
        out.ignore_eos = True
        return out

    engine._sampling_params = long_answer
    return engine


def long_workload(rounds: int, max_tokens: int) -> None:
    from specterm.engine import EngineConfig, GenerationParams

    if not (LONG_MODEL / "config.json").is_file():
        print(f"long: skipped ({LONG_MODEL} not found; `specterm models fetch smollm2` builds it)")
        return
    config = EngineConfig(target=str(LONG_MODEL), method="ngram", num_speculative_tokens=4)
    engine = long_engine(config)
    runner = partial(make_runner, params=GenerationParams(max_tokens=max_tokens), raw=True)
    try:
        asyncio.run(
            run_workload(
                "long",
                engine,
                runner,
                LONG_PROMPTS,
                rounds,
                warm=False,  # a 2,000-token
                engine_factory=partial(long_engine, config),
            )
        )  # warm-up would double the run
    finally:
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=("agent", "long", "all"), default="all")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=2048, help="length of the long answer")
    parser.add_argument("--frame-s", type=float, help="override the UI's frame interval (experiments)")
    parser.add_argument("--switch-interval", type=float, help="sys.setswitchinterval (experiments)")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="the UI side's engine in this process (as `specterm chat --engine-in-process`)",
    )
    args = parser.parse_args()
    global IN_PROCESS
    IN_PROCESS = args.in_process
    if args.frame_s is not None:
        import specterm.ui.pacing

        specterm.ui.pacing.FRAME_S = args.frame_s
    if args.switch_interval is not None:
        import sys

        sys.setswitchinterval(args.switch_interval)
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)
    if args.workload in ("agent", "all"):
        agent_workload(args.rounds)
    if args.workload in ("long", "all"):
        long_workload(args.rounds, args.max_tokens)
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
