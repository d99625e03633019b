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
    events[i] = events[i].model_copy(
        update={"tokens": [tok.model_copy(update={"id": tok.id + 1}), *events[i].tokens[1:]]}
    )
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


def test_live_compare_fills_both_sides_and_records(tmp_path):
    """The live path's wiring (thread worker → bridge → both transcripts, recorder, engines closed),
    with the UI tests' scripted engine (``FakeEngine``, named as a fake) on both sides; the real
    engine behind the same ``CompareRun`` is covered in ``test_compare.py``."""
    from doubles import FakeEngine

    from specterm.bench.compare import CompareRun, compare_header
    from specterm.engine.base import EngineConfig, GenerationParams
    from specterm.session.recorder import Recorder

    a = EngineConfig(target="t", draft="d", method="draft_model")
    b = a.model_copy(update={"method": None})
    params = GenerationParams(max_tokens=8)
    header = compare_header(a, b, rounds=2, params=params, request={"prompt": "hi", "raw": True})
    engines: list[FakeEngine] = []
    run = CompareRun(
        a,
        b,
        "hi",
        params=params,
        rounds=2,
        raw=True,
        loader=lambda config, clock: engines.append(FakeEngine()) or engines[-1],
    )
    recorder = Recorder(tmp_path / "live.jsonl", header)
    app = make_compare_app(header, run=run, recorder=recorder, theme_dirs=())

    async def drive() -> None:
        async with app.run_test(size=WIDE) as pilot:
            for _ in range(300):
                if app.sub_title == "done":
                    break
                await pilot.pause(0.02)
            await pilot.pause()
            assert app.sub_title == "done"
            assert app.tally.rounds_done == 2 and app.tally.mismatch is None
            assert app.query_one("#transcript-a").model.entries and app.query_one("#transcript-b").model.entries

    asyncio.run(drive())
    assert len(engines) == 2 and all(e.closed for e in engines)
    recorded = read_session(tmp_path / "live.jsonl")
    assert {e.lane for e in recorded.events if e.type == "user_message"} == {"a", "b"}


def test_replay_plays_the_recording_into_the_split_view():
    """``specterm replay`` of a compare session: the replayer thread feeds the same view."""
    import math

    data = read_session(SAMPLE)
    app = make_compare_app(data.header, events=data.events, speed=math.inf, theme_dirs=())

    async def drive() -> None:
        async with app.run_test(size=WIDE) as pilot:
            for _ in range(300):
                if app.tally.rounds_done == 2 and not len(app.bridge):
                    break
                await pilot.pause(0.02)
            assert app.tally.rounds_done == 2 and app.tally.mismatch is None
            assert "wins" in str(app.query_one("#compare-verdict").render())

    asyncio.run(drive())
