"""Replayer: order, pause/step, jumps, speed, stop — asserted on what the sink saw, never on timing."""

from __future__ import annotations

import math
import threading

import pytest

from specterm.events import (
    AgentStepFinished,
    AgentStepStarted,
    RequestFinished,
    SessionEnded,
    SpecStep,
    Token,
    UserMessage,
)
from specterm.session.replay import Replayer, _waits
from specterm.session.synthetic import synthetic_session

WAIT = 10.0  # generous upper bound for the thread to react; tests never assert durations


def _step(rid: str, i: int, t: float) -> SpecStep:
    return SpecStep(
        t=t,
        request_id=rid,
        index=i,
        drafted=[1],
        accepted=1,
        tokens=[Token(id=1, text="a", verdict="accepted"), Token(id=2, text="b", verdict="bonus")],
    )


def _agent_session():
    """Two agent steps; indexes: 0 user, 1 start0, 2-3 steps, 4 fin, 5 finish0, 6 start1, 7-8 steps,
    9 fin, 10 finish1, 11 ended."""
    events = [UserMessage(t=0, request_id="u", text="hi")]
    for n in range(2):
        rid = f"r{n}"
        events += [
            AgentStepStarted(t=n, request_id=rid, step=n, kind="answer"),
            _step(rid, 0, n + 0.1),
            _step(rid, 1, n + 0.2),
            RequestFinished(t=n + 0.3, request_id=rid),
            AgentStepFinished(t=n + 0.3, request_id=rid, step=n, kind="answer"),
        ]
    events.append(SessionEnded(t=3))
    return events


class Sink:
    def __init__(self) -> None:
        self.seen: list = []
        self.resets = 0
        self.threads: set[str] = set()

    def __call__(self, event) -> None:
        self.threads.add(threading.current_thread().name)
        self.seen.append(event)

    def reset(self) -> None:
        self.resets += 1
        self.seen.clear()


@pytest.fixture
def stop_all():
    started: list[Replayer] = []
    yield started.append
    for r in started:
        r.stop()
        r.join(WAIT)


def make(events, stop_all, **kw) -> tuple[Replayer, Sink]:
    sink = Sink()
    r = Replayer(events, sink, on_reset=sink.reset, **kw)
    stop_all(r)
    return r, sink


@pytest.mark.parametrize("speed", [math.inf, 0])
def test_as_fast_as_possible_emits_everything_in_order_from_its_own_thread(stop_all, speed):
    _, events = synthetic_session(300, steps_per_request=60)
    r, sink = make(events, stop_all, speed=speed)
    r.start()
    assert r.wait_idle(WAIT)
    r.join(WAIT)
    assert sink.seen == events
    assert r.finished and r.position == r.total == len(events)
    assert sink.threads == {"specterm-replay"} and threading.current_thread().name not in sink.threads


def test_empty_session_finishes(stop_all):
    r, sink = make([], stop_all, speed=math.inf)
    r.start()
    assert r.wait_idle(WAIT) and r.finished and sink.seen == []


def test_pause_then_step_emits_exactly_through_the_next_spec_step(stop_all):
    events = _agent_session()
    r, sink = make(events, stop_all, speed=math.inf)
    r.pause()
    r.start()
    assert r.wait_idle(WAIT) and sink.seen == [] and r.paused
    r.step()
    assert r.wait_idle(WAIT)
    assert sink.seen == events[:3]  # user, agent step start, first spec_step
    r.step()
    assert r.wait_idle(WAIT) and sink.seen == events[:4]
    r.step()  # the next spec_step is the first of agent step 1
    assert r.wait_idle(WAIT) and sink.seen == events[:8] and r.position == 8
    assert r.paused and not r.finished


def test_step_with_no_spec_step_left_emits_one_event(stop_all):
    events = _agent_session()
    r, sink = make(events, stop_all, speed=math.inf)
    r.pause()
    r.start()
    r.jump_to_agent_step(1)
    for _ in range(2):
        r.step()  # through both spec_steps of step 1
    assert r.wait_idle(WAIT) and r.position == 9
    r.step()
    assert r.wait_idle(WAIT) and sink.seen == events[:10]


def test_two_quick_steps_are_two_steps(stop_all):
    events = _agent_session()
    r, sink = make(events, stop_all, speed=math.inf)
    r.pause()
    r.start()
    r.step()
    r.step()
    assert r.wait_idle(WAIT) and sink.seen == events[:4]


def test_step_pauses_a_running_replay_and_skips_the_wait(stop_all):
    # Recorded gaps of 1000 s (uncapped): only step() can get past them within the test's bounds.
    events = [UserMessage(t=0, request_id="u", text="a"), _step("r", 0, 1000), _step("r", 1, 2000)]
    got_first = threading.Event()
    seen: list = []

    def sink(event):
        seen.append(event)
        got_first.set()

    r = Replayer(events, sink, speed=1.0, max_gap_s=None)
    stop_all(r)
    r.start()
    assert got_first.wait(WAIT)
    r.step()
    assert r.wait_idle(WAIT)
    assert seen == events[:2] and r.paused


def test_jump_forward_then_back_resets_and_re_emits(stop_all):
    events = _agent_session()
    r, sink = make(events, stop_all, speed=math.inf)
    r.pause()
    r.start()
    r.jump_to_agent_step(1)
    assert r.wait_idle(WAIT)
    assert sink.seen == events[:7] and r.position == 7 and r.agent_step == 1 and sink.resets == 0
    r.jump_to_agent_step(0)  # behind: reset, then re-emit from the start
    assert r.wait_idle(WAIT)
    assert sink.resets == 1 and sink.seen == events[:2] and r.agent_step == 0
    r.jump_to_agent_step(0)  # already there: nothing to do
    assert r.wait_idle(WAIT) and sink.resets == 1 and sink.seen == events[:2]


