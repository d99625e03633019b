"""Check the GPU sampler on a machine with an NVIDIA GPU (written for an H200; any CUDA GPU works).

Starts ``GpuSampler`` at 4 Hz, then loads the GPU in phases: idle (baseline), a bf16 matrix-multiply
loop (compute-bound), a large tensor copy (memory-bound: should drive DRAM bandwidth near peak), idle.
Prints every sample as it arrives and one summary line per GPU. For the copy phase it also prints the
bandwidth torch itself achieved (bytes read + written / time), which the GPM estimate should be near.
Last, it checks that specterm's engine arguments keep CUDA graphs on with the installed vLLM build.

    python scripts/gpu_check.py [--seconds 10]

Exit status: 0 when samples with a bandwidth figure arrived and CUDA graphs are on, 1 otherwise, 2
without a CUDA device.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

from specterm.events import GpuSample, GpuStatus
from specterm.telemetry import GpuSampler


def fmt(value, spec: str, unit: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{unit}"


def line(phase: str, s: GpuSample) -> str:
    gib = 2**30
    mem = "—" if s.mem_used_bytes is None else f"{s.mem_used_bytes / gib:.1f}/{s.mem_total_bytes / gib:.1f} GiB"
    what = "DRAM bw" if s.source == "gpm_dram_bw" else "duty cycle" if s.source == "mem_duty_cycle" else "no counter"
    return (
        f"{s.t:6.2f}s {phase:7s} GPU{s.device} {s.source:14s} {what} {fmt(s.bw_util_pct, '5.1f', '%')} "
        f"est {fmt(s.est_gbps, '6.0f', ' GB/s')} of {fmt(s.peak_gbps, '.0f', ' GB/s')}  mem {mem}  "
        f"sm {fmt(s.sm_clock_mhz, 'd', ' MHz')} memclk {fmt(s.mem_clock_mhz, 'd', ' MHz')}  "
        f"power {fmt(s.power_w, '.0f', ' W')}"
    )


def run_for(seconds: float, body) -> int:
    end, n = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        n += body()
    return n


def main() -> int:
    parser = argparse.ArgumentParser(description="Exercise the GPU sampler under load.")
    parser.add_argument("--seconds", type=float, default=10.0, help="total load time (split matmul / copy)")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("no CUDA device visible to torch: nothing to check")
        return 2
    print(f"torch {torch.__version__}, CUDA device 0: {torch.cuda.get_device_name(0)}")

    t0 = time.monotonic()
    phase = ["idle"]
    lock = threading.Lock()
    by_phase: dict[tuple[int, str], list[GpuSample]] = defaultdict(list)

    def sink(event) -> None:  # called on the sampler thread
        with lock:
            if isinstance(event, GpuSample):
                by_phase[(event.device, phase[0])].append(event)
                print(line(phase[0], event), flush=True)
            elif isinstance(event, GpuStatus):
                print(f"{event.t:6.2f}s STATUS {event.state}: {event.message}", flush=True)

    sampler = GpuSampler(sink, period_s=0.25, clock=lambda: time.monotonic() - t0)
    sampler.start()
    time.sleep(1.5)  # idle baseline (and the sampler's NVML start-up)

    dev = torch.device("cuda", 0)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)

    def matmul() -> int:
        for _ in range(20):
            torch.mm(a, b)
        torch.cuda.synchronize()
        return 20

    x = torch.empty(2**30, device=dev, dtype=torch.float32)  # 4 GiB: far beyond any cache
    y = torch.empty_like(x)

    def copy() -> int:
        for _ in range(10):
            y.copy_(x)
        torch.cuda.synchronize()
        return 10

    torch.cuda.synchronize()
    with lock:
        phase[0] = "matmul"
    mms = run_for(args.seconds / 2, matmul)
    with lock:
        phase[0] = "copy"
    start = time.monotonic()
    copies = run_for(args.seconds / 2, copy)
    copy_s = time.monotonic() - start
    with lock:
        phase[0] = "idle2"
    time.sleep(1.0)
    sampler.stop()
    sampler.join(10)

    flops = 2 * 8192**3 * mms / (args.seconds / 2)
    torch_gbps = 2 * x.numel() * x.element_size() * copies / copy_s / 1e9  # read + write
    print(f"torch: matmul {flops / 1e12:.0f} TFLOP/s; copy {torch_gbps:.0f} GB/s (read + write)")

    ok = False
    for device in sorted({d for d, _ in by_phase}):
        parts = []
        sources = set()
        for name in ("idle", "matmul", "copy", "idle2"):
            got = by_phase.get((device, name), [])
            sources |= {s.source for s in got}
            bw = [s.bw_util_pct for s in got if s.bw_util_pct is not None]
            gbps = [s.est_gbps for s in got if s.est_gbps is not None]
            power = [s.power_w for s in got if s.power_w is not None]
            ok |= bool(bw)
            parts.append(
                f"{name}: n={len(got)} bw mean {fmt(statistics.fmean(bw) if bw else None, '.1f', '%')} "
                f"max {fmt(max(bw) if bw else None, '.1f', '%')} est max {fmt(max(gbps) if gbps else None, '.0f', ' GB/s')} "
                f"power max {fmt(max(power) if power else None, '.0f', ' W')}"
            )
        peak = next((s.peak_gbps for ss in by_phase.values() for s in ss if s.device == device), None)
        print(
            f"SUMMARY GPU{device} source={'/'.join(sorted(sources))} peak={fmt(peak, '.0f', ' GB/s')} | "
            + " | ".join(parts)
        )
    print(
        f"SUMMARY sampler final state: {sampler.state}; torch copy {torch_gbps:.0f} GB/s to compare with the copy-phase estimate"
    )
    graphs = engine_uses_cuda_graphs()
    print(f"SUMMARY engine args: CUDA graphs {'on' if graphs else 'OFF (enforce_eager)'} with the installed vLLM build")
    return 0 if ok and graphs is not False else 1


def engine_uses_cuda_graphs() -> bool | None:
    """Whether specterm's engine arguments keep CUDA graphs on (``enforce_eager`` off) here; None
    without vLLM. Built from the embedded pair's config, so nothing is downloaded or loaded."""
    try:
        from specterm.engine.base import EngineConfig
        from specterm.engine.vllm_engine import _engine_args
        from specterm.paths import embedded_pair_dir
    except ImportError:
        return None
    pair = embedded_pair_dir()
    try:
        args = _engine_args(EngineConfig(target=str(pair / "target"), draft=str(pair / "draft"), method="draft_model"))
    except ImportError:
        return None
    return not args.enforce_eager


if __name__ == "__main__":
    sys.exit(main())
