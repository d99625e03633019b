"""Bandwidth: the weight bytes speculation reads per emitted token, on every machine; then the GPU's
memory bandwidth utilisation with its source named, memory used/total, clocks, power.

The weights' share comes from the session's counts (``stats.WeightTraffic``): per emitted token,
speculative against target-only, and the bytes per second of engine steps it took. It needs no GPU:
it is what speculation is for (fewer passes over the weights), so it is shown first.

``GpuSample.source`` says what ``bw_util_pct`` is: real DRAM bandwidth (GPM, Hopper+) or the memory
duty cycle (the share of time memory was busy — NOT bandwidth). The label always says which, so a
duty cycle is never read as bandwidth. ``gpu_status`` states (no driver, no GPU, permission ...) are
shown as one plain sentence; the app runs the same without a GPU.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from specterm.render import inert
from specterm.stats import WeightTraffic
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


def fmt_bytes(n: float) -> str:
    """Decimal units, as bandwidth is quoted (GB/s)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            x = n / scale
            return f"{x:.2f} {unit}" if x < 10 else f"{x:.1f} {unit}" if x < 100 else f"{x:.0f} {unit}"
    return f"{n:.0f} B"


SHORT_STATE_TEXT = {"no_driver": "no NVIDIA driver", "no_gpu": "no NVIDIA GPU"}
"""The same facts in a narrow panel (80 columns: ~23 cells), so they stay one line."""


class GpuPanel(Panel):
    def __init__(
        self, state: ViewState, *, idle_text: str = "waiting for GPU telemetry", id: str | None = None
    ) -> None:
        super().__init__("bandwidth", id=id)
        self.state = state
        self.idle_text = idle_text

    def weights(self, styles: dict[str, Style], width: int, out: Text, traffic: WeightTraffic | None) -> None:
        if traffic is None:
            return
        # (label, value) rows; short labels where the panel is narrow (80 columns: ~23 cells)
        labels = (
            ("weights/token ", "target-only   ", "read at       ")
            if width >= 30
            else ("per tok  ", "tgt-only ", "read at  ")
        )
        out.append(labels[0], styles["meta"])
        out.append(f"{fmt_bytes(traffic.per_token):>8}", styles["body"])
        out.append(f" ×{traffic.ratio:.2f}\n", styles["title"])
        out.append(labels[1], styles["meta"])
        out.append(f"{fmt_bytes(traffic.target_bytes):>8}\n", styles["body"])
        if (rate := traffic.bytes_per_s) is not None:
            out.append(labels[2], styles["meta"])
            out.append(f"{fmt_bytes(rate):>8}/s\n", styles["body"])

    def body(self, styles: dict[str, Style], width: int) -> Text:
        out = Text(no_wrap=False, overflow="fold")
        session = self.state.session
        traffic = self.state.summary.weight_traffic(session.models if session else None)
        self.weights(styles, width, out, traffic)
        self.gpu(styles, width, out, traffic)
        out.rstrip()
        return out

    def gpu(self, styles: dict[str, Style], width: int, out: Text, traffic: WeightTraffic | None) -> None:
        status = self.state.gpu_status
        if status is not None and status.state != "ok":
            if status.state in ("no_driver", "no_gpu"):
                # No GPU here: one short line (the weights' figures above are the panel's point on
                # this machine); `specterm doctor` names the library or driver that is missing.
                text = STATE_TEXT[status.state]
                out.append(text if len(text) <= width else SHORT_STATE_TEXT[status.state], styles["meta"])
                return
            out.append(STATE_TEXT.get(status.state, f"GPU: {inert(status.state)}"), styles["warning"])
            if status.message:
                out.append("\n")
                out.append(inert(status.message), styles["meta"])
            return
        if not self.state.gpu:
            out.append(self.idle_text, styles["meta"])
            return
        for device, s in sorted(self.state.gpu.items()):
            if out and not out.plain.endswith("\n"):
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
                    if traffic is not None and (rate := traffic.bytes_per_s) is not None and s.est_gbps > 0:
                        # the weights' share of what the device measured (the rest: KV cache, activations)
                        out.append(f"weights {min(rate / 1e9 / s.est_gbps, 1.0):.0%} of it\n", styles["meta"])
            out.append("memory ", styles["meta"])
            out.append(f"{fmt_bytes_gib(s.mem_used_bytes)} / {fmt_bytes_gib(s.mem_total_bytes)} GiB\n", styles["body"])
            clocks = []
            if s.sm_clock_mhz is not None:
                clocks.append(f"SM {s.sm_clock_mhz}")
            if s.mem_clock_mhz is not None:
                clocks.append(f"mem {s.mem_clock_mhz}")
            if clocks:
                line = " · ".join(clocks) + " MHz"
                if len(line) + 7 <= width:  # the label only where it fits: a narrow panel keeps one line
                    out.append("clocks ", styles["meta"])
                out.append(line, styles["body"])
            if s.power_w is not None:
                out.append(f"\npower {s.power_w:.0f} W", styles["body"])
            hist = self.state.gpu_history.get(device)
            if hist:
                out.append("\n")
                out.append(sparkline(list(hist), width, lo=0.0, hi=100.0), styles["title"])
