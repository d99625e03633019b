"""GPU telemetry from NVML: the sampler thread, the device probe, and the bandwidth formula.

``bw_util_pct`` is real DRAM bandwidth utilisation only when ``source == "gpm_dram_bw"`` (GPM,
Hopper and newer); ``"mem_duty_cycle"`` is the percent of time memory was being read or written,
which is *not* bandwidth. No textual imports here.
"""

from specterm.telemetry.devices import GPM_DRAM_BW, MEM_DUTY_CYCLE, NO_SOURCE, PANEL_LABELS, peak_bandwidth_gbps
from specterm.telemetry.errors import classify
from specterm.telemetry.probe import probe
from specterm.telemetry.sampler import GpuSampler

__all__ = [
    "GPM_DRAM_BW",
    "MEM_DUTY_CYCLE",
    "NO_SOURCE",
    "PANEL_LABELS",
    "GpuSampler",
    "classify",
    "peak_bandwidth_gbps",
    "probe",
]
