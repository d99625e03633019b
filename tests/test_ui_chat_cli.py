"""``specterm chat``: flags parse, --replay delegates to the dashboard, live mode builds the app
around a lazily loaded engine and records through its live session. The app is not run (no TTY)."""

from __future__ import annotations

from specterm.cli import build_parser


def test_chat_replay_delegates(monkeypatch):
    import specterm.ui.app as ui_app

    seen = {}
    monkeypatch.setattr(
        ui_app, "run_replay_app", lambda path, speed=1.0, **kw: seen.update(path=path, speed=speed, **kw) or 0
    )
    args = build_parser().parse_args(["chat", "--replay", "s.jsonl", "--speed", "4", "--theme", "specterm-light"])
    assert args.func(args) == 0
    assert seen["path"] == "s.jsonl" and seen["speed"] == 4.0 and seen["theme"] == "specterm-light"


def test_chat_live_builds_app_without_loading_the_engine(monkeypatch, tmp_path):
    import specterm.engine
    import specterm.ui.app as ui_app

    captured = {}

    def fake_run(self, *a, **kw):
        captured["app"] = self

    monkeypatch.setattr(ui_app.SpecTermApp, "run", fake_run)
    monkeypatch.setattr(
        specterm.engine, "load_engine", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("loaded eagerly"))
    )
    record = tmp_path / "chat.jsonl"
    args = build_parser().parse_args(
        ["chat", "--target", "/models/t", "--draft", "/models/d", "-k", "3", "--no-gpu", "--record", str(record)]
    )
    assert args.func(args) == 0
    app = captured["app"]
    assert app.state.mode == "live" and app.engine is None and app.session.needs_loading
    assert app.session.header.models["num_speculative_tokens"] == 3 and app.session.recorder is not None
    assert record.exists() and '"session_started"' in record.read_text().splitlines()[0]


def test_chat_runs_the_engine_in_its_own_process_unless_asked(monkeypatch):
    import specterm.ui.app as ui_app
    from specterm.session.process import EngineProcess

    captured = {}
    monkeypatch.setattr(ui_app.SpecTermApp, "run", lambda self, *a, **kw: captured.update(app=self))
    for flags, in_process in (([], False), (["--engine-in-process"], True)):
        args = build_parser().parse_args(["chat", "--target", "/models/t", "--no-gpu", "--no-record", *flags])
        assert args.func(args) == 0
        factory = captured["app"].session._engine_factory
        assert (factory.func == EngineProcess.start) != in_process
