"""Finding GPUs through NVML and reading one ``GpuSample``'s worth of numbers from each.

Every function takes the nvml module to use (the real ``pynvml`` or the test fake) and must be called
between ``nvmlInit`` and ``nvmlShutdown``. Nothing here catches hard errors (GPU lost, driver gone):
those go up to the sampler, which owns the state machine.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specterm.telemetry.errors import NoGpu, is_code, is_permanent, is_soft, one_line

log = logging.getLogger(__name__)

GPM_DRAM_BW = "gpm_dram_bw"
MEM_DUTY_CYCLE = "mem_duty_cycle"
NO_SOURCE = "none"

# NVML refreshes the GPM counters internally every 100 ms; two samples closer than that give
# nothing useful, so the sampler never samples faster than this.
GPM_MIN_INTERVAL_S = 0.1

SOURCE_LABELS: dict[str, tuple[str, str]] = {
    # source: (the panel's short label, doctor's full description)
    GPM_DRAM_BW: ("DRAM bandwidth (GPM)", "DRAM bandwidth (GPM)"),
    MEM_DUTY_CYCLE: (
        "memory duty cycle (not bandwidth)",
        "memory duty cycle (% of time memory was busy, not bandwidth)",
    ),
    NO_SOURCE: ("no memory counter on this GPU", "nothing: this device exposes no memory counter"),
}
"""What each bandwidth source is called: the one table the panel and ``doctor`` read."""
PANEL_LABELS = {source: full for source, (_short, full) in SOURCE_LABELS.items()}


def peak_bandwidth_gbps(max_mem_clock_mhz: float | None, bus_width_bits: float | None) -> float | None:
    """Theoretical peak DRAM bandwidth in GB/s (10^9 bytes per second).

    ``peak bytes/s = max memory clock [MHz] × 10^6 × bus width [bits] × 2 / 8``

    The ×2 is the double data rate; /8 turns bits into bytes. NVML's max memory clock
    (``nvmlDeviceGetMaxClockInfo(h, NVML_CLOCK_MEM)``) is reported so that this gives the datasheet
    figure for HBM and GDDR alike: H100 SXM 2619 MHz × 5120 bit → 3352 GB/s (datasheet 3.35 TB/s);
    H200 3201 MHz × 6144 bit → 4917 GB/s (4.8 TB/s); RTX 4090 10501 MHz × 384 bit → 1008 GB/s.
    Returns None when either input is missing or not positive.
    """
    if not max_mem_clock_mhz or not bus_width_bits or max_mem_clock_mhz <= 0 or bus_width_bits <= 0:
        return None
    bytes_per_s = max_mem_clock_mhz * 1e6 * bus_width_bits * 2 / 8
    return bytes_per_s / 1e9


@dataclass
class GpmPair:
    """Two GPM sample buffers used in turn, and one reusable ``nvmlGpmMetricsGet`` request.

    Each tick fills ``cur`` and asks for the metric between ``prev`` and ``cur``, then swaps them, so
    every interval is bracketed by two samples while only one ``nvmlGpmSampleGet`` runs per tick.
    """

    prev: Any
    cur: Any
    request: Any


@dataclass
class Target:
    """One thing a ``GpuSample`` describes: a whole GPU, or one MIG GPU instance of it."""

    index: int
    name: str
    handle: Any  # memory info is read here (the MIG device handle for a GPU instance)
    parent: Any  # physical GPU: clocks, power, GPM sampling
    gi_id: int | None = None  # MIG GPU instance id, None for a whole GPU
    peak_gbps: float | None = None
    gpm: GpmPair | None = None
    note: str = ""  # why the source is what it is, for the status line
    unsupported: set[str] = field(default_factory=set)

    @property
    def source(self) -> str:
        if self.gpm is not None:
            return GPM_DRAM_BW
        if self.gi_id is None and "duty" not in self.unsupported:
            return MEM_DUTY_CYCLE
        return NO_SOURCE

    @property
    def label(self) -> str:
        where = f"GPU {self.index}" if self.gi_id is None else f"GPU {self.index} GI {self.gi_id}"
        return f"{where} {self.name}"


def soft(nvml: Any, target: Target | None, key: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call an optional NVML reading; None when it is not available here. Hard errors propagate."""
    if target is not None and key in target.unsupported:
        return None
    try:
        return fn(*args)
    except Exception as err:  # filtered just below
        if not is_soft(err, nvml):
            raise
        if target is not None and is_permanent(err, nvml):
            target.unsupported.add(key)
        return None


