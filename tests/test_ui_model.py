"""The UI's pure parts: the event bridge, the transcript model and its text, charts, themes."""

from __future__ import annotations

import threading

from doubles import demo_events, step, tok
from rich.style import Style

from specterm.events import SpecStep, UserMessage
from specterm.ui.bridge import RESET, EventBridge
from specterm.ui.charts import bar, sparkline
from specterm.ui.entries import ViewOptions
from specterm.ui.transcript_model import TranscriptModel

STYLES = {name: Style(color="red") for name in ("accepted", "correction", "bonus", "target", "rejected", "forced")}
STYLES |= {"forced-layer": Style(dim=True), "title": Style(bold=True), "meta": Style(), "body": Style()}
STYLES |= {"tool": Style(), "warning": Style(), "error": Style()}
STYLES["rejected"] = Style(strike=True)
STYLES["correction"] = Style(bold=True, underline=True)


# -- bridge ---------------------------------------------------------------------------------------


def test_bridge_coalesces_wakeups_and_loses_nothing():
    wakes = []
    bridge = EventBridge(lambda: wakes.append(1))
    drained: list[int] = []

    def produce(base: int) -> None:
        for i in range(5000):
            bridge.push(base + i)

    threads = [threading.Thread(target=produce, args=(n * 10_000,)) for n in range(4)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads) or len(bridge):
        drained.extend(bridge.drain())
    for t in threads:
        t.join()
    drained.extend(bridge.drain())
    assert sorted(drained) == sorted(n * 10_000 + i for n in range(4) for i in range(5000))
    # Per producer, order is kept.
    for n in range(4):
        mine = [x for x in drained if n * 10_000 <= x < (n + 1) * 10_000]
        assert mine == sorted(mine)
    # One wake-up per drain at most (plus the one in flight), never one per event.
    assert len(wakes) < 20_000


def test_bridge_posts_one_wakeup_until_drained():
    wakes = []
    bridge = EventBridge(lambda: wakes.append(1))
    for i in range(1000):
        bridge.push(i)
    assert len(wakes) == 1
    assert bridge.drain() == list(range(1000))
    bridge.push("next")
    assert len(wakes) == 2


def test_bridge_drain_limit_rearms_the_wakeup():
    wakes = []
    bridge = EventBridge(lambda: wakes.append(1))
    bridge.push_many(range(10))
    assert bridge.drain(limit=4) == [0, 1, 2, 3]
    assert len(wakes) == 2  # the rest will be drained on the next wake-up
    bridge.reset()
    assert bridge.drain() == [4, 5, 6, 7, 8, 9, RESET]


# -- transcript model -----------------------------------------------------------------------------


def _model(events) -> TranscriptModel:
    model = TranscriptModel()
    for ev in events:
        model.add(ev)
    return model


def test_agent_steps_become_blocks_and_requests_stream_into_their_step():
    model = _model(demo_events())
    kinds = [e.kind for e in model.entries]
    assert kinds == ["user", "retrieve", "tool_call", "tool", "answer"]
    tool_call = model.entries[2]
    assert tool_call.plain_output() == '{"name": "lookup_order", "arguments": {"order_id": 42}}'
    assert "12 tok" in tool_call.footer and "TTFT 11 ms" in tool_call.footer
    assert model.last_answer == "Order #42 ships on Friday."


def test_requests_without_agent_get_a_generation_block():
    events = [UserMessage(request_id="c0", text="hi"), step("c0", 0, 0.1, [tok("a")], tok("b", "bonus"), k=1)]
    model = _model(events)
    assert [e.kind for e in model.entries] == ["user", "generation"]
    assert model.entries[1].plain_output() == "ab"


def test_rejected_drafts_render_between_accepted_prefix_and_correction():
    model = _model([step("r", 0, 0.0, [tok("The")], tok(" dog", "correction"), rejected=[" cat", " sat"])])
    entry = model.entries[0]
    hidden = entry.render(STYLES, ViewOptions(show_rejected=False)).plain
    shown = entry.render(STYLES, ViewOptions(show_rejected=True))
    assert hidden.endswith("The dog")
    assert shown.plain.endswith("The cat sat dog")
    struck = [shown.plain[s.start : s.end] for s in shown.spans if s.style == STYLES["rejected"]]
    assert struck == [" cat sat"]


def test_headless_output_puts_rejected_drafts_where_the_dashboard_does():
    from specterm.render import step_text

    s = step("r", 0, 0.0, [tok("The")], tok(" dog", "correction"), rejected=[" cat", " sat"])
    model = _model([s])
    dashboard = model.entries[0].render(STYLES, ViewOptions(show_rejected=True)).plain
    assert step_text(s, show_rejected=True).plain == "The cat sat dog" and dashboard.endswith("The cat sat dog")


