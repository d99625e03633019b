"""A one-shot look at the GPUs for ``specterm doctor``: what the bandwidth panel will show for each.

Runs the same discovery as the sampler, so the two never disagree about a device's source.
"""

from __future__ import annotations

from typing import Any

from specterm.telemetry import devices
from specterm.telemetry.errors import OK, classify

NO_GPU_PANEL = "nothing: no NVIDIA GPU"


def probe(nvml: Any = None) -> dict[str, Any]:
    """``{"state", "message", "driver_version", "panel", "devices": [...]}``; never raises.

    ``state`` is a ``GpuStatus`` state; ``panel`` summarises what the bandwidth panel will show.
    """
    result: dict[str, Any] = {"state": OK, "message": "", "driver_version": None, "panel": NO_GPU_PANEL, "devices": []}
    initialised = False
    targets: list[devices.Target] = []
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
        initialised = True
        result["driver_version"] = (
            devices._text(devices.soft(nvml, None, "driver", nvml.nvmlSystemGetDriverVersion)) or None
        )
        targets = devices.discover(nvml)
        result["message"] = devices.describe(targets)
        for t in targets:
            mem = devices.soft(nvml, t, "mem", nvml.nvmlDeviceGetMemoryInfo, t.handle)
            result["devices"].append(
                {
                    "index": t.index,
                    "name": t.name,
                    "mig_gpu_instance": t.gi_id,
                    "source": t.source,
                    "panel": devices.PANEL_LABELS[t.source],
                    "why": t.note or None,
                    "peak_gbps": None if t.peak_gbps is None else round(t.peak_gbps, 1),
                    "mem_total_bytes": None if mem is None else int(mem.total),
                }
            )
        sources = {t.source for t in targets}
        result["panel"] = " / ".join(devices.PANEL_LABELS[s] for s in sorted(sources))
    except Exception as err:  # noqa: BLE001 - doctor reports, it does not crash
        state, message = classify(err, nvml)
        result.update(state=state, message=message, panel=NO_GPU_PANEL)
    finally:
        if nvml is not None:
            devices.release(nvml, targets)
            if initialised:
                try:
                    nvml.nvmlShutdown()
                except Exception:  # noqa: BLE001 - best effort
                    pass
    return result
