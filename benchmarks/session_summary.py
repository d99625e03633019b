"""Benchmark: open a 100,000-step session file in the dashboard, and read + summarise it.

Generates a synthetic session (``specterm.session.synthetic``) of ``--steps`` engine steps into a
temporary directory, then times, best of ``--repeat``:

* **first frame**: ``make_app(replay=path)`` until the dashboard's first frame is painted (headless
  Textual), which reads the header and the first ``HEAD_LINES`` lines only; against reading the
  whole file first (``read_session``, then the app), which is what ``specterm replay`` did;
* **full summary**: ``summarize_file`` (msgspec) — what ``specterm replay --summary`` does — and
  ``read_session`` + ``summarize`` (pydantic events), what it did;
* **bare parse**: each line through ``json.loads`` and, when installed, ``orjson.loads`` and
  ``msgspec.json.decode`` (no validation, no objects), the floor the summary is compared with.

    .venv/bin/python benchmarks/session_summary.py [--steps N] [--repeat R] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

from specterm.session import Recorder, read_session
from specterm.session.fast_summary import summarize_file
from specterm.session.synthetic import synthetic_session
from specterm.stats import summarize


def bare_parse(path: Path, repeat: int) -> dict[str, float]:
    """Seconds to parse every line with each JSON library available, nothing else."""
    parsers = {"json": json.loads}
    for module, attr in (("orjson", "loads"), ("msgspec.json", "decode")):
        try:
            parsers[module] = getattr(importlib.import_module(module), attr)
        except ImportError:
            pass
    lines = path.read_bytes().splitlines()
    out = {}
    for name, parse in parsers.items():
        best = float("inf")
        for _ in range(repeat):
            gc.collect()
            gc.disable()  # as the reader does
            t0 = time.perf_counter()
            parsed = [parse(line) for line in lines]
            best = min(best, time.perf_counter() - t0)
            gc.enable()
            del parsed
        out[name] = best
    return out


async def first_frame(path: Path, *, whole: bool) -> float:
    """Seconds from opening ``path`` to the dashboard's first painted frame (the first screen
    update the compositor hands to the display; headless, so nothing is written)."""
    from specterm.ui.app import make_app
    from specterm.ui.screens.main import MainScreen

    gc.collect()
    t0 = time.perf_counter()
    app = make_app(replay=read_session(path) if whole else path, autostart=False, theme_dirs=(), deterministic=True)
    painted: list[float] = []
    display = app._display

    def timed_display(screen, update):  # the compositor's output for one frame
        if isinstance(screen, MainScreen) and update is not None and not painted:
            painted.append(time.perf_counter())
        return display(screen, update)

    app._display = timed_display  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)):
        while not painted:
            await asyncio.sleep(0.001)
        app.replayer.stop()
    return painted[0] - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs; the best is reported")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one run")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        header, events = synthetic_session(args.steps, steps_per_request=200)
        with Recorder(path, header) as rec:
            for event in events:
                rec.write(event)
        del events
        size_mb = path.stat().st_size / 1e6
        print(f"session: {args.steps} spec steps, {size_mb:.1f} MB")

        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            data = read_session(path, freeze_gc=True)  # as `specterm replay` does
            t1 = time.perf_counter()
            summary = summarize(data.events)
            t2 = time.perf_counter()
            times.append((t2 - t0, t1 - t0, t2 - t1))
            assert summary.session.steps == args.steps, summary.session.steps
            del data, summary
            gc.unfreeze()  # give the next run the same starting point
            gc.collect()
        best = min(times)
        print(
            f"read_session + summarize: {best[0]:.3f} s (read {best[1]:.3f} s, summarize {best[2]:.3f} s; best of {args.repeat})"
        )
        fast = []
        for _ in range(args.repeat):
            gc.collect()
            t0 = time.perf_counter()
            _, summary = summarize_file(path)  # what `specterm replay --summary` does
            fast.append(time.perf_counter() - t0)
            assert summary.session.steps == args.steps, summary.session.steps
        print(f"full summary (summarize_file, msgspec): {min(fast):.3f} s")
        bare = bare_parse(path, args.repeat)
        for name, seconds in bare.items():
            print(
                f"bare parse, {name}: {seconds:.3f} s; full summary ÷ bare = {min(fast) / seconds:.2f} "
                f"(read_session + summarize ÷ bare = {best[0] / seconds:.2f})"
            )
        lazy = min(asyncio.run(first_frame(path, whole=False)) for _ in range(args.repeat))
        whole = min(asyncio.run(first_frame(path, whole=True)) for _ in range(args.repeat))
        print(f"dashboard first frame: {lazy:.3f} s reading the head only; {whole:.3f} s reading the whole file first")
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            summarize(read_session(path, freeze_gc=True).events)
            prof.disable()
            pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
