"""The dashboard's findings: the header's ⚑ badge (red, and saying so, on a mismatch), F6's list,
and choosing a finding jumps to its request. On a real recorded session with its reconciliation
made to fail (tests/test_diagnose.py builds it)."""

from __future__ import annotations

import asyncio

from test_diagnose import _spliced_file
from test_ui_app import until

from specterm.ui.app import make_app
from specterm.ui.screens.findings import FindingsScreen
from specterm.ui.widgets.session_header import SessionHeader


def test_badge_list_and_jump(tmp_path):
    path = _spliced_file(tmp_path)

    async def main():
        app = make_app(replay=path, speed=0, theme_dirs=(), deterministic=True)
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: app.replayer.finished)
            app.drain_now()
            header = app.query_one(SessionHeader).render().plain
            await pilot.press("f6")
            await until(pilot, lambda: isinstance(app.screen, FindingsScreen))
            shown = len(app.screen.findings)
            app.state.current_request = None
            await pilot.press("enter")
            await until(pilot, lambda: not isinstance(app.screen, FindingsScreen))
            return header, shown, app.state.current_request

    header, shown, current = asyncio.run(main())
    assert "⚑1 mismatch F6" in header  # the recorded (stale) finding was dropped for the recomputed one
    assert shown == 1
    assert current == "ef359d5b"


def test_findings_list_snapshot(snap_compare, tmp_path, monkeypatch):
    """The header's red ⚑ badge over the replayed dashboard (the README's diagnose screenshot). The
    file is opened by its name from its directory, so no temporary path is in the picture."""
    monkeypatch.chdir(tmp_path)
    app = make_app(replay=_spliced_file(tmp_path).name, autostart=False, theme_dirs=(), deterministic=True)

    async def run_before(pilot) -> None:
        r = app.replayer
        r.pause()
        r.start()
        r.jump_to_end()
        await asyncio.to_thread(r.wait_idle, 30)
        app.drain_now()
        app._update_status()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)