def test_backwards_jump_without_on_reset_is_ignored(stop_all):
    events = _agent_session()
    seen: list = []
    r = Replayer(events, seen.append, speed=math.inf)
    stop_all(r)
    r.pause()
    r.start()
    r.jump_to_agent_step(1)
    r.jump_to_agent_step(0)
    assert r.wait_idle(WAIT)
    assert seen == events[:7]  # nothing shown twice


def test_jump_past_the_last_step_goes_to_the_end_and_back_again(stop_all):
    events = _agent_session()
    r, sink = make(events, stop_all, speed=math.inf)
    r.pause()
    r.start()
    r.jump_to_agent_step(99)
    assert r.wait_idle(WAIT) and r.finished and sink.seen == events
    r.join(WAIT)  # the thread ends when finished ...
    r.jump_to_agent_step(1)  # ... and a seek back revives it
    assert r.wait_idle(WAIT)
    assert sink.resets == 1 and sink.seen == events[:7] and not r.finished


def test_jump_to_end(stop_all):
    events = _agent_session()
    r, sink = make(events, stop_all, speed=1.0, max_gap_s=None)
    r.pause()
    r.start()
    r.jump_to_end()
    assert r.wait_idle(WAIT) and r.finished and sink.seen == events


def test_toggle_pause_and_resume_finish_the_replay(stop_all):
    events = _agent_session()
    r, sink = make(events, stop_all, speed=math.inf)
    assert r.toggle_pause() is True
    r.start()
    assert r.wait_idle(WAIT) and sink.seen == []
    assert r.toggle_pause() is False
    assert r.wait_idle(WAIT) and r.finished and sink.seen == events


def test_set_speed_to_fast_finishes_a_slow_replay(stop_all):
    events = [UserMessage(t=float(i * 1000), request_id="u", text=str(i)) for i in range(5)]
    r, sink = make(events, stop_all, speed=1.0, max_gap_s=None)
    r.start()
    r.set_speed(math.inf)  # without this the replay would take over an hour
    assert r.wait_idle(WAIT) and r.finished and sink.seen == events


def test_backwards_and_non_finite_timestamps_never_wait_negative(stop_all):
    events = [UserMessage(t=t, request_id="u", text="x") for t in (5.0, 2.0, -1e9, math.nan, math.inf, 5.5, 3.0)]
    waits = _waits(events, max_gap_s=None)
    assert waits == [0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0]
    r, sink = make(events, stop_all, speed=100.0)
    r.start()
    assert r.wait_idle(WAIT) and sink.seen == events


def test_long_idle_gaps_are_capped():
    events = [UserMessage(t=t, request_id="u", text="x") for t in (0.0, 600.0, 600.25, 601.0)]
    assert _waits(events, max_gap_s=5.0) == [0.0, 5.0, 0.25, 0.75]


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_bad_speed_is_refused(bad):
    with pytest.raises(ValueError, match="speed"):
        Replayer([], lambda e: None, speed=bad)
    r = Replayer([], lambda e: None)
    with pytest.raises(ValueError, match="speed"):
        r.set_speed(bad)


def test_stop_ends_the_thread_mid_replay(stop_all):
    events = [UserMessage(t=float(i), request_id="u", text=str(i)) for i in range(100)]
    first = threading.Event()
    seen: list = []

    def sink(event):
        seen.append(event)
        first.set()

    r = Replayer(events, sink, speed=1.0)  # ~100 s of recorded time
    r.start()
    assert first.wait(WAIT)
    r.stop()
    r.join(WAIT)
    assert len(seen) < len(events) and not r.finished
    r.step()  # commands after stop are ignored, not errors
    r.jump_to_end()
    assert len(seen) < len(events)


def test_a_failing_sink_stops_the_replay_and_is_reported(stop_all):
    events = _agent_session()

    def sink(event):
        if event.type == "spec_step":
            raise RuntimeError("widget exploded")

    r = Replayer(events, sink, speed=math.inf)
    stop_all(r)
    r.start()
    assert r.wait_idle(WAIT)
    assert isinstance(r.error, RuntimeError) and r.position == 2 and not r.finished


def test_sink_may_call_back_into_the_replayer(stop_all):
    # A UI might pause from inside its handler; that must not deadlock the replay thread.
    events = _agent_session()
    seen: list = []
    r = Replayer(events, lambda e: (seen.append(e), e.type == "spec_step" and r.pause()), speed=math.inf)
    stop_all(r)
    r.start()
    assert r.wait_idle(WAIT) and r.paused
    assert seen[-1].type == "spec_step" and len(seen) == 3


def test_a_file_still_loading_is_replayed_whole_and_in_order():
    _, events = synthetic_session(60, steps_per_request=20)
    seen: list = []
    r = Replayer(events[:10], seen.append, speed=math.inf, loading=True)
    r.start()
    r.jump_to_end()  # the real end is not read yet: the jump waits for it
    r.extend(events[10:40])
    assert not r.finished
    r.extend(events[40:])
    r.done_loading()
    assert r.wait_idle(WAIT) and r.finished
    assert seen == events and r.total == len(events)


def test_a_jump_past_the_loaded_agent_steps_waits_for_them():
    events = _agent_session()
    seen: list = []
    r = Replayer(events[:3], seen.append, speed=math.inf, loading=True)
    r.pause()
    r.start()
    r.jump_to_agent_step(1)  # agent step 1 starts at index 6, not loaded yet
    r.extend(events[3:])
    r.done_loading()
    assert r.wait_idle(WAIT)
    assert seen == events[:7]
