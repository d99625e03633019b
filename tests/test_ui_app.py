"""The app's behaviour under ``App.run_test`` (headless): prompts, cancel, history, copy, export,
replay controls, the error screen, panels agreeing with ``specterm.stats``, and the GPU sampler
wired through a fake NVML. Waits poll the app's state; nothing asserts on time."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

from doubles import FakeEngine, demo_events, demo_header
from fake_nvml import FakeGpu, FakeNvml

from specterm.events import RequestStarted, dump_event
from specterm.session.reader import read_session
from specterm.session.synthetic import synthetic_session
from specterm.stats import fmt_opt, summarize
from specterm.ui.app import make_app
from specterm.ui.screens.error import EngineErrorScreen
from specterm.ui.widgets.acceptance_panel import AcceptancePanel
from specterm.ui.widgets.gpu_panel import GpuPanel
from specterm.ui.widgets.prompt_input import PromptInput
from specterm.ui.widgets.session_header import SessionHeader
from specterm.ui.widgets.transcript import Transcript


def run(coro):
    return asyncio.run(coro)


async def until(pilot, condition, tries: int = 500) -> None:
    """Let the app run until ``condition()`` holds (bounded; not a timing assertion)."""
    for _ in range(tries):
        if condition():
            return
        await pilot.pause(0.01)
    raise AssertionError("condition never became true")


def rows_text(transcript: Transcript) -> str:
    """What the transcript shows now, row by row."""
    return "\n".join(transcript.render_line(y).text for y in range(transcript.size.height))


def live_app(engine=None, **kw):
    return make_app(engine=engine or FakeEngine(), gpu=False, theme_dirs=(), deterministic=True, **kw)


def write_session(tmp_path: Path, header, events) -> Path:
    path = tmp_path / "session.jsonl"
    path.write_text("".join(dump_event(e) + "\n" for e in [header, *events]))
    return path


def test_submit_runs_the_prompt_on_a_worker_and_streams_tokens():
    engine = FakeEngine()

    async def main():
        app = live_app(engine)
        async with app.run_test() as pilot:
            await pilot.press(*"hello", "enter")
            await until(pilot, lambda: app._cancel is None and engine.prompts)
            await until(
                pilot, lambda: any(e.kind == "generation" and e.footer for e in app.query_one(Transcript).model.entries)
            )
            model = app.query_one(Transcript).model
            return (
                engine.prompts,
                [e.kind for e in model.entries],
                model.entries[1].plain_output(),
                app.query_one(SessionHeader).status,
            )

    prompts, kinds, output, status = run(main())
    assert prompts == ["hello"]
    assert kinds == ["user", "generation"]
    assert output.startswith("Order #42 ships")
    assert status == "ready"


def test_escape_cancels_the_running_request():
    engine = FakeEngine(block=True)

    async def main():
        app = live_app(engine)
        async with app.run_test() as pilot:
            await pilot.press(*"go", "enter")
            await until(pilot, engine.started.is_set)
            assert app.query_one(SessionHeader).status == "generating…"
            await pilot.press("escape")
            await until(pilot, lambda: app._cancel is None)
            app.drain_now()
            entry = app.query_one(Transcript).model.entries[-1]
            return [p.text for p in entry.parts if hasattr(p, "style")]

    lines = run(main())
    assert "cancelled" in lines


def test_second_prompt_while_busy_is_refused_not_queued():
    engine = FakeEngine(block=True)

    async def main():
        app = live_app(engine)
        async with app.run_test() as pilot:
            await pilot.press(*"a", "enter")
            await until(pilot, engine.started.is_set)
            await pilot.press(*"b", "enter")
            await pilot.pause()
            notes = [str(n.message) for n in app._notifications]
            await pilot.press("escape")
            await until(pilot, lambda: app._cancel is None)
            return engine.prompts, notes

    prompts, notes = run(main())
    assert prompts == ["a"]
    assert any("Esc cancels" in n for n in notes)


def test_multiline_input_and_history():
    engine = FakeEngine(script=[])

    async def main():
        app = live_app(engine)
        async with app.run_test() as pilot:
            prompt = app.query_one(PromptInput)
            await pilot.press("o", "n", "e", "ctrl+j", "x", "enter")
            await until(pilot, lambda: app._cancel is None and engine.prompts)
            await pilot.press(*"two", "enter")
            await until(pilot, lambda: app._cancel is None and len(engine.prompts) == 2)
            seen = []
            for key in ("up", "up", "down", "down"):
                await pilot.press(key)
                seen.append(prompt.text)
            return engine.prompts, seen

    prompts, seen = run(main())
    assert prompts == ["one\nx", "two"]
    assert seen == ["two", "one\nx", "two", ""]


def test_copy_last_answer_and_export_svg(tmp_path):
    copied: list[str] = []

    async def main():
        app = live_app(export_dir=tmp_path)
        app.copy_to_clipboard = copied.append  # the real one writes OSC 52 to the terminal
        async with app.run_test() as pilot:
            app.apply_events(demo_events(), force=True)
            await pilot.press("f8")
            await pilot.press("ctrl+s")
            await pilot.pause()

    run(main())
    assert copied == ["Order #42 ships on Friday."]
    svgs = list(tmp_path.glob("*.svg"))
    assert len(svgs) == 1 and "Order" in svgs[0].read_text()


def test_a_size_set_by_a_layout_does_not_ask_for_another_layout(monkeypatch):
    """While entries are added and grow and the panels change, neither the transcript nor a panel
    asks for a layout from inside the layout that sized it (``ui/widgets/no_echo.py``, and Textual's
    ``ScrollView`` for the transcript). With Textual's default every such size update did, and every
    other reflow of the screen moved nothing. And the transcript stays one widget however many
    entries it draws: a widget per entry made every new entry a reflow of all of them."""
    import traceback

    from doubles import step, tok
    from textual._compositor import Compositor
    from textual.widget import Widget

    from specterm.ui.widgets.panel import Panel

    # the hook NoEchoLayout overrides: renamed by a Textual upgrade, the fix (and this count) would
    # silently stop applying
    assert "_size_updated" in vars(Widget)
    echoes: list[str] = []
    reflows = [0]
    refresh, reflow = Widget.refresh, Compositor.reflow

    def counting_refresh(self, *args, layout=False, **kw):
        if layout and isinstance(self, (Transcript, Panel)):
            names = [f.name for f in traceback.extract_stack(limit=8)]
            # the size update setting ``virtual_size`` (a layout reactive); a scrollbar appearing
            # (``_scroll_update``) does change the layout and may ask
            if any(a == "_size_updated" and b == "__set__" for a, b in zip(names, names[1:])):
                echoes.append(type(self).__name__)
        return refresh(self, *args, layout=layout, **kw)

    def counting_reflow(self, parent, size):
        reflows[0] += 1
        return reflow(self, parent, size)

    async def main():
        app = live_app()
        async with app.run_test(size=(100, 30)) as pilot:
            events = demo_events()
            await pilot.pause()
            monkeypatch.setattr(Widget, "refresh", counting_refresh)
            monkeypatch.setattr(Compositor, "reflow", counting_reflow)
            for i in range(0, len(events), 3):  # a few events per frame, as a live stream comes
                app.apply_events(events[i : i + 3])
                await pilot.pause()
            app.apply_events([RequestStarted(t=1.0, request_id="r9", prompt_tokens=9)])
            words = [tok(f" word{i}") for i in range(80)]  # a request that grows by rows
            for i in range(0, 80, 8):
                app.apply_events([step("r9", i // 8, 1.0 + i, words[i : i + 7], words[i + 7])])
                await pilot.pause()
            transcript = app.query_one(Transcript)
            return len(transcript.model.entries), len(transcript.children)

    entries, children = run(main())
    assert reflows[0] >= 5 and echoes == []
    assert entries > 5 and children == 0


def test_toggles_change_transcript_legend_and_panels():
    async def main():
        app = live_app()
        async with app.run_test() as pilot:
            app.apply_events(demo_events(), force=True)
            await pilot.pause()
            before = (
                app.query_one(Transcript)
                .model.entries[-1]
                .render(app.query_one(Transcript).current_styles, app.options)
                .plain
            )
            await pilot.press("f3")
            after = (
                app.query_one(Transcript)
                .model.entries[-1]
                .render(app.query_one(Transcript).current_styles, app.options)
                .plain
            )
            await pilot.press("f2")
            hidden = app.screen.query_one("#side").display
            return before, after, hidden, app.options

    before, after, hidden, options = run(main())
    assert " is" not in before and "Order #42 is ships" in after
    assert options.show_rejected and hidden is False


def test_panels_take_their_numbers_from_stats():
    events = demo_events()
    summary = summarize(events)

    async def main():
        app = live_app()
        async with app.run_test(size=(160, 48)) as pilot:
            app.apply_events(events, force=True)
            await pilot.pause()
            panel = app.query_one(AcceptancePanel)
            return panel.body(panel.text_styles, panel.inner_width).plain

    text = run(main())
    assert fmt_opt(summary.session.acceptance_rate) in text
    assert fmt_opt(summary.session.mean_acceptance_length) in text
    req = summary.requests["r3"].stats
    assert fmt_opt(req.acceptance_rate) in text and fmt_opt(req.mean_acceptance_length) in text


def test_engine_factory_failure_shows_error_screen():
    def factory():
        raise RuntimeError("the vLLM engine extra is not installed")

    async def main():
        app = make_app(engine_factory=factory, gpu=False, theme_dirs=(), deterministic=True)
        async with app.run_test() as pilot:
            await until(pilot, lambda: isinstance(app.screen, EngineErrorScreen))
            return app.screen.reason

    assert run(main()) == "the vLLM engine extra is not installed"


def test_engine_factory_success_enables_prompt_and_header():
    engine = FakeEngine()

    async def main():
        app = make_app(engine_factory=lambda: engine, gpu=False, theme_dirs=(), deterministic=True)
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.runner is not None)
            return app.query_one(PromptInput).read_only, app.query_one(SessionHeader).describe()

    read_only, header = run(main())
    assert read_only is False
    assert "target models/fake-target-8m" in header and "draft models/fake-draft-1m" in header and "k=4" in header


def test_replay_plays_the_file_and_matches_stats(tmp_path):
    header, events = synthetic_session(400, steps_per_request=40)
    path = write_session(tmp_path, header, events)

    async def main():
        app = make_app(replay=path, speed=0, theme_dirs=(), deterministic=True)
        async with app.run_test() as pilot:
            await until(pilot, lambda: app.replayer.finished)
            app.drain_now()
            return app.state.summary.as_dict(), app.query_one(SessionHeader).render().plain, app.bridge.wakeups

    got, header_text, wakeups = run(main())
    data = read_session(path)
    assert got == summarize(data.events).as_dict()
    assert "REPLAY" in header_text and "synthetic-target" in header_text
    assert wakeups < len(data.events) / 5  # batched: far fewer UI messages than events


def test_replay_controls(tmp_path):
    header, events = synthetic_session(50, steps_per_request=10)
    path = write_session(tmp_path, header, events)

    async def main():
        app = make_app(replay=path, speed=1.0, autostart=False, theme_dirs=(), deterministic=True)
        async with app.run_test() as pilot:
            r = app.replayer
            r.pause()
            r.start()
            out = {}
            await pilot.press("n")
            await asyncio.to_thread(r.wait_idle, 10)
            app.drain_now()
            out["after_step"] = app.state.summary.session.steps
            await pilot.press("plus")
            out["speed"] = r.speed
            await pilot.press("minus", "minus")
            out["slower"] = r.speed
            await pilot.press("space")
            out["paused_after_space"] = r.paused
            await pilot.press("space")
            await pilot.press("e")
            await until(pilot, lambda: r.finished)
            app.drain_now()
            out["steps_at_end"] = app.state.summary.session.steps
            app._update_status()
            out["status"] = app.query_one(SessionHeader).status
            return out

    out = run(main())
    assert out["after_step"] == 1
    assert out["speed"] == 2.0 and out["slower"] == 0.5
    assert out["paused_after_space"] is False
    assert out["steps_at_end"] == 50
    assert out["status"].startswith("done")


def test_replay_speed_steps_reach_max():
    async def main():
        header, events = synthetic_session(5)
        from specterm.session.reader import SessionData

        app = make_app(
            replay=SessionData(path=Path("x"), header=header, events=events),
            autostart=False,
            theme_dirs=(),
            deterministic=True,
        )
        async with app.run_test() as pilot:
            for _ in range(12):
                await pilot.press("plus")
            return app.replayer.speed, app.query_one(SessionHeader).status

    speed, status = run(main())
    assert math.isinf(speed) and "max" in status


def test_gpu_sampler_with_fake_nvml_feeds_the_panel():
    nvml = FakeNvml([FakeGpu(name="FAKE-NVML H200", dram_bw=55.0)])

    async def main():
        app = make_app(engine=FakeEngine(), header=demo_header(), gpu=nvml, theme_dirs=(), deterministic=True)
        async with app.run_test(size=(160, 48)) as pilot:
            await until(pilot, lambda: app.state.gpu)
            app.drain_now()
            panel = app.query_one(GpuPanel)
            return panel.body(panel.text_styles, panel.inner_width).plain

    text = run(main())
    assert "FAKE-NVML H200" in text and "DRAM bandwidth (GPM)" in text and "55%" in text


def test_no_gpu_status_is_plain():
    from specterm.events import GpuStatus

    async def main():
        app = live_app()
        async with app.run_test() as pilot:
            app.apply_events([GpuStatus(state="no_driver", message="NVML library not found")], force=True)
            await pilot.pause()
            panel = app.query_one(GpuPanel)
            return panel.body(panel.text_styles, panel.inner_width).plain

    text = run(main())
    # one short line, not a headline and the same fact again (`specterm doctor` names the library);
    # shorter where the panel is narrow (the app's default 80 columns), so it stays one line
    assert text in ("no NVIDIA GPU (no driver)", "no NVIDIA driver")


def test_bandwidth_panel_reads_the_weights_per_token_on_any_machine():
    """The weights' share of the traffic from the session's own counts: a target pass per engine
    step and a draft pass per draft slot, per emitted token, against the target once per token."""
    from doubles import demo_events, demo_header

    from specterm.events import GpuStatus
    from specterm.stats import summarize

    events = demo_events()
    header = demo_header()
    summary = summarize(events)
    s = summary.session
    traffic = summary.weight_traffic(header.models)
    expected = (32_000_000 * s.steps + 4_000_000 * s.draft_passes) / s.tokens
    assert s.draft_passes == s.draft_tokens + sum(getattr(e, "invalid_drafts", 0) for e in events) > 0
    assert traffic.per_token == expected and traffic.ratio == expected / 32_000_000 < 1
    assert summary.weight_traffic({"target": "x"}) is None  # a session that records no weights

    async def main():
        app = live_app()
        async with app.run_test() as pilot:
            app.apply_events(
                [header, GpuStatus(state="no_driver", message="NVML library not found"), *events], force=True
            )
            await pilot.pause()
            panel = app.query_one(GpuPanel)
            return panel.body(panel.text_styles, panel.inner_width).plain

    lines = run(main()).splitlines()
    assert lines[0].split()[-3:] == [f"{expected / 1e6:.1f}", "MB", f"×{expected / 32e6:.2f}"]
    assert lines[1].split()[-2:] == ["32.0", "MB"] and lines[2].startswith("read at")
    assert lines[3:] in (["no NVIDIA GPU (no driver)"], ["no NVIDIA driver"])


def test_engine_config_uses_load_engine_lazily_and_reports_failure(monkeypatch):
    import specterm.engine
    from specterm.engine.base import EngineConfig
    from specterm.errors import EngineUnavailable

    calls = []

    def fail(config, **kw):
        calls.append(config)
        raise EngineUnavailable("vLLM is not installed: pip install 'specterm[cpu]'")

    monkeypatch.setattr(specterm.engine, "load_engine", fail)
    config = EngineConfig(target="/models/t", draft="/models/d")

    async def main():
        app = make_app(engine_config=config, gpu=False, theme_dirs=(), deterministic=True)
        async with app.run_test() as pilot:
            await until(pilot, lambda: isinstance(app.screen, EngineErrorScreen))
            return app.screen.reason

    assert run(main()) == "vLLM is not installed: pip install 'specterm[cpu]'"
    assert calls == [config]


def test_transcript_rows_rewrap_on_resize_and_selection_copies_their_text():
    """The transcript draws every entry's rows itself: a narrower terminal re-wraps them (no row
    wider than the view, no text lost), and selecting copies the entries' text without the coloured
    edge the transcript draws before each entry."""
    from textual.selection import Selection

    def words(text: str) -> list[str]:
        return text.split()

    async def main():
        app = live_app()
        async with app.run_test(size=(140, 40)) as pilot:
            app.apply_events(demo_events(), force=True)
            await pilot.pause()
            transcript = app.query_one(Transcript)
            transcript.scroll_home(animate=False)
            await pilot.pause()
            wide = transcript.get_selection(Selection(None, None))[0]
            await pilot.resize_terminal(60, 40)
            await pilot.pause()
            await pilot.pause()
            width = transcript.scrollable_content_region.width
            rows = [transcript.render_line(y) for y in range(transcript.size.height)]
            narrow = transcript.get_selection(Selection(None, None))[0]
            shown = rows_text(transcript)
            return wide, narrow, width, rows, shown

    wide, narrow, width, rows, shown = run(main())
    assert "Where is order #42? [bold]not markup[/bold]" in wide and "▌" not in wide
    assert len(narrow.splitlines()) > len(wide.splitlines())  # re-wrapped into more rows
    assert words(narrow) == words(wide)  # the same text, only wrapped differently
    assert all(row.cell_length == width for row in rows)
    assert shown.startswith("▌ you")


def test_the_transcript_keeps_the_last_300_entries_and_the_readers_place():
    """A flood of entries keeps the newest ``MAX_ENTRIES`` (the model holds exactly what is shown),
    and when old entries go while the reader has scrolled up, the rows they read stay in view."""
    from specterm.events import UserMessage
    from specterm.ui.widgets.transcript import MAX_ENTRIES

    def asks(first: int, count: int) -> list[UserMessage]:
        return [UserMessage(t=float(i), request_id=f"u{i}", text=f"question {i}") for i in range(first, first + count)]

    async def main():
        app = live_app()
        async with app.run_test(size=(100, 30)) as pilot:
            transcript = app.query_one(Transcript)
            app.apply_events(asks(0, MAX_ENTRIES + 50), force=True)
            await pilot.pause()
            texts = [e.parts[0].text for e in transcript.model.entries]
            transcript.scroll_to(y=transcript.max_scroll_y // 2, animate=False)
            await pilot.pause()
            top_before = rows_text(transcript).splitlines()[:6]
            app.apply_events(asks(MAX_ENTRIES + 50, 20), force=True)
            await pilot.pause()
            top_after = rows_text(transcript).splitlines()[:6]
            return texts, len(transcript.model.entries), top_before, top_after

    texts, kept, top_before, top_after = run(main())
    assert len(texts) == MAX_ENTRIES and texts[0] == "question 50" and texts[-1] == f"question {MAX_ENTRIES + 49}"
    assert kept == MAX_ENTRIES
    assert top_after == top_before and any("question" in row for row in top_before)


def test_a_terminal_of_40_columns_opens_the_console():
    """Under ~43 columns the first frame (laid out before the narrow breakpoint applies) left the
    prompt no columns, and Textual's TextArea crashed wrapping its placeholder in zero."""

    async def main():
        app = live_app()
        async with app.run_test(size=(40, 24)) as pilot:
            await pilot.pause()
            return app.screen.has_class("-narrow"), app.query_one(PromptInput).region.width

    narrow, width = run(main())
    assert narrow and width == 40


