"""Frame cost at token ~100 vs token ~4,000 of one streamed answer, in UI-thread CPU seconds.

One answer of ``--tokens`` tokens (prose with paragraph breaks, a realistic verdict mix) is streamed
into the real dashboard under ``App.run_test()`` (headless Textual, 160×48), one engine step per
frame, as a live request at a dozen tokens/s arrives. Each frame is ``apply_events([step])`` plus
``pilot.pause()``, which forces the screen's layout and compositor render (what the update timer does
between frames). The cost of a frame is the event-loop thread's CPU time (``time.thread_time``),
so it does not count waits, nor another process's load, only this UI's own work.

Prints the median frame cost in a window of frames after token 100 and after token 4,000, and
their ratio (goal: ≤ 1.5). The tokens in between are applied in larger batches (not timed). Then
the UI thread's CPU share over 5 s of an idle live dashboard (the prompt's cursor blinking).

    .venv/bin/python benchmarks/ui_frame_cost.py [--tokens 4200] [--frames 40]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

from specterm.events import AgentStepStarted, RequestStarted, SpecStep, Token, UserMessage

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the UI's test doubles (tests/doubles.py)

WORDS = (
    " the",
    " order",
    " ships",
    " on",
    " Friday",
    ",",
    " and",
    " its",
    " status",
    " is",
    " shipped",
    " because",
    " the",
    " warehouse",
    " confirmed",
    " it",
    ".",
    " A",
    " refund",
    " takes",
)


def answer_steps(n_tokens: int, seed: int = 0, line_tokens: int = 70) -> list[SpecStep]:
    """Steps of one request, ~4 tokens each, with a line break about every ``line_tokens`` tokens
    (70: prose paragraphs; 8: code, a new row and so a relayout almost every frame)."""
    rng = random.Random(seed)
    steps: list[SpecStep] = []
    made = 0
    while made < n_tokens:
        k = 4
        a = rng.randint(0, k)
        toks = [Token(id=i, text=rng.choice(WORDS), verdict="accepted") for i in range(a)]
        last = "bonus" if a == k else "correction"
        text = "\n" if rng.random() < 4 / line_tokens else rng.choice(WORDS)
        toks.append(Token(id=99, text=text, verdict=last))
        steps.append(
            SpecStep(
                t=len(steps) * 0.08,
                request_id="r-long",
                index=len(steps),
                drafted=list(range(k)),
                accepted=a,
                tokens=toks,
                rejected=list(range(k - a)),
                rejected_text=[" x"] * (k - a),
                wall_s=0.08,
            )
        )
        made += len(toks)
    return steps


async def measure(n_tokens: int, frames: int, size: tuple[int, int], line_tokens: int = 70) -> dict[str, float]:
    from doubles import FakeEngine, demo_header

    from specterm.ui.app import make_app

    app = make_app(engine=FakeEngine(), header=demo_header(), gpu=False, theme_dirs=(), deterministic=True)
    steps = answer_steps(n_tokens, line_tokens=line_tokens)
    costs: dict[int, list[float]] = {100: [], 4000: []}
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.apply_events(
            [
                UserMessage(request_id="u", text="Explain the refund policy at length."),
                AgentStepStarted(request_id="u", step=0, kind="answer"),
                RequestStarted(request_id="r-long", prompt_tokens=50),
            ],
            force=True,
        )
        await pilot.pause()
        tokens = 0
        i = 0
        for mark in (100, 4000):
            # Untimed catch-up to the mark, in batches of 50 steps (one frame each).
            while tokens < mark and i < len(steps):
                batch = steps[i : i + min(50, max(1, _steps_until(steps, i, mark - tokens)))]
                app.apply_events(batch)
                await pilot.pause()
                i += len(batch)
                tokens += sum(len(s.tokens) for s in batch)
            for _ in range(frames):
                if i >= len(steps):
                    break
                t0 = time.thread_time()
                app.apply_events([steps[i]])
                await pilot.pause()
                costs[mark].append(time.thread_time() - t0)
                tokens += len(steps[i].tokens)
                i += 1
        assert app.state.summary.session.tokens == tokens, "tokens were lost"
    return {m: statistics.median(c) for m, c in costs.items()}


async def idle_share(seconds: float, size: tuple[int, int]) -> float:
    """UI-thread CPU ÷ wall time of a live dashboard with nothing happening (cursor blinking)."""
    from doubles import FakeEngine, demo_events, demo_header

    from specterm.ui.app import make_app

    app = make_app(engine=FakeEngine(), header=demo_header(), gpu=False, theme_dirs=())  # live pacing
    async with app.run_test(size=size) as pilot:
        app.apply_events(demo_events(), force=True)
        await pilot.pause(1.0)  # let startup work settle
        cpu0, t0 = time.thread_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        return (time.thread_time() - cpu0) / (time.perf_counter() - t0)


def _steps_until(steps: list[SpecStep], i: int, want: int) -> int:
    n = got = 0
    while got < want and i + n < len(steps):
        got += len(steps[i + n].tokens)
        n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=4200, help="length of the answer (past 4,000 + a window)")
    parser.add_argument("--frames", type=int, default=40, help="timed frames in each window")
    parser.add_argument("--size", default="160x48")
    parser.add_argument("--line-tokens", type=int, default=70, help="tokens per line (8 = code-like)")
    args = parser.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    r = asyncio.run(measure(max(args.tokens, 4000 + args.frames * 6), args.frames, (w, h), args.line_tokens))
    print(
        f"frame cost (UI-thread CPU, median of {args.frames}): token 100: {r[100] * 1000:.2f} ms, "
        f"token 4,000: {r[4000] * 1000:.2f} ms; ratio {r[4000] / r[100]:.2f} (goal ≤ 1.5)"
    )
    print(f"idle dashboard: UI thread busy {asyncio.run(idle_share(5.0, (w, h))):.2%} of the wall time")


if __name__ == "__main__":
    main()