def discover(nvml: Any) -> list[Target]:
    """All GPUs (or their MIG instances) with their bandwidth source decided and GPM primed.

    A device that is lost at discovery is skipped so the others keep their telemetry; if none is
    left, the last error is raised. ``NoGpu`` when NVML sees no device at all.
    """
    count = nvml.nvmlDeviceGetCount()
    if count <= 0:
        raise NoGpu("no NVIDIA GPU found by NVML")
    targets: list[Target] = []
    lost: BaseException | None = None
    for index in range(count):
        try:
            targets.extend(_discover_one(nvml, index))
        except Exception as err:
            if not is_code(err, nvml, "NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_RESET_REQUIRED"):
                release(nvml, targets)
                raise
            lost = err
            log.warning("GPU %d lost at discovery: %s", index, err)
    if not targets:
        if lost is not None:
            raise lost
        raise NoGpu("no usable NVIDIA GPU found by NVML")
    return targets


def _discover_one(nvml: Any, index: int) -> list[Target]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    name = _text(soft(nvml, None, "name", nvml.nvmlDeviceGetName, handle)) or "NVIDIA GPU"
    gpm_ok, gpm_note = _gpm_supported(nvml, handle)
    mig = soft(nvml, None, "mig", nvml.nvmlDeviceGetMigMode, handle)
    if mig and mig[0] == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
        return _discover_mig(nvml, index, name, handle, gpm_ok, gpm_note)
    clock = soft(nvml, None, "maxclk", nvml.nvmlDeviceGetMaxClockInfo, handle, nvml.NVML_CLOCK_MEM)
    width = soft(nvml, None, "bus", nvml.nvmlDeviceGetMemoryBusWidth, handle)
    target = Target(index, name, handle, handle, peak_gbps=peak_bandwidth_gbps(clock, width))
    _attach_gpm(nvml, target, gpm_ok, gpm_note)
    return [target]


def _discover_mig(nvml: Any, index: int, name: str, parent: Any, gpm_ok: bool, note: str) -> list[Target]:
    # One target per GPU instance: GPM samples per GI (nvmlGpmMigSampleGet takes the parent handle and
    # the GI id), and several compute instances of one GI share its memory. Peak GB/s is left unset:
    # what 100 % of a GI's DRAM bandwidth means in bytes is not documented, so no GB/s estimate.
    targets: list[Target] = []
    seen: set[int] = set()
    slots = soft(nvml, None, "migcount", nvml.nvmlDeviceGetMaxMigDeviceCount, parent) or 0
    for slot in range(slots):
        mig = soft(nvml, None, "mighandle", nvml.nvmlDeviceGetMigDeviceHandleByIndex, parent, slot)
        if mig is None:  # empty slot
            continue
        gi = soft(nvml, None, "gi", nvml.nvmlDeviceGetGpuInstanceId, mig)
        if gi is None or gi in seen:
            continue
        seen.add(gi)
        mig_name = _text(soft(nvml, None, "name", nvml.nvmlDeviceGetName, mig)) or f"{name} MIG"
        target = Target(index, mig_name, mig, parent, gi_id=int(gi))
        _attach_gpm(nvml, target, gpm_ok, note)
        if target.gpm is None and not target.note:
            target.note = "MIG without GPM: no memory counter per instance"
        targets.append(target)
    return targets


def _gpm_supported(nvml: Any, handle: Any) -> tuple[bool, str]:
    try:
        support = nvml.nvmlGpmQueryDeviceSupport(handle)
    except Exception as err:
        if not is_soft(err, nvml):
            raise
        return False, "no GPM on this driver"
    if not support.isSupportedDevice:
        return False, "no GPM on this GPU (needs Hopper or newer)"
    return True, ""


def _attach_gpm(nvml: Any, target: Target, supported: bool, note: str) -> None:
    """Allocate the sample pair and take the first sample, or record why GPM is not used."""
    if not supported:
        target.note = note
        return
    samples: list[Any] = []
    try:
        samples = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()]
        request = nvml.c_nvmlGpmMetricsGet_t()
        pair = GpmPair(samples[0], samples[1], request)
        _take_gpm_sample(nvml, target, pair.prev)
    except Exception as err:
        for sample in samples:
            _free(nvml, sample)
        if not is_soft(err, nvml):
            raise
        permission = is_code(err, nvml, "NVML_ERROR_NO_PERMISSION")
        target.note = "GPM not permitted" if permission else one_line(f"GPM unavailable: {err}", 80)
        return
    target.gpm = pair


def _take_gpm_sample(nvml: Any, target: Target, sample: Any) -> None:
    if target.gi_id is None:
        nvml.nvmlGpmSampleGet(target.parent, sample)
    else:
        nvml.nvmlGpmMigSampleGet(target.parent, target.gi_id, sample)


