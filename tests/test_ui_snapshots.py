"""Snapshot tests (pytest-textual-snapshot). Update with ``pytest --snapshot-update`` and review the
SVGs under ``tests/__snapshots__/``.

Determinism: events are applied synchronously on the UI thread (``apply_events`` with panels forced)
instead of through a timed thread; the replayer is never started on its own clock; cursor blink and
animations are off (``deterministic=True``); no wall-clock text is shown anywhere.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from doubles import FakeEngine, demo_events, demo_header, fake_gpu_samples

from specterm.events import GpuStatus
from specterm.session.reader import SessionData, read_session
from specterm.ui.app import make_app

SAMPLES = Path(__file__).resolve().parent.parent / "sample_sessions"


def sample_session(name: str) -> SessionData:
    """A session recorded from the real engine, read like any session file."""
    return read_session(SAMPLES / name)


WIDE = (160, 48)
MID = (120, 36)
NARROW = (80, 24)


def live(**kw):
    return make_app(engine=FakeEngine(), header=demo_header(), gpu=False, theme_dirs=(), deterministic=True, **kw)


def feed(events, *, then=()):
    async def run_before(pilot) -> None:
        await pilot.pause()
        pilot.app.apply_events(events, force=True)
        for key in then:
            await pilot.press(key)
        await pilot.pause()

    return run_before


def mid_stream():
    """Everything up to the answer's last engine step, before it finishes: every verdict kind is
    on screen and the answer block has no footer yet."""
    events = demo_events()
    cut = next(
        i for i, e in enumerate(events) if getattr(e, "index", None) == 2 and getattr(e, "request_id", "") == "r3"
    )
    return events[: cut + 1]


def test_initial_screen(snap_compare):
    assert snap_compare(live(), terminal_size=MID)


def test_mid_stream_all_verdicts(snap_compare):
    assert snap_compare(live(), terminal_size=MID, run_before=feed(mid_stream()))


def test_rejected_shown(snap_compare):
    assert snap_compare(live(), terminal_size=MID, run_before=feed(demo_events(), then=["f3"]))


def test_forced_unmarked(snap_compare):
    assert snap_compare(live(), terminal_size=MID, run_before=feed(demo_events(), then=["f4"]))


@pytest.mark.parametrize("theme", ["specterm-dark", "specterm-light", "specterm-high-contrast"])
def test_theme(snap_compare, theme):
    assert snap_compare(
        live(theme=theme), terminal_size=MID, run_before=feed(demo_events() + fake_gpu_samples(), then=["f3"])
    )


def test_narrow_80x24(snap_compare):
    assert snap_compare(live(), terminal_size=NARROW, run_before=feed(demo_events() + fake_gpu_samples()))


def test_narrow_panels_hidden(snap_compare):
    assert snap_compare(live(), terminal_size=NARROW, run_before=feed(demo_events(), then=["f2"]))


def test_wide_160x48(snap_compare):
    assert snap_compare(live(), terminal_size=WIDE, run_before=feed(demo_events() + fake_gpu_samples()))


def test_engine_failed_to_start(snap_compare):
    def factory():
        raise RuntimeError("the vLLM engine extra is not installed (pip install 'specterm[cpu]')")

    app = make_app(engine_factory=factory, gpu=False, theme_dirs=(), deterministic=True)

    async def run_before(pilot) -> None:
        for _ in range(200):  # the factory runs on a worker thread
            if app.screen.__class__.__name__ == "EngineErrorScreen":
                break
            await pilot.pause(0.01)
        await pilot.pause()

    assert snap_compare(app, terminal_size=NARROW, run_before=run_before)


def test_no_gpu_panel(snap_compare):
    """A machine without NVIDIA's library: what the sampler says there (its own classification), once."""
    import pynvml

    from specterm.telemetry.errors import classify

    state, message = classify(pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND), pynvml)
    status = GpuStatus(state=state, message=message)
    assert snap_compare(live(), terminal_size=MID, run_before=feed([status, *demo_events()]))


