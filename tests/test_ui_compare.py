"""The compare split view (pytest-textual-snapshot), driven by the recorded compare session in
``sample_sessions/`` rather than a live engine, so it is deterministic: events are applied on the UI
thread directly, no replayer clock, animations off."""

from __future__ import annotations

import asyncio
from pathlib import Path

from specterm.events import SpecStep
from specterm.session.reader import read_session
from specterm.ui.compare_app import make_compare_app

SAMPLE = Path(__file__).resolve().parent.parent / "sample_sessions" / "compare_agent.jsonl"
WIDE = (160, 48)


def _app(events=None):
    data = read_session(SAMPLE)
    events = data.events if events is None else events
    app = make_compare_app(data.header, theme_dirs=(), deterministic=True)

    async def run_before(pilot) -> None:
        await pilot.pause()
        app.apply_events(events)
        await pilot.pause()

    return app, run_before


def test_split_view_snapshot(snap_compare):
    app, run_before = _app()
    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)


def test_greedy_mismatch_shows_a_red_banner():
    events = list(read_session(SAMPLE).events)
    i = next(i for i, e in enumerate(events) if isinstance(e, SpecStep) and e.lane == "b" and e.tokens)
    tok = events[i].tokens[0]
    events[i] = events[i].model_copy(update={"tokens": [tok.model_copy(update={"id": tok.id + 1}), *events[i].tokens[1:]]})
    app, _ = _app(events)
    asyncio.run(_check_banner(app, events))


async def _check_banner(app, events) -> None:
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        banner = app.query_one("#compare-banner")
        assert not banner.has_class("-shown")
        app.apply_events(events)
        await pilot.pause()
        assert banner.has_class("-shown") and "GREEDY OUTPUTS DIFFER" in str(banner.render())
        # Both transcripts got their own side's blocks.
        assert app.query_one("#transcript-a").model.entries and app.query_one("#transcript-b").model.entries
