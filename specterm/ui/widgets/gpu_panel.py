"""Bandwidth: the weight bytes speculation reads per emitted token, on every machine; then the GPU's
memory bandwidth utilisation with its source named, memory used/total, clocks, power.

The weights' share comes from the session's counts (``stats.WeightTraffic``): per emitted token,
speculative against target-only, and the bytes per second of engine steps it took. It needs no GPU:
it is what speculation is for (fewer passes over the weights), so it is shown first.

Attached to a server (``attach``), the output tokens per second it served all its clients come first,
averaged over the time it was seen serving, which the row names ("over 42s";
``SessionSummary.served_tokens_per_s``). Where the server sent no weight sizes (it reads them from its
model's safetensors headers; a hub id not in its cache, a GGUF file or an older specterm gives none),
a short line says so instead of the weights' rows. Its GPU is sampled only where it is this machine's
(a Unix socket); otherwise one short line says telemetry is off.

``GpuSample.source`` says what ``bw_util_pct`` is: real DRAM bandwidth (GPM, Hopper+) or the memory
duty cycle (the share of time memory was busy — NOT bandwidth). The label always says which, so a
duty cycle is never read as bandwidth. ``gpu_status`` states (no driver, no GPU, permission ...) are
shown as one plain sentence; the app runs the same without a GPU.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from specterm.render import inert
from specterm.stats import WeightTraffic, fmt_opt
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
SHORT_IDLE_TEXT = {"GPU telemetry off": "GPU stats off", "waiting for GPU telemetry": "waiting for GPU"}
"""The app's idle texts where the panel is narrower (``attach`` at 80 columns: 16 cells)."""

WEIGHT_LABELS = {
    "wide": ("weights/token ", "target-only   ", "read at       "),
    "narrow": ("per tok  ", "tgt-only ", "read at  "),  # 80 columns: ~23 cells
    "tight": ("per tok ", "tgt-only", "read/s  ", "ratio   "),  # attach at 80 columns: 16 cells
}
"""Row labels by panel width; in ``tight`` the ratio has its own row and "/s" moves into a label."""


def fmt_span(s: float) -> str:
    """At most 5 characters: ``3.1s``, ``42s``, ``17min``, ``2.5h``, ``31h``."""
    if s < 100:
        return f"{s:.1f}s" if s < 10 else f"{s:.0f}s"
    if s < 3600:
        return f"{s / 60:.0f}min"
    return f"{s / 3600:.1f}h" if s < 36_000 else f"{s / 3600:.0f}h"


class GpuPanel(Panel):
    def __init__(
        self, state: ViewState, *, idle_text: str = "waiting for GPU telemetry", id: str | None = None
    ) -> None:
        super().__init__("bandwidth", id=id)
        self.state = state
        self.idle_text = idle_text

    def served(self, styles: dict[str, Style], width: int, out: Text) -> None:
        """``attach``: the server's output tokens per second and the time they were averaged over."""
        summary = self.state.summary
        rate, span = summary.served_tokens_per_s(), summary.served_s
        value = fmt_opt(rate, ".1f" if rate is not None and rate < 100 else ".0f")
        over = "" if span is None else f" over {fmt_span(span)}"
        label = "served tok/s  "
        if len(label) + 8 + len(over) <= width:  # one row, lined up with the weights' rows below
            out.append(label, styles["meta"])
            value = f"{value:>8}"
        else:
            out.append("served tok/s\n", styles["meta"])
        out.append(value, styles["body"])
        out.append(over + "\n", styles["meta"])

    def weights(self, styles: dict[str, Style], width: int, out: Text, traffic: WeightTraffic | None) -> None:
        tier = "wide" if width >= 30 else "narrow" if width >= 23 else "tight"
        labels = WEIGHT_LABELS[tier]
        if traffic is None:
            if self.state.mode == "attach" and self.state.summary.session.tokens:
                # tokens but no traffic: the server sent no weight sizes (not a wait for the first token)
                out.append(f"{labels[0]}{'–':>8}\n", styles["meta"])
                out.append("the server sent no model size\n" if width >= 29 else "no model size\n", styles["meta"])
            return
        ratio = f"×{traffic.ratio:.2f}"
        out.append(labels[0], styles["meta"])
        out.append(f"{fmt_bytes(traffic.per_token):>8}", styles["body"])
        out.append("\n" if tier == "tight" else f" {ratio}\n", styles["title"])
        out.append(labels[1], styles["meta"])
        out.append(f"{fmt_bytes(traffic.target_bytes):>8}\n", styles["body"])
        if tier == "tight":
            out.append(labels[3], styles["meta"])
            out.append(f"{ratio:>8}\n", styles["title"])
        if (rate := traffic.bytes_per_s) is not None:
            out.append(labels[2], styles["meta"])
            out.append(f"{fmt_bytes(rate):>8}" + ("\n" if tier == "tight" else "/s\n"), styles["body"])

    def body(self, styles: dict[str, Style], width: int) -> Text:
        out = Text(no_wrap=False, overflow="fold")
        session = self.state.session
        traffic = self.state.summary.weight_traffic(session.models if session else None)
        if self.state.mode == "attach":
            self.served(styles, width, out)
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
            text = self.idle_text
            out.append(text if len(text) <= width else SHORT_IDLE_TEXT.get(text, text), styles["meta"])
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
