"""Live engine tokens/s with the dashboard attached ÷ headless (the ``specterm run`` printer).

One engine (the tiny pair by default, draft_model k=4), loaded once; the same prompts are run
alternately (A B, B A, ...) through:

* **headless**: ``engine.generate`` into ``HeadlessPrinter`` writing to an in-memory console, i.e.
  what ``specterm run`` does minus the real terminal;
* **UI**: the real app under ``App.run_test()`` (headless Textual, 160×48): the prompt is submitted
  through ``PromptInput.Submitted``, the engine runs on the app's worker thread, events cross the
  bridge and are drawn; timed until the request is done and the last batch is applied.

Prints the median per-pair ratio of decode tokens/s (UI ÷ headless) and its range. Run:

    .venv/bin/python benchmarks/ui_overhead.py [--rounds 3] [--max-tokens 96]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import time

from rich.console import Console

PROMPTS = [
    'How many orders above 100? {"tool":"query_sql","arguments":{"sql":"SELECT',
    "Runbook: if the payments queue backs up,",
    "The customer alice placed",
]


def headless(engine, prompt, params) -> tuple[int, float]:
    from specterm.headless import HeadlessPrinter

    printer = HeadlessPrinter(Console(file=io.StringIO(), force_terminal=True, color_system="truecolor"))
    t0 = time.perf_counter()
    done = engine.generate(prompt, params, printer)
    return done.output_tokens, time.perf_counter() - t0


UI_CPU: list[float] = []
"""CPU seconds the UI (event-loop) thread used per second of each UI-attached request."""


async def with_ui(app, prompt) -> tuple[int, float]:
    from specterm.ui.widgets.prompt_input import PromptInput

    before = app.state.summary.session.tokens
    cpu0 = time.thread_time()  # this coroutine runs on the event loop's thread: the UI's CPU
    t0 = time.perf_counter()
    app.post_message(PromptInput.Submitted(prompt))
    await asyncio.sleep(0.01)
    while app._cancel is not None or len(app.bridge):
        await asyncio.sleep(0.002)
    app.drain_now()
    wall = time.perf_counter() - t0
    UI_CPU.append((time.thread_time() - cpu0) / wall)
    return app.state.summary.session.tokens - before, wall


async def main_async(rounds: int, max_tokens: int) -> None:
    from specterm.engine import EngineConfig, GenerationParams, load_engine
    from specterm.models.defaults import ensure_default_models
    from specterm.session.live import plain_runner
    from specterm.ui.app import make_app

    target, draft = ensure_default_models()
    engine = load_engine(EngineConfig(target=str(target), draft=str(draft), method="draft_model"))
    params = GenerationParams(max_tokens=max_tokens)
    app = make_app(engine=engine, runner_factory=lambda e: plain_runner(e, params), gpu=False,
                   theme_dirs=(), deterministic=False)  # live pacing, as a user runs it
    ratios = []
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        for prompt in PROMPTS:  # warm-up: first-use costs (grammar, numba, caches) on neither side
            headless(engine, prompt, params)
        for r in range(rounds):
            for prompt in PROMPTS:
                order = ("h", "u") if r % 2 == 0 else ("u", "h")
                rate = {}
                for side in order:
                    n, s = headless(engine, prompt, params) if side == "h" else await with_ui(app, prompt)
                    rate[side] = n / s
                ratios.append(rate["u"] / rate["h"])
                print(f"round {r} {prompt[:30]!r}: headless {rate['h']:.1f} tok/s, UI {rate['u']:.1f} tok/s")
    engine.close()
    print(f"UI-attached ÷ headless tokens/s: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}, n={len(ratios)}); UI thread busy "
          f"{statistics.median(UI_CPU):.0%} of the wall time (median)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()
    asyncio.run(main_async(args.rounds, args.max_tokens))


if __name__ == "__main__":
    main()
