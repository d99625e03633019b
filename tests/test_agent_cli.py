"""`specterm run --agent NAME PROMPT`: one-line errors before any engine starts; a real run's
``--json`` stream is a replayable agent session."""

from __future__ import annotations

import subprocess
import sys

import pytest

from specterm.cli import main
from specterm.events import AgentStepFinished, SessionStarted, ToolCall, ToolResult, parse_event

# A small agent (one calculator, no retrieval, two generations) keeps the engine run short.
# tool_first: the first generation can only be the call (its one tool, its numbers bounded by the
# grammar), so the run takes the same path whatever tokens the tiny pair picks on this CPU.
SMALL = """\
system = "You compute error budgets."
max_steps = 2
tool_first = true
max_tokens = 80
answer_chars = 20
[[tools]]
name = "sla_budget"
description = "Error-budget minutes."
handler = "ops.sla_budget"
[tools.parameters]
type = "object"
required = ["slo_percent", "window_days"]
additionalProperties = false
properties.slo_percent = { type = "number", minimum = 90, maximum = 99.99 }
properties.window_days = { type = "integer", minimum = 1, maximum = 90 }
"""


def one_line_error(capsys, *argv):
    rc = main(["run", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("specterm: error: "), err
    return err[0]


def test_unknown_agent(capsys):
    assert "no agent named 'nope'" in one_line_error(capsys, "--agent", "nope", "hi", "--no-record")


def test_broken_agent_definition_names_file_and_field(capsys, tmp_path, monkeypatch):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "agent.toml").write_text(SMALL.replace("maximum = 90", "maximum = 'ninety'"))
    monkeypatch.setenv("SPECTERM_AGENTS_DIR", str(tmp_path))
    line = one_line_error(capsys, "--agent", "bad", "hi", "--no-record")
    assert f"{tmp_path / 'bad' / 'agent.toml'}: tools[0].parameters: not a valid JSON Schema" in line


@pytest.mark.parametrize("prompt, words", [("  ", "empty request"), ("a\x07b", "control character")])
def test_bad_request_is_refused_before_the_engine(capsys, prompt, words):
    assert words in one_line_error(capsys, "--agent", "ops_assistant", prompt, "--no-record")


def test_schema_and_agent_do_not_mix(capsys):
    assert "--schema cannot be combined" in one_line_error(
        capsys, "--agent", "ops_assistant", "--schema", "x.json", "hi", "--no-record"
    )


@pytest.mark.engine
def test_run_agent_json_is_an_agent_session(tiny_pair, tmp_path, monkeypatch, capsys):
    """In this process (``specterm run`` in a subprocess of its own is ``test_cli_run``'s): the
    suite's first engine, and no second import of vLLM for it."""
    (tmp_path / "budget").mkdir()
    (tmp_path / "budget" / "agent.toml").write_text(SMALL)
    monkeypatch.setenv("SPECTERM_AGENTS_DIR", str(tmp_path))
    argv = ["run", "--json", "--agent", "budget", "--target", tiny_pair[0], "--draft", tiny_pair[1]]
    rc = main([*argv, "--no-record", "Budget for 99.9% over 30 days?"])
    out = capsys.readouterr()
    assert rc in (0, 1), out.err[-2000:]
    events = [parse_event(line) for line in out.out.splitlines()]
    assert isinstance(events[0], SessionStarted) and events[0].agent == "budget"
    assert [e.type for e in events][1] == "user_message" and events[-1].type == "session_ended"
    calls = [e for e in events if isinstance(e, ToolCall)]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert calls and calls[0].name == "sla_budget" and len(results) == len(calls)
    assert results[0].ok and results[0].content.startswith("error budget for")
    finished = [e for e in events if isinstance(e, AgentStepFinished)]
    assert finished[-1].kind in ("answer", "tool_call")
    assert rc == (0 if finished[-1].ok else 1)
    if finished[-1].ok:  # the answer is an event, so a replay of the recording shows it like run did
        answer = finished[-1].answer
        assert answer and [f for f in finished if f.answer is not None] == [finished[-1]]
        session = tmp_path / "s.jsonl"
        session.write_text(out.out)
        replay = subprocess.run(
            [sys.executable, "-m", "specterm", "replay", "--headless", "--speed", "0", str(session)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert replay.returncode == 0 and f"answer: {answer}" in replay.stdout, replay.stderr[-2000:]
