"""The live session outside any UI: one place that builds the engine lazily, runs prompts through
the plain or agent runner, cancels, and records every event before the consumer sees it."""

from __future__ import annotations

import threading

from doubles import FakeEngine

from specterm.events import SessionStarted, UserMessage
from specterm.session import read_session
from specterm.session.live import LiveSession
from specterm.session.recorder import Recorder
from specterm.session.synthetic import synthetic_header


def test_the_recording_holds_exactly_what_the_consumer_saw_in_order(tmp_path):
    header = synthetic_header()
    path = tmp_path / "s.jsonl"
    session = LiveSession(header=header, engine=FakeEngine(), recorder=Recorder(path, header))
    seen: list = []
    session.run("first question", seen.append)
    session.run("second question", seen.append)
    session.close()
    data = read_session(path)
    assert isinstance(data.header, SessionStarted)
    recorded = [e for e in data.events if e.type != "session_ended"]
    assert [e.model_dump() for e in recorded] == [e.model_dump() for e in seen]
    assert [e.text for e in seen if isinstance(e, UserMessage)] == ["first question", "second question"]
    assert data.events[-1].type == "session_ended"


def test_the_engine_is_built_once_and_only_when_needed():
    built: list[FakeEngine] = []

    def factory():
        built.append(FakeEngine())
        return built[-1]

    session = LiveSession(engine_factory=factory)
    assert session.needs_loading and session.runner is None and not built
    session.run("a", lambda e: None)
    session.run("b", lambda e: None)
    assert len(built) == 1 and not session.needs_loading and built[0].prompts == ["a", "b"]
    session.close()
    assert built[0].closed and session.engine is None


def test_cancel_reaches_the_request_in_flight():
    engine = FakeEngine(block=True)
    session = LiveSession(engine=engine)
    results: list = []
    worker = threading.Thread(target=lambda: results.append(session.run("q", lambda e: None)))
    worker.start()
    assert engine.started.wait(10)
    session.cancel()
    worker.join(10)
    assert results and results[0].cancelled