def test_gpu_panel_fake_samples(snap_compare):
    assert snap_compare(live(), terminal_size=MID, run_before=feed(fake_gpu_samples(12)))


def replay_app(name: str, *, steps: int | None = None, then=()):
    """A replay app driven by explicit commands (never the replayer's clock): ``steps`` engine
    steps, or the whole session when None."""
    app = make_app(replay=sample_session(name), autostart=False, theme_dirs=(), deterministic=True)

    async def run_before(pilot) -> None:
        r = app.replayer
        r.pause()
        r.start()
        if steps is None:
            r.jump_to_end()
        else:
            for _ in range(steps):
                r.step()
        await asyncio.to_thread(r.wait_idle, 30)
        app.drain_now()
        app._update_status()
        for key in then:
            await pilot.press(key)
        await pilot.pause()

    return app, run_before


def test_replay_paused(snap_compare):
    app, run_before = replay_app("toolcall_high_acceptance.jsonl", steps=6)
    assert snap_compare(app, terminal_size=MID, run_before=run_before)


def test_replay_finished_narrow(snap_compare):
    app, run_before = replay_app("prose_low_acceptance.jsonl")
    assert snap_compare(app, terminal_size=NARROW, run_before=run_before)


def test_replay_rejected_shown_wide(snap_compare):
    app, run_before = replay_app("prose_low_acceptance.jsonl", then=["r"])
    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)


def test_replay_agent_session_wide(snap_compare):
    # A real multi-step agent session (the smollm2-agent pair): retrieval, two dependent tool calls, answer.
    app, run_before = replay_app("sql_agent_multistep.jsonl")
    assert snap_compare(app, terminal_size=WIDE, run_before=run_before)


class _Quiet:
    """An attach source that sends nothing: the snapshot feeds the recorded events itself, in order."""

    addr = "ipc:///run/user/1000/specterm/vllm.sock"

    def __init__(self, _sink) -> None:
        pass

    def run(self) -> None:
        pass

    def stop(self) -> None:
        pass


def attached(size):
    from specterm.ui.attach_app import make_attach_app

    app = make_attach_app(_Quiet.addr, gpu=False, theme_dirs=(), deterministic=True)
    app._attach_factory = _Quiet
    return app


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["wide", "narrow"])
def test_attach_to_vllm_serve(snap_compare, size):
    """``specterm attach`` on a real server's recorded stream: three clients at once, one of them a
    two-step conversation; the requests list, conversation titles and the ATTACHED badge."""
    data = sample_session("attach_vllm_serve.jsonl")
    assert snap_compare(attached(size), terminal_size=size, run_before=feed([data.header, *data.events]))


def test_attach_weights_per_token_narrow(snap_compare):
    """The same stream from a server that sized its weights (``wire.Hello.weight_bytes``; the recording
    predates it), at 80×24: the bandwidth panel's served rate and weights per token, in 16 cells."""
    data = sample_session("attach_vllm_serve.jsonl")
    models = {**data.header.models, "weight_bytes": {"target": 269_060_736, "draft": 0}}
    header = data.header.model_copy(update={"models": models})
    assert snap_compare(attached(NARROW), terminal_size=NARROW, run_before=feed([header, *data.events]))


def test_structured_answer_renders_as_markdown(snap_compare):
    """An answer with structure (a list, a table) reads as Markdown, not as the JSON it was written in.
    The recorded agent session with its one-line answer edited into a list and a table (the pairs
    here write single sentences; a larger model writes these)."""
    from specterm.events import AgentStepFinished

    data = sample_session("sql_agent_multistep.jsonl")
    answer = (
        "The most ordered products:\n\n1. **Webcam**: 65 orders\n2. Mouse: 40 orders\n\n"
        "| product | orders |\n|---|---|\n| Webcam | 65 |\n| Mouse | 40 |"
    )
    events = [
        e.model_copy(update={"answer": answer}) if isinstance(e, AgentStepFinished) and e.answer else e
        for e in data.events
    ]
    assert snap_compare(live(), terminal_size=MID, run_before=feed([data.header, *events]))
