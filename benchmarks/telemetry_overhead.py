"""CPU cost of the GPU sampler: microseconds of CPU time per GpuSample.

Drives ``GpuSampler.sample_once()`` N times (no sleeping) and divides the sampler thread's CPU time
(``time.thread_time``) by the number of samples produced. Runs against FakeNvml (tests/fake_nvml.py;
its own Python code is included in the figure, where the real module would spend that time in ctypes
calls and the driver), and against the real NVML when a GPU and driver are present.

    .venv/bin/python benchmarks/telemetry_overhead.py [--n 2000] [--gpus 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fake_nvml import FakeGpu, FakeNvml  # noqa: E402

from specterm.events import GpuSample  # noqa: E402
from specterm.telemetry import GpuSampler  # noqa: E402


def measure(nvml, n: int) -> tuple[float, int, dict[str, str]] | None:
    """(µs of CPU per sample, samples, sources), or None when NVML cannot sample here."""
    produced = 0

    def sink(event) -> None:
        nonlocal produced
        if isinstance(event, GpuSample):
            produced += 1

    sampler = GpuSampler(sink, nvml=nvml, period_s=0.25)
    if sampler.sample_once() is None or sampler.state != "ok":  # init + GPM priming, not timed
        return None
    sources = sampler.sources
    start = time.thread_time()
    for _ in range(n):
        sampler.sample_once()
    spent = time.thread_time() - start
    sampler.close()
    return (spent / produced * 1e6 if produced else float("nan")), produced, sources


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="sampler ticks per scenario")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs in the fake scenarios")
    args = parser.parse_args()
    scenarios = {
        "fake, GPM DRAM bandwidth": FakeNvml([FakeGpu() for _ in range(args.gpus)]),
        "fake, memory duty cycle": FakeNvml([FakeGpu(gpm=False) for _ in range(args.gpus)]),
    }
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        scenarios["real NVML"] = pynvml
    except Exception as err:  # noqa: BLE001 - no GPU or driver here: say so and measure the fakes
        print(f"real NVML: not measured ({type(err).__name__}: {err})")
    for name, nvml in scenarios.items():
        result = measure(nvml, args.n)
        if result is None:
            print(f"{name}: sampler did not start")
            continue
        us, produced, sources = result
        kinds = ", ".join(sorted(set(sources.values())))
        print(f"{name}: {us:.1f} µs CPU per sample ({produced} samples, sources: {kinds})")
        # At the default 4 Hz, one device costs us × 4 µs of CPU per second.
        print(f"    at 4 Hz: {us * 4 / 1e4:.4f} % of one core per device")
    return 0


if __name__ == "__main__":
    sys.exit(main())
