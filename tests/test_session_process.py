"""The engine in its own process (``session/process.py``): the events a run sends back are the
events the same engine and runner emit in-process (the real vLLM engine: verdicts and token ids
identical), in order; cancel reaches the child's run; a load failure is the same one-line error; a
runner's exception is raised in the parent; close ends the child. The protocol tests use the UI
tests' scripted ``FakeEngine`` (a named test double, ``tests/doubles.py``) in the child, the exactness
test the real engine. The child imports ``doubles`` as this process does: a spawned process starts
with its parent's ``sys.path``, where pytest put ``tests/``."""

from __future__ import annotations

import threading
from functools import partial

import pytest
from doubles import FakeEngine

from specterm.engine.base import GenerationParams, SessionClock
from specterm.events import RequestFinished, SpecStep, UserMessage
from specterm.session.live import LiveSession, make_runner
from specterm.session.process import EngineProcess, proxy_runner


class Boom(ValueError):
    pass


def _raising_runner(engine):
    def run(text, sink, cancel):
        raise Boom(f"no answer to {text!r}")

    return run


def _broken_factory():
    from specterm.errors import ConfigError

    raise ConfigError("target model 'nowhere' is not a directory")


def test_events_arrive_in_order_and_match_in_process(tmp_path):
    clock = SessionClock()
    runner = partial(make_runner, clock=clock, raw=True)
    here = LiveSession(engine=FakeEngine(), runner_factory=runner, clock=clock)
    expected: list = []
    here.run("q", expected.append)
    proc = EngineProcess.start(FakeEngine, runner, tmp_path / "engine.log")
    try:
        session = LiveSession(engine=proc, runner_factory=proxy_runner, clock=clock)
        seen: list = []
        result = session.run("q", seen.append)
        again: list = []
        session.run("q", again.append)  # the child serves more than one run
    finally:
        proc.close()
    strip = lambda evs, *x: [e.model_dump(exclude={"t", *x}) for e in evs]  # noqa: E731
    assert strip(seen) == strip(expected)
    assert strip(again, "request_id") == strip(expected, "request_id")
    assert isinstance(seen[0], UserMessage) and isinstance(result, RequestFinished)
    assert proc.config.models_summary() and proc.capabilities.backend == "fake"
    assert not proc._process.is_alive()


def test_cancel_reaches_the_run_in_the_child(tmp_path):
    proc = EngineProcess.start(partial(FakeEngine, block=True), partial(make_runner, raw=True), tmp_path / "log")
    try:
        cancel, events = threading.Event(), []

        def sink(event):
            events.append(event)
            if len(events) == 2:  # the child now waits for the cancel (FakeEngine(block=True))
                cancel.set()

        result = proc.runner("q", sink, cancel)
        assert result.cancelled and isinstance(events[-1], RequestFinished) and events[-1].cancelled
    finally:
        proc.close()


def test_a_runner_error_is_raised_here_and_the_child_keeps_serving(tmp_path):
    proc = EngineProcess.start(FakeEngine, _raising_runner, tmp_path / "log")
    try:
        with pytest.raises(Boom, match="no answer to 'q'"):
            proc.runner("q", lambda e: None, threading.Event())
        with pytest.raises(Boom):
            proc.runner("again", lambda e: None, threading.Event())
    finally:
        proc.close()
    assert not proc._process.is_alive()


def test_a_load_failure_is_the_same_one_line_error(tmp_path):
    from specterm.errors import ConfigError

    with pytest.raises(ConfigError, match="^target model 'nowhere' is not a directory$"):
        EngineProcess.start(_broken_factory, proxy_runner, tmp_path / "log")


@pytest.mark.engine
def test_the_real_engine_gives_the_same_verdicts_and_tokens_in_its_own_process(tiny_pair, tmp_path):
    """Greedy, speculative: every step's tokens (ids, verdicts, drafts) from the child equal those of
    the same engine configuration in this process; the recording holds what the consumer saw."""
    from specterm.engine import EngineConfig, load_engine
    from specterm.session import read_session
    from specterm.session.recorder import Recorder
    from specterm.session.synthetic import synthetic_header

    target, draft = tiny_pair
    config = EngineConfig(
        target=target, draft=draft, method="draft_model", num_speculative_tokens=3, dtype="float32", max_model_len=256
    )
    runner = partial(make_runner, params=GenerationParams(max_tokens=40), raw=True)
    prompts = ["The quick brown fox", "Once upon a time"]

    def steps(run):
        out = []
        for p in prompts:
            events: list = []
            run(p, events.append)
            out.append(
                [
                    (tuple(e.drafted), e.accepted, tuple((t.id, t.verdict) for t in e.tokens))
                    for e in events
                    if isinstance(e, SpecStep)
                ]
            )
        return out

    with load_engine(config) as engine:
        local = steps(LiveSession(engine=engine, runner_factory=runner).run)
    header = synthetic_header()
    path = tmp_path / "s.jsonl"
    proc = EngineProcess.start(partial(load_engine, config), runner, tmp_path / "engine.log")
    session = LiveSession(engine=proc, runner_factory=proxy_runner, recorder=Recorder(path, header))
    seen: list = []
    remote = steps(lambda p, sink: session.run(p, lambda e: (seen.append(e), sink(e))))
    session.close()
    assert remote == local
    assert sum(a for run in local for _, a, _ in run) > 0  # speculation did accept drafts
    recorded = [e for e in read_session(path).events if e.type != "session_ended"]
    assert [e.model_dump(mode="json") for e in recorded] == [e.model_dump(mode="json") for e in seen]
    assert not proc._process.is_alive()


def test_the_dashboard_runs_a_prompt_on_an_engine_process(tmp_path):
    """As ``specterm chat`` builds it: the app (which replaces ``sys.stderr``) starts the engine process
    from its worker thread, a submitted prompt streams back into the transcript, and quitting leaves
    no child running. (Found by running it: without ``EngineProcess.prepare`` the start failed under
    Textual with "bad value(s) in fds_to_keep".)"""
    import asyncio

    from specterm.session.process import process_factories
    from specterm.ui.app import make_app
    from specterm.ui.widgets.prompt_input import PromptInput

    load, runner = process_factories(FakeEngine, partial(make_runner, raw=True))
    session = LiveSession(engine_factory=load, runner_factory=runner)
    app = make_app(session=session, gpu=False, theme_dirs=(), deterministic=True)

    async def go():
        async with app.run_test() as pilot:
            for _ in range(600):  # bounded waits, not timing assertions
                if app.runner is not None or len(app.screen_stack) > 1:
                    break
                await pilot.pause(0.05)
            assert app.runner is not None, getattr(app.screen, "reason", app.screen_stack)
            app.post_message(PromptInput.Submitted("hello"))
            for _ in range(600):
                await pilot.pause(0.05)
                if app.request_in_flight is None and app.state.summary.session.tokens:
                    break
            return app.state.summary.session.tokens

    assert asyncio.run(go()) > 0
    proc = session.engine
    session.close()
    assert not proc._process.is_alive()