def read_gpm_dram_bw(nvml: Any, target: Target) -> float | None:
    """DRAM bandwidth utilisation (0–100 %) over the interval since the previous call."""
    pair = target.gpm
    assert pair is not None
    _take_gpm_sample(nvml, target, pair.cur)
    req = pair.request
    req.version = nvml.NVML_GPM_METRICS_GET_VERSION
    req.numMetrics = 1
    req.sample1 = pair.prev  # the older sample must be sample1
    req.sample2 = pair.cur
    req.metrics[0].metricId = nvml.NVML_GPM_METRIC_DRAM_BW_UTIL
    nvml.nvmlGpmMetricsGet(req)
    pair.prev, pair.cur = pair.cur, pair.prev
    metric = req.metrics[0]
    if metric.nvmlReturn != nvml.NVML_SUCCESS:
        return None
    value = float(metric.value)
    # NVML defines DRAM_BW_UTIL as a percentage of the theoretical peak, 0.0-100.0 (nvml.h), so a
    # sample cannot exceed peak: a reading past 100 is the two samples' timing jitter, and the panel
    # would print "≈5184 of 4800 GB/s". It is held to the defined range.
    return min(max(value, 0.0), 100.0) if math.isfinite(value) else None


def read_sample(nvml: Any, target: Target) -> dict[str, Any]:
    """The fields of one ``GpuSample`` (without ``t``)."""
    bw: float | None = None
    if target.gpm is not None:
        try:
            bw = read_gpm_dram_bw(nvml, target)
        except Exception as err:
            if not is_soft(err, nvml):
                raise
            # GPM stopped working on a live device (permission revoked, unsupported after a driver
            # change): fall back to the duty cycle for the rest of the session rather than go dark.
            log.warning("%s: GPM failed (%s); falling back to the memory duty cycle", target.label, err)
            release(nvml, [target])
            target.note = one_line(f"GPM failed: {err}", 80)
    source = target.source
    if source == MEM_DUTY_CYCLE:
        util = soft(nvml, target, "duty", nvml.nvmlDeviceGetUtilizationRates, target.handle)
        bw = None if util is None else float(util.memory)
        source = target.source  # "duty" may just have been found unsupported
    if bw is None:
        source = NO_SOURCE
    mem = soft(nvml, target, "mem", nvml.nvmlDeviceGetMemoryInfo, target.handle)
    power_mw = soft(nvml, target, "power", nvml.nvmlDeviceGetPowerUsage, target.parent)
    peak = target.peak_gbps
    return {
        "device": target.index,
        "name": target.name,
        "source": source,
        "bw_util_pct": bw,
        # GB/s only from real bandwidth utilisation: a duty cycle times peak is not a bandwidth.
        "est_gbps": bw / 100.0 * peak if source == GPM_DRAM_BW and peak is not None else None,
        "peak_gbps": peak,
        "mem_used_bytes": None if mem is None else int(mem.used),
        "mem_total_bytes": None if mem is None else int(mem.total),
        "sm_clock_mhz": soft(nvml, target, "smclk", nvml.nvmlDeviceGetClockInfo, target.parent, nvml.NVML_CLOCK_SM),
        "mem_clock_mhz": soft(nvml, target, "memclk", nvml.nvmlDeviceGetClockInfo, target.parent, nvml.NVML_CLOCK_MEM),
        "power_w": None if power_mw is None else power_mw / 1000.0,
    }


def release(nvml: Any, targets: list[Target]) -> None:
    """Free GPM sample buffers. Never raises: used on the way out of errors."""
    for target in targets:
        if target.gpm is not None:
            _free(nvml, target.gpm.prev)
            _free(nvml, target.gpm.cur)
            target.gpm = None


def _free(nvml: Any, sample: Any) -> None:
    try:
        nvml.nvmlGpmSampleFree(sample)
    except Exception as err:  # noqa: BLE001 - freeing on a lost device may fail; nothing to do
        log.debug("nvmlGpmSampleFree failed: %s", err)


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return "" if value is None else str(value)


def describe(targets: list[Target]) -> str:
    """One line: what the bandwidth panel shows for each target."""
    parts = []
    for t in targets:
        what = {GPM_DRAM_BW: "DRAM bandwidth (GPM)", MEM_DUTY_CYCLE: "memory duty cycle"}.get(
            t.source, "no memory counter"
        )
        extra = f", peak {t.peak_gbps:.0f} GB/s" if t.peak_gbps and t.source == GPM_DRAM_BW else ""
        why = f" ({t.note})" if t.note and t.source != GPM_DRAM_BW else ""
        parts.append(f"{t.label}: {what}{extra}{why}")
    return one_line("; ".join(parts), 300)
