"""The panels stay legible at every terminal width from 80 to 200 columns: no line is cut at the
panel's edge, and the latency table's columns never run together (issue 35: "3.86s3305ms")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from doubles import FakeEngine, demo_events, demo_header, fake_gpu_samples

from specterm.events import GpuStatus
from specterm.session.reader import read_session
from specterm.ui.app import make_app
from specterm.ui.widgets.acceptance_panel import AcceptancePanel
from specterm.ui.widgets.gpu_panel import GpuPanel
from specterm.ui.widgets.latency_panel import LatencyPanel

SAMPLES = Path(__file__).resolve().parent.parent / "sample_sessions"


def bodies(width: int, events) -> dict[str, list[str]]:
    async def main():
        app = make_app(engine=FakeEngine(), header=demo_header(), gpu=False, theme_dirs=(), deterministic=True)
        async with app.run_test(size=(width, 48)) as pilot:
            app.apply_events(events, force=True)
            await pilot.pause()
            out = {}
            for cls in (AcceptancePanel, LatencyPanel, GpuPanel):
                panel = app.query_one(cls)
                out[cls.__name__] = (
                    panel.inner_width,
                    panel.body(panel.text_styles, panel.inner_width).plain.splitlines(),
                )
            return out

    return asyncio.run(main())


@pytest.mark.parametrize("width", [80, 100, 120, 160, 200])
@pytest.mark.parametrize("session", ["demo", "agent"])
def test_panel_lines_fit_and_columns_stay_apart(width, session):
    if session == "demo":
        events = [*fake_gpu_samples(3), *demo_events()]
    else:  # a real smollm2-agent session: seconds-long steps, TTFTs over a second
        data = read_session(SAMPLES / "sql_agent_multistep.jsonl")
        events = [GpuStatus(state="no_driver", message="libnvidia-ml.so.1 not found"), *data.events]
    for name, (inner, lines) in bodies(width, events).items():
        assert lines, name
        for line in lines:
            assert len(line) <= inner, (width, name, line)
            assert "…" not in line, (width, name, line)
    inner, lines = bodies(width, events)["LatencyPanel"]
    header, rows = lines[0].split(), [ln for ln in lines[1:] if ln[:1].isdigit()]
    assert rows, lines
    for row in rows:  # "1 call" is two words: every other column is exactly one
        assert len(row.split()) == len(header) + 1, (width, row)


@pytest.mark.parametrize("width", [80, 90, 100, 160])
def test_attach_panel_lines_fit(width):
    """``specterm attach`` below 100 columns: the requests list shares the panels' row (16 cells each
    at 80), and still no line is cut at a panel's edge nor runs below its bottom (24 rows)."""
    from test_ui_snapshots import attached

    data = read_session(SAMPLES / "attach_vllm_serve.jsonl")
    models = {**data.header.models, "weight_bytes": {"target": 269_060_736, "draft": 0}}

    async def main():
        app = attached((width, 24))
        async with app.run_test(size=(width, 24)) as pilot:
            app.apply_events([data.header.model_copy(update={"models": models}), *data.events], force=True)
            await pilot.pause()
            for cls in (AcceptancePanel, LatencyPanel, GpuPanel):
                panel = app.query_one(cls)
                lines = panel.body(panel.text_styles, panel.inner_width).plain.splitlines()
                assert lines, cls.__name__
                for line in lines:
                    assert len(line) <= panel.inner_width and "…" not in line, (width, cls.__name__, line)
                if width < 100:  # the narrow row: panels of a fixed height
                    assert len(lines) <= panel.size.height, (width, cls.__name__, lines)

    asyncio.run(main())
