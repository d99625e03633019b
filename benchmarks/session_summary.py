"""Benchmark: read a 100,000-step session file and summarise it.

Generates a synthetic session (``specterm.session.synthetic``) of ``--steps`` engine steps into a
temporary directory, then times ``read_session`` + ``summarize`` — what ``specterm replay --summary``
does — and prints the seconds. Target: under 1 s for 100,000 steps.

    .venv/bin/python benchmarks/session_summary.py [--steps N] [--repeat R] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import tempfile
import time
from pathlib import Path

from specterm.session import Recorder, read_session
from specterm.session.synthetic import synthetic_session
from specterm.stats import summarize


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
        print(f"read_session + summarize: {best[0]:.3f} s (read {best[1]:.3f} s, summarize {best[2]:.3f} s; best of {args.repeat})")
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            summarize(read_session(path, freeze_gc=True).events)
            prof.disable()
            pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main())
