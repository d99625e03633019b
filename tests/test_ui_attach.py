"""The dashboard in ``attach`` mode (``specterm attach`` without --headless), under ``App.run_test``.

The source here replays the events of a real attach session (``sample_sessions/attach_vllm_serve.jsonl``,
recorded from ``vllm serve`` with n-gram speculation and three clients at once, one of them a two-step
conversation) into the app's sink, as ``session.attach.Attach`` does from the socket; the socket half is
``tests/test_attach.py``'s, on a real server."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from test_ui_app import until

from specterm.events import RequestStarted
from specterm.session.reader import read_session
from specterm.ui.attach_app import make_attach_app
from specterm.ui.widgets.acceptance_panel import AcceptancePanel
from specterm.ui.widgets.gpu_panel import GpuPanel
from specterm.ui.widgets.latency_panel import LatencyPanel
from specterm.ui.widgets.request_list import FOLLOW, RequestList
from specterm.ui.widgets.session_header import SessionHeader
from specterm.ui.widgets.transcript import Transcript

SAMPLE = Path(__file__).resolve().parent.parent / "sample_sessions" / "attach_vllm_serve.jsonl"


class RecordedServer:
    """Stands in for the socket: the recorded events of a real server, pushed from a worker thread."""

    def __init__(self, sink) -> None:
        self.addr = "ipc:///recorded/vllm.sock"
        self.sink = sink
        self.stopped = threading.Event()
        data = read_session(SAMPLE)
        self.events = [data.header, *data.events]

    def run(self) -> None:
        for ev in self.events:
            if self.stopped.is_set():
                return
            self.sink(ev)

    def stop(self) -> None:
        self.stopped.set()


def attach_app():
    app = make_attach_app("ipc:///recorded/vllm.sock", gpu=False, theme_dirs=(), deterministic=True)
    app._attach_factory = RecordedServer
    return app


def test_attach_lists_the_servers_requests_and_pins_the_one_picked():
    started = [e for e in read_session(SAMPLE).events if isinstance(e, RequestStarted)]
    assert len(started) == 4 and any(e.turn == 2 for e in started)

    async def main():
        app = attach_app()
        async with app.run_test(size=(160, 48)) as pilot:
            requests = app.query_one(RequestList)
            await until(pilot, lambda: requests.option_count == 5)  # follow newest + 4 requests
            assert "ATTACHED" in app.query_one(SessionHeader).render().plain
            app.drain_now()
            rows = "\n".join(app.query_one(Transcript).render_line(y).text for y in range(48))
            step2 = next(e for e in started if e.turn == 2)
            assert f"conversation {step2.conversation} · step 2" in rows
            assert requests.get_option_at_index(0).id == FOLLOW
            # pick the first request the server ran: the panels' request column follows it
            first = started[0].request_id
            index = next(i for i in range(requests.option_count) if requests.get_option_at_index(i).id == first)
            requests.focus()
            requests.highlighted = index
            await pilot.press("enter")
            await until(pilot, lambda: app.state.pinned_request == first)
            assert app.state.current_request == first
            # the acceptance panel's request column is that request's (8 tokens; the session has 86)
            app.query_one(AcceptancePanel).flush()
            want = app.state.summary.requests[first].stats.tokens
            assert want != app.state.summary.session.tokens
            # back to following the newest
            requests.highlighted = 0
            await pilot.press("enter")
            await until(pilot, lambda: app.state.pinned_request is None)

    asyncio.run(main())


def panel_lines(panel) -> list[str]:
    """What a panel shows on screen now, row by row (inside its border and padding, cut as drawn)."""
    return [panel.render_line(y).text.rstrip() for y in range(panel.size.height)]


async def apply(pilot, events) -> None:
    """The events on the UI thread at once, panels flushed (as the snapshots feed them)."""
    await pilot.pause()
    pilot.app.apply_events(events, force=True)
    await pilot.pause()


def test_attach_panels_show_every_figure_uncut_at_80x24():
    """80×24 (an SSH terminal): the requests list shares the panels' row, so each panel has 16 cells.
    The acceptance panel's session column and the latency panel's last request are on screen whole."""
    from test_ui_snapshots import attached

    data = read_session(SAMPLE)

    async def main():
        app = attached((80, 24))
        async with app.run_test(size=(80, 24)) as pilot:
            await apply(pilot, [data.header, *data.events])
            summary = app.state.summary
            session, last = summary.session, summary.requests[app.state.current_request]
            acceptance = panel_lines(app.query_one(AcceptancePanel))
            latency = panel_lines(app.query_one(LatencyPanel))
            for line in acceptance + latency:
                assert "…" not in line, line
            rows = {line.split()[0]: line.split()[1:] for line in acceptance[1:4]}
            assert acceptance[0].split() == ["req", "sess"]
            assert rows == {
                "rate": [f"{last.stats.acceptance_rate:.2f}", f"{session.acceptance_rate:.2f}"],
                "len": [f"{last.stats.mean_acceptance_length:.2f}", f"{session.mean_acceptance_length:.2f}"],
                "tok": [str(last.stats.tokens), str(session.tokens)],
            }
            assert latency[:3] == [
                "last request",
                f"{last.wall_s:.2f}s TTFT {last.ttft_s * 1000:.0f}ms",
                f"{last.stats.tokens} tok {last.tokens_per_s:.1f} tok/s",
            ]
            assert latency[-1].strip(), "the step-time sparkline is the last row, not cut off below"

    asyncio.run(main())


WEIGHTS = {"target": 269_060_736, "draft": 0}
"""SmolLM2-135M in bf16 (the recorded server's model), as ``publish.hello_from`` sends it."""


def attach_gpu_panel(size, weight_bytes):
    """(the session's summary, the bandwidth panel's lines on screen) after the recorded server's
    events, its hello carrying ``weight_bytes`` (``None``: the server could not size its model); the
    panel's text fits it, in width and in height."""
    from test_ui_snapshots import attached

    data = read_session(SAMPLE)
    models = {**data.header.models, "weight_bytes": weight_bytes} if weight_bytes else data.header.models
    header = data.header.model_copy(update={"models": models})

    async def main():
        app = attached(size)
        async with app.run_test(size=size) as pilot:
            await apply(pilot, [header, *data.events])
            panel = app.query_one(GpuPanel)
            body = panel.body(panel.text_styles, panel.inner_width).plain.splitlines()
            assert len(body) <= panel.size.height and all(len(line) <= panel.inner_width for line in body), body
            return app.state.summary, panel_lines(panel)

    return asyncio.run(main())


def test_attach_bandwidth_panel_shows_served_rate_and_weights_per_token_at_80x24():
    summary, lines = attach_gpu_panel((80, 24), WEIGHTS)
    rate, span = summary.served_tokens_per_s(), summary.served_s
    traffic = summary.weight_traffic({"weight_bytes": WEIGHTS})
    assert rate == pytest.approx(summary.session.tokens / span) and 0 < span < 10
    assert lines[:2] == ["served tok/s", f"{rate:.1f} over {span:.1f}s"]
    assert lines[2].split() == ["per", "tok", f"{traffic.per_token / 1e6:.0f}", "MB"]
    assert lines[3].split() == ["tgt-only", "269", "MB"]
    assert lines[4].split() == ["ratio", f"×{traffic.ratio:.2f}"]
    assert lines[5].split() == ["read/s", f"{traffic.bytes_per_s / 1e9:.2f}", "GB"]
    assert lines[6] == "GPU stats off"  # no telemetry here (as for a TCP server's GPU): one short line


def test_attach_bandwidth_panel_says_why_weights_per_token_is_absent():
    """A server that could not size its model (a hub id, a GGUF file): the served rate still, and a
    short reason where the weights' rows would be; wide, the same on longer lines."""
    summary, lines = attach_gpu_panel((80, 24), None)
    rate = summary.served_tokens_per_s()
    assert lines[:5] == [
        "served tok/s",
        f"{rate:.1f} over {summary.served_s:.1f}s",
        "per tok        –",
        "no model size",
        "GPU stats off",
    ]
    _, lines = attach_gpu_panel((160, 48), None)
    assert lines[0].split() == ["served", "tok/s", f"{rate:.1f}", "over", f"{summary.served_s:.1f}s"]
    assert lines[1:4] == ["weights/token        –", "the server sent no model size", "GPU telemetry off"]