def test_forced_tokens_dimmed_only_when_toggled_on():
    model = _model([step("r", 0, 0.0, [tok("{", forced=True)], tok("x", "bonus"), k=1)])
    entry = model.entries[0]
    on = entry.render(STYLES, ViewOptions(show_forced=True))
    off = entry.render(STYLES, ViewOptions(show_forced=False))
    assert any(s.style.dim for s in on.spans if isinstance(s.style, Style))
    assert not any(s.style.dim for s in off.spans if isinstance(s.style, Style))


def test_untrusted_text_is_inert():
    model = _model(demo_events())
    rendered = "".join(e.render(STYLES, ViewOptions(show_rejected=True)).plain for e in model.entries)
    assert "\x1b" not in rendered and "\x07" not in rendered
    assert "\\x1b]0;pwned\\x07" in rendered
    # Markup in data stays literal text (Text.append never parses it).
    assert "[red]ok[/red]" in rendered and "[bold]not markup[/bold]" in rendered


def test_token_text_is_incremental_and_rebuilt_on_option_change():
    model = _model([step("r", i, 0.0, [tok(f"{i}")], tok("|\n" if i == 1 else "|", "bonus"), k=1) for i in range(3)])
    entry = model.entries[0]
    part = entry.parts[0]
    first = part.lines(STYLES, ViewOptions())
    assert [t.plain for t in first] == ["0|1|", "2|"]
    model.add(step("r", 3, 0.0, [tok("3")], tok("|", "bonus"), k=1))
    again = part.lines(STYLES, ViewOptions())
    # The finished line is the same object (wrapped once by the widget); the tail grew in place.
    assert again[0] is first[0] and again[1] is first[1] and again[1].plain == "2|3|"
    assert part.render(STYLES, ViewOptions()).plain == "0|1|\n2|3|"
    rebuilt = part.lines(STYLES, ViewOptions(show_rejected=True))
    assert rebuilt[0] is not first[0] and [t.plain for t in rebuilt] == ["0|1|", "2|3|"]


def test_entry_lines_match_the_whole_block_render():
    model = _model(demo_events())
    for entry in model.entries:
        for opts in (ViewOptions(), ViewOptions(show_rejected=True, show_forced=False)):
            whole = entry.render(STYLES, opts)
            lines = entry.lines(STYLES, opts)
            assert [t.plain for t in lines] == whole.plain.split("\n")
            assert entry.lines(STYLES, opts)[0] is lines[0]  # unchanged lines are not rebuilt


def test_truncated_last_step_with_accepted_beyond_tokens_renders():
    # vLLM may count a accepted drafts but emit fewer tokens when max_tokens cuts the step.
    s = SpecStep(
        request_id="r", index=0, drafted=[1, 2, 3], accepted=3, tokens=[tok("a")], rejected=[], rejected_text=[]
    )
    model = _model([s])
    assert model.entries[0].render(STYLES, ViewOptions(show_rejected=True)).plain.endswith("a")


# -- charts ---------------------------------------------------------------------------------------


def test_bar_and_sparkline_shapes():
    assert bar(0.5, 4) == "██  "
    assert bar(None, 3) == "···"
    assert bar(1.5, 2) == "██"
    assert sparkline([0.0, 1.0], 10, lo=0.0, hi=1.0) == "▁█"
    assert len(sparkline(list(range(100)), 20)) == 20
    assert sparkline([], 5) == ""


def test_an_ungrounded_answer_is_marked_in_its_block():
    from specterm.events import AgentStepFinished, AgentStepStarted

    events = [
        UserMessage(request_id="a1", text="How many orders in March 2026?"),
        AgentStepStarted(request_id="a1", step=3, kind="answer"),
        AgentStepFinished(
            request_id="a1",
            step=3,
            kind="answer",
            answer="126 orders in February 2026.",
            ungrounded=["February 2026", "126"],
        ),
    ]
    block = _model(events).entries[-1]
    text = "\n".join(t.plain for t in block.lines(STYLES, ViewOptions()))
    assert "⚠ ungrounded: February 2026, 126 (in no tool result of this turn)" in text
    grounded = _model([*events[:2], events[2].model_copy(update={"ungrounded": []})]).entries[-1]
    assert "ungrounded" not in "\n".join(t.plain for t in grounded.lines(STYLES, ViewOptions()))


def test_the_answer_reads_as_text_and_its_tokens_are_one_toggle_away():
    """A real agent turn (recorded from the engine): the answering step generated a JSON call; the
    block shows the answer itself, and the verdict-coloured call on request."""
    from pathlib import Path

    from specterm.session.reader import read_session

    data = read_session(Path(__file__).resolve().parent.parent / "sample_sessions" / "sql_agent_multistep.jsonl")
    block = _model(data.events).entries[-2]  # the last is the session's end
    text = "\n".join(t.plain for t in block.lines(STYLES, ViewOptions()))
    assert block.label.endswith("· answer") and block.answer and block.answer in text
    assert '"answer"' not in text  # not the JSON it was generated as
    raw = "\n".join(t.plain for t in block.lines(STYLES, ViewOptions(show_answer_tokens=True)))
    assert '"answer"' in raw and block.plain_output() in raw.replace("\n", "")
