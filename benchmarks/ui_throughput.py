"""How many tokens per second the dashboard absorbs: a large synthetic session replayed at maximum
speed (the replayer's own thread, through the real bridge) into the app under ``App.run_test()``
(headless), until the last event is applied and the panels are repainted.

    .venv/bin/python benchmarks/ui_throughput.py [--steps 20000] [--size 160x48]

Reports events/s and tokens rendered/s, the number of wake-up messages the bridge posted (a batch
each; never one per token) and how many batches the UI applied.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from specterm.events import SpecStep
from specterm.session.reader import SessionData
from specterm.session.synthetic import synthetic_session
from specterm.ui.app import make_app


async def bench(steps: int, size: tuple[int, int]) -> dict[str, float]:
    header, events = synthetic_session(steps, steps_per_request=200)
    tokens = sum(len(e.tokens) for e in events if isinstance(e, SpecStep))
    data = SessionData(path=Path("synthetic"), header=header, events=events)
    app = make_app(replay=data, speed=0, autostart=False, theme_dirs=(), deterministic=True)
    batches = 0
    apply = app.apply_events

    def counting_apply(batch, **kw):
        nonlocal batches
        batches += 1
        return apply(batch, **kw)

    app.apply_events = counting_apply  # type: ignore[method-assign]
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        started = time.perf_counter()
        app.replayer.start()
        while not (app.replayer.finished and len(app.bridge) == 0):
            await asyncio.sleep(0.005)
        app.drain_now()  # anything posted after the last wake-up, panels included
        await pilot.pause()  # one more frame: the screen is painted
        elapsed = time.perf_counter() - started
        assert app.state.summary.session.tokens == tokens, "events were lost"
    return {
        "events": len(events),
        "tokens": tokens,
        "seconds": elapsed,
        "events_per_s": len(events) / elapsed,
        "tokens_per_s": tokens / elapsed,
        "wakeups": app.bridge.wakeups,
        "batches": batches,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_000, help="engine steps in the synthetic session")
    parser.add_argument("--size", default="160x48", help="terminal size WxH")
    args = parser.parse_args()
    w, h = (int(x) for x in args.size.split("x"))
    r = asyncio.run(bench(args.steps, (w, h)))
    print(
        f"{r['events']} events ({r['tokens']} tokens) in {r['seconds']:.2f} s: "
        f"{r['events_per_s']:,.0f} events/s, {r['tokens_per_s']:,.0f} tokens rendered/s; "
        f"{r['wakeups']} wake-ups, {r['batches']} batches"
    )


if __name__ == "__main__":
    main()