def test_hint_shown_until_first_event():
    async def main():
        app = live_app()
        async with app.run_test() as pilot:
            transcript = app.query_one(Transcript)
            before = rows_text(transcript)
            app.apply_events(demo_events()[:1], force=True)
            await pilot.pause()
            return transcript.hint, before, rows_text(transcript)

    hint, before, after = run(main())
    assert hint == "" and "Type a prompt" in before and "Type a prompt" not in after


def test_plain_chat_keeps_the_conversation_and_a_too_long_prompt_is_an_error_entry():
    from specterm.engine.chat import PromptTooLong

    class Refusing(FakeEngine):
        def generate(self, prompt, params, sink, **kw):
            if prompt.messages[-1].content == "long":
                raise PromptTooLong("the prompt is 5000 tokens, but the model's context is 1024 tokens")
            return super().generate(prompt, params, sink, **kw)

    engine = Refusing()

    async def main():
        app = live_app(engine)
        async with app.run_test() as pilot:
            for text in ("one", "long", "two"):
                await pilot.press(*text, "enter")
                await until(pilot, lambda: app._cancel is None)
                await pilot.pause()
            model = app.query_one(Transcript).model
            return [e.kind for e in model.entries], [m.role for m in engine.requests[-1].messages]

    kinds, roles = run(main())
    assert "error" in kinds  # shown in the transcript; the app took the next prompt
    assert roles == ["user", "assistant", "user"]  # "one" and its answer, then "two"


def test_a_long_file_opens_on_its_first_lines_and_replays_whole(tmp_path, monkeypatch):
    import specterm.ui.loading as loading

    monkeypatch.setattr(loading, "HEAD_LINES", 50)
    monkeypatch.setattr(loading, "LOAD_CHUNK", 120)
    header, events = synthetic_session(400, steps_per_request=40)
    path = write_session(tmp_path, header, events)

    async def main():
        app = make_app(replay=path, speed=0, autostart=False, theme_dirs=(), deterministic=True)
        opened_with = app.replayer.total  # before the first frame: only the head is read
        async with app.run_test() as pilot:
            app.replayer.start()
            await until(pilot, lambda: app.replayer.finished)
            app.drain_now()
            await pilot.pause()
            return opened_with, app.state.summary.as_dict(), app.replayer.loading

    opened_with, got, still_loading = run(main())
    data = read_session(path)
    assert opened_with == 50 and not still_loading
    assert got == summarize(data.events).as_dict()  # nothing lost, nothing twice
