"""When the agent withholds the model's answer, and when it does not: each path pinned on a scripted
model, so no test depends on which path a real tiny model's greedy tokens happen to take on this CPU
(they differ between CPUs: tests/test_agent_loop.py checks the invariant on whichever path it took).

The model here is a scripted stand-in (a test double, named as one): it returns the texts it is
given, in order. The tool it calls is the real one (sql_analyst's query_sql on its SQLite file), so
a failing call fails in SQLite and a working one returns the shop's real figures.
"""

from __future__ import annotations

import json
import re

from specterm.agent import AgentRunner, load_agent
from specterm.agent.tools import ToolBox
from specterm.engine.base import SpecEngine
from specterm.events import AgentStepFinished, Error, RequestFinished


class ScriptedModel(SpecEngine):
    """Scripted stand-in for a model: each generation returns the next text of ``texts``."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = list(texts)

    def generate(self, prompt, params, sink, *, request_id=None, cancel=None):
        done = RequestFinished(
            request_id=request_id or "r", text=self.texts.pop(0), output_tokens=10, finish_reason="stop"
        )
        sink(done)
        return done

    def close(self) -> None:
        pass


def call(sql: str) -> str:
    return json.dumps({"tool": "query_sql", "arguments": {"sql": sql}})


def answer(text: str) -> str:
    return json.dumps({"answer": text})


BAD = call("SELECT weather('Paris')")  # SQLite: no such function: weather
COUNT_DE = call("SELECT count(*) FROM customers WHERE country = 'DE'")


def run(texts: list[str], question: str = "How many customers are from Germany?"):
    agent = load_agent("sql_analyst")
    events: list = []
    result = AgentRunner(agent, ScriptedModel(texts)).run(question, events.append)
    answers = [e for e in events if isinstance(e, AgentStepFinished) and e.answer is not None]
    assert len(answers) == 1 and result.ok and result.answer == answers[0].answer
    return result, answers[0], events


def germans() -> int:
    """The shop's real count, from the same tool the agent calls."""
    out = ToolBox(load_agent("sql_analyst")).call("query_sql", json.loads(COUNT_DE)["arguments"])
    assert out.ok
    return int(re.findall(r"\d+", out.content)[-1])


def test_an_invented_figure_after_a_failed_call_is_withheld_after_one_retry():
    result, step, events = run([BAD, answer("There are 190 customers."), answer("There are 190 customers.")])
    assert step.withheld == "There are 190 customers." and step.ungrounded == ["190"]
    assert step.answer.startswith("I could not answer that") and "query_sql failed" in step.answer
    assert "no such function: weather" in step.answer and "190" not in step.answer
    sent_back = [e for e in events if isinstance(e, Error) and "sent back to the model" in e.message]
    assert len(sent_back) == 1


def test_an_answer_without_figures_after_every_call_failed_is_withheld():
    """Issue 42 item 9: "Paris has a pleasant weather." after query_sql failed is unsupported."""
    result, step, _ = run([BAD, answer("Paris has a pleasant weather.")], "What's the weather like in Paris today?")
    assert step.withheld == "Paris has a pleasant weather."
    assert step.ungrounded == []  # no figure was invented: the failure alone withholds it
    assert "query_sql failed (SQL error: no such function: weather)" in step.answer
    assert "outside what" in step.answer  # says the question may be beyond the agent's tools
    assert "pleasant" not in result.answer


def test_every_failed_call_is_named_once():
    other = call("SELECT * FROM forecasts")  # no such table
    _, step, _ = run([BAD, other, answer("Sunny.")], "Weather in Paris?")
    assert step.withheld == "Sunny."
    assert "no such table: forecasts" in step.answer  # the last failure is the one said
    assert step.answer.count("I could not answer that") == 1


def test_a_grounded_answer_after_a_working_call_is_kept():
    n = germans()
    _, step, _ = run([COUNT_DE, answer(f"{n} customers are from Germany.")])
    assert step.withheld is None and step.ungrounded == []
    assert step.answer == f"{n} customers are from Germany."


def test_a_failed_call_then_a_working_one_keeps_the_answer():
    n = germans()
    _, step, _ = run([BAD, COUNT_DE, answer(f"{n} customers are from Germany.")])
    assert step.withheld is None and step.answer == f"{n} customers are from Germany."


def test_an_answer_with_no_call_at_all_is_not_withheld_for_failures():
    agent = load_agent("ops_assistant")  # answers some questions without a tool
    events: list = []
    result = AgentRunner(agent, ScriptedModel([answer("Hello! Ask me about an incident.")])).run("hi", events.append)
    step = next(e for e in events if isinstance(e, AgentStepFinished) and e.answer is not None)
    assert result.answer == "Hello! Ask me about an incident." and step.withheld is None
