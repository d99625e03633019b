"""GPU: memory bandwidth utilisation with its source named, memory used/total, clocks, power.

``GpuSample.source`` says what ``bw_util_pct`` is: real DRAM bandwidth (GPM, Hopper+) or the memory
duty cycle (the share of time memory was busy — NOT bandwidth). The label always says which, so a
duty cycle is never read as bandwidth. ``gpu_status`` states (no driver, no GPU, permission ...) are
shown as one plain sentence; the app runs the same without a GPU.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from specterm.render import inert
from specterm.telemetry.devices import SOURCE_LABELS
from specterm.ui.charts import bar, fmt_bytes_gib, sparkline
from specterm.ui.state import ViewState
from specterm.ui.widgets.panel import Panel

STATE_TEXT = {
    "no_driver": "no NVIDIA GPU (no driver)",
    "no_gpu": "no NVIDIA GPU",
    "permission": "GPU counters not permitted",
    "device_lost": "GPU lost — retrying",
    "error": "GPU telemetry error",
}


class GpuPanel(Panel):
    def __init__(self, state: ViewState, *, idle_text: str = "waiting for GPU telemetry", id: str | None = None) -> None:
        super().__init__("GPU", id=id)
        self.state = state
        self.idle_text = idle_text

    def body(self, styles: dict[str, Style], width: int) -> Text:
        out = Text(no_wrap=False, overflow="fold")
        status = self.state.gpu_status
        if status is not None and status.state != "ok":
            if status.state in ("no_driver", "no_gpu"):
                # No GPU here: one statement, not a headline and then the same fact again. The
                # sampler's message is the precise one (which library, or a driver not loaded).
                head, message = STATE_TEXT[status.state], inert(status.message)
                line = message if message.startswith(head) else (f"{head}: {message}" if message else head)
                out.append(line, styles["warning"])
                return out
            out.append(STATE_TEXT.get(status.state, f"GPU: {inert(status.state)}"), styles["warning"])
            if status.message:
                out.append("\n")
                out.append(inert(status.message), styles["meta"])
            return out
        if not self.state.gpu:
            out.append(self.idle_text, styles["meta"])
            return out
        for device, s in sorted(self.state.gpu.items()):
            if out:
                out.append("\n")
            out.append(f"{device} ", styles["meta"])
            out.append(inert(s.name or "GPU") + "\n", styles["title"])
            out.append(SOURCE_LABELS.get(s.source, (inert(s.source),))[0] + "\n", styles["meta"])
            if s.bw_util_pct is not None:
                frac = s.bw_util_pct / 100
                out.append(bar(frac, max(4, width - 6)), styles["title"])
                out.append(f"{s.bw_util_pct:5.0f}%\n", styles["body"])
                if s.source == "gpm_dram_bw" and s.est_gbps is not None and s.peak_gbps:
                    out.append(f"≈{s.est_gbps:.0f} of {s.peak_gbps:.0f} GB/s\n", styles["body"])
            out.append("memory ", styles["meta"])
            out.append(f"{fmt_bytes_gib(s.mem_used_bytes)} / {fmt_bytes_gib(s.mem_total_bytes)} GiB\n", styles["body"])
            clocks = []
            if s.sm_clock_mhz is not None:
                clocks.append(f"SM {s.sm_clock_mhz}")
            if s.mem_clock_mhz is not None:
                clocks.append(f"mem {s.mem_clock_mhz}")
            if clocks:
                out.append("clocks ", styles["meta"])
                out.append(" · ".join(clocks) + " MHz", styles["body"])
            if s.power_w is not None:
                out.append(f"\npower {s.power_w:.0f} W", styles["body"])
            hist = self.state.gpu_history.get(device)
            if hist:
                out.append("\n")
                out.append(sparkline(list(hist), width, lo=0.0, hi=100.0), styles["title"])
        return out
