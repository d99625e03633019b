"""``specterm replay FILE --report report.html``: one self-contained HTML file to share a session.

For someone without a terminal: the verdict-coloured transcript (the terminal's colours and looks,
from ``render.VERDICT_STYLES``), the findings (the detectors run as every replay runs them), and
inline SVG plots of acceptance by position (unconditional and conditional), acceptance by region of
a structured output, k and batch size over the steps (when the steps carry them) and step latency.
No script, no stylesheet or font from elsewhere: it opens from a file, offline.

Every text that comes from the file (prompts, tokens, request ids, finding messages, model names)
goes through ``html.escape``. The page is built whole in memory, then written to a temporary file
beside the target and renamed over it, so a failed write leaves no half page; the session file is
only ever read.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any

from specterm.diagnose import Diagnoser, Thresholds
from specterm.errors import SpectermError
from specterm.regions import REGIONS
from specterm.render import VERDICT_STYLES, inert
from specterm.session.reader import read_session
from specterm.stats import SessionSummary, fmt_opt

_POINTS = 600
"""Most points a time plot draws: a long session is bucketed (latency: the bucket's max, so a spike
stays visible; k and batch size: the mean)."""
_W, _H, _PAD = 640, 180, 36


def _css() -> str:
    rules = []
    for verdict, style in VERDICT_STYLES.items():
        css = [f"color:{style.color.get_truecolor().hex}"] if style.color else []
        css += ["font-weight:bold"] * bool(style.bold) + ["font-style:italic"] * bool(style.italic)
        decorations = ["underline"] * bool(style.underline) + ["line-through"] * bool(style.strike)
        css += [f"text-decoration:{' '.join(decorations)}"] if decorations else []
        rules.append(f".v-{verdict}{{{';'.join(css)}}}")
    return "\n".join(
        [
            "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:60em;color:#222;background:#fdfdfd}",
            "pre.t{white-space:pre-wrap;font-family:ui-monospace,monospace;background:#f4f4f4;padding:.6em}",
            "h3{margin-bottom:.2em}.asked{color:#555}.legend span{margin-right:1em}",
            "li.finding.error{color:#b00}svg{background:#fff;border:1px solid #ddd;margin:.4em 0}",
            "table{border-collapse:collapse}td,th{padding:.15em .6em;text-align:left}",
            *rules,
        ]
    )


def collect(events: list[Any], thresholds: Thresholds | None = None) -> tuple[SessionSummary, dict[str, Any]]:
    """The summary (findings recomputed, as ``diagnose.diagnosing`` does) and what the page needs
    beyond it: per request its lane, question and tokens, in stream order; per step k, batch size."""
    summary, diagnoser = SessionSummary(), Diagnoser(thresholds)
    requests: dict[str, dict[str, Any]] = {}
    ks: list[int] = []
    batches: list[int | None] = []
    for event in events:
        if event.type == "finding":
            continue  # recorded live: recomputed here, with today's thresholds
        summary.add(event)
        for finding in diagnoser.feed(event):
            summary.add(finding)
        rid = getattr(event, "request_id", None)
        if event.type == "user_message":
            requests.setdefault(rid, {"lane": event.lane, "tokens": []})["asked"] = event.text
        elif event.type == "spec_step":
            requests.setdefault(rid, {"lane": event.lane, "tokens": []})["tokens"].extend(event.tokens)
            ks.append(event.k)
            batches.append(event.batch_size)
    return summary, {"requests": requests, "k": ks, "batch": batches}


def _bucket(values: list[float], how: Any) -> list[float]:
    if len(values) <= _POINTS:
        return values
    size = -(-len(values) // _POINTS)
    return [how(values[i : i + size]) for i in range(0, len(values), size)]


def _frame(title: str, top: float, unit: str, body: str, legend: str = "") -> str:
    ticks = "".join(
        f'<text x="{_PAD - 4}" y="{_H - _PAD - f * (_H - 2 * _PAD) + 4:.1f}" font-size="10" '
        f'text-anchor="end">{escape(fmt_opt(top * f, ".3g"))}</text>'
        for f in (0, 0.5, 1)
    )
    return (
        f'<figure><svg role="img" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}">'
        f"<title>{escape(title)}</title>"
        f'<text x="{_PAD}" y="14" font-size="12">{escape(title)} ({escape(unit)}){legend}</text>'
        f'<line x1="{_PAD}" y1="{_H - _PAD}" x2="{_W - 8}" y2="{_H - _PAD}" stroke="#888"/>{ticks}{body}</svg></figure>'
    )


def _line_chart(title: str, series: list[tuple[str, list[float], str]], unit: str) -> str:
    """One polyline per (name, values, colour), values over the steps (x: step order)."""
    top = max((max(v) for _, v, _ in series if v), default=0.0) or 1.0
    body, legend = [], []
    for name, values, colour in series:
        if not values:
            continue
        step = (_W - 8 - _PAD) / max(len(values) - 1, 1)
        pts = " ".join(
            f"{_PAD + i * step:.1f},{_H - _PAD - v / top * (_H - 2 * _PAD):.1f}" for i, v in enumerate(values)
        )
        body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.2" points="{pts}"/>')
        legend.append(f'<tspan fill="{colour}"> ■ {escape(name)}</tspan>')
    return _frame(title, top, unit, "".join(body), "".join(legend))


def _bar_chart(title: str, labels: list[str], series: list[tuple[str, list[float | None], str]]) -> str:
    """Grouped bars of rates (0–1) per label: one bar per series."""
    n = max(len(labels), 1)
    group = (_W - 8 - _PAD) / n
    width = group * 0.8 / max(len(series), 1)
    body, legend = [], []
    for j, (name, values, colour) in enumerate(series):
        legend.append(f'<tspan fill="{colour}"> ■ {escape(name)}</tspan>')
        for i, v in enumerate(values):
            if v is None:
                continue
            h = v * (_H - 2 * _PAD)
            x = _PAD + i * group + group * 0.1 + j * width
            body.append(
                f'<rect x="{x:.1f}" y="{_H - _PAD - h:.1f}" width="{width:.1f}" height="{h:.1f}" fill="{colour}">'
                f"<title>{escape(name)} {escape(labels[i])}: {v:.2f}</title></rect>"
            )
    for i, label in enumerate(labels):
        x = _PAD + (i + 0.5) * group
        body.append(
            f'<text x="{x:.1f}" y="{_H - _PAD + 14}" font-size="10" text-anchor="middle">{escape(label)}</text>'
        )
    return _frame(title, 1.0, "share", "".join(body), "".join(legend))


def _transcript(requests: dict[str, dict[str, Any]]) -> str:
    out = ['<p class="legend">' + "".join(f'<span class="v-{v}">{v}</span>' for v in VERDICT_STYLES) + "</p>"]
    for rid, req in requests.items():
        lane = f" (side {req['lane'].upper()})" if req.get("lane") else ""
        out.append(f'<h3 id="r-{escape(rid)}">request {escape(rid)}{escape(lane)}</h3>')
        if req.get("asked"):
            out.append(f'<p class="asked">asked: {escape(req["asked"])}</p>')
        spans, run, verdict = [], [], None
        for tok in [*req["tokens"], None]:  # runs of one verdict share a span (a smaller page)
            if tok is None or tok.verdict != verdict:
                if run:
                    spans.append(f'<span class="v-{verdict}">{escape("".join(run))}</span>')
                run, verdict = [], None if tok is None else tok.verdict
            if tok is not None:
                run.append(tok.text)
        out.append(f'<pre class="t">{"".join(spans)}</pre>')
    return "\n".join(out)


def render_report(data: Any, thresholds: Thresholds | None = None) -> str:
    """The page for ``data`` (a ``SessionData``), as one string."""
    summary, extra = collect(data.events, thresholds)
    s = summary.session
    models = data.header.models or {}
    pair = " → ".join(str(models[k]) for k in ("draft", "target") if models.get(k)) or "–"
    rows = [
        ("models", pair),
        ("method", f"{models.get('method', '–')}, k = {models.get('num_speculative_tokens', '–')}"),
        ("tokens", "  ".join(f"{v} {n}" for v, n in s.by_verdict.items())),
        ("acceptance rate", fmt_opt(s.acceptance_rate, ".1%")),
        ("mean acceptance length", fmt_opt(s.mean_acceptance_length)),
        ("acceptance by region", s.where.region_line() or "–"),
    ]
    table = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    findings = "".join(
        f'<li class="finding {escape(f.severity)}"><b>{escape(f.kind)}</b>'
        + (f' <a href="#r-{escape(f.request_id)}">{escape(f.request_id)}</a>' if f.request_id else "")
        + f": {escape(f.message)}</li>"
        for f in summary.findings
    )
    where = "".join(f"<li>{escape(line)}</li>" for line in s.where.correction_lines())
    positions = [str(i) for i in range(1, len(s.per_position) + 1)]
    plots = [
        _bar_chart(
            "acceptance by position",
            positions,
            [("unconditional", list(s.per_position), "#4a7"), ("conditional", s.conditional_per_position, "#36c")],
        )
    ]
    rates = s.where.region_acceptance()
    if rates:
        plots.append(
            _bar_chart("acceptance by region", [REGIONS[r] for r in rates], [("", list(rates.values()), "#4a7")])
        )
    k_series = [("k", _bucket([float(k) for k in extra["k"]], lambda b: sum(b) / len(b)), "#36c")]
    if any(b is not None for b in extra["batch"]):
        batch = [float(b or 0) for b in extra["batch"]]
        k_series.append(("batch size", _bucket(batch, lambda b: sum(b) / len(b)), "#c63"))
    plots.append(_line_chart("k and batch size over the steps", k_series, "per step"))
    latency = _bucket([1e3 * w for w in summary.step_wall_s], max)
    plots.append(_line_chart("step latency over the steps", [("latency", latency, "#c33")], "ms"))
    title = f"specterm session {Path(str(data.path)).name}"
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{_css()}</style></head><body>\n<h1>{escape(title)}</h1>\n<table>{table}</table>\n"
        f"<h2>Findings ({len(summary.findings)})</h2>\n<ul>{findings or '<li>none</li>'}</ul>\n"
        f"<h2>Where the draft loses</h2>\n<ul>{where or '<li>no correction</li>'}</ul>\n{''.join(plots)}\n"
        f"<h2>Transcript</h2>\n{_transcript(extra['requests'])}\n</body></html>\n"
    )


def write_report(data: Any, target: str | os.PathLike[str], thresholds: Thresholds | None = None) -> Path:
    """Write the page to ``target``; a ``SpectermError`` (one line) when it cannot be written."""
    target = Path(target)
    if target.exists() and Path(str(data.path)).exists() and target.samefile(Path(str(data.path))):
        raise SpectermError(f"--report {target} is the session file itself: choose another path")
    page = render_report(data, thresholds)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    except OSError as err:
        raise SpectermError(f"cannot write the report {target}: {err.strerror or err}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would keep a shared report from its readers
        os.replace(tmp, target)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise SpectermError(f"cannot write the report {target}: {err.strerror or err}") from None
    return target


def report_command(path: str, target: str, thresholds: Thresholds | None, warn: Callable[[str], None]) -> int:
    """``replay FILE --report HTML``: read the session (warnings through ``warn``), write the page."""
    data = read_session(path)
    for warning in data.warnings:
        warn(warning)
    print(f"specterm: wrote {inert(str(write_report(data, target, thresholds)))}")
    return 0
