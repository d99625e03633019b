"""A model that repeats its previous call exactly is looping: the loop does not run the call again,
says so, and makes the next generation answer-only (seen on the Qwen pair: the same query three
times, until the last allowed step forced an answer).

The model here is a scripted stand-in (a test double, named as one): making a real model loop on
demand is not possible. The tool it calls is the real one (sql_analyst's query_sql on its SQLite file).
"""

from __future__ import annotations

import json

from specterm.agent import AgentRunner, load_agent
from specterm.agent.prompt import call_schema
from specterm.engine.base import SpecEngine
from specterm.events import Error, RequestFinished, ToolCall, ToolResult

CALL = json.dumps({"tool": "query_sql", "arguments": {"sql": "SELECT count(*) FROM customers WHERE country = 'JP'"}})


class LoopingModel(SpecEngine):
    """Scripted stand-in for a model: the same call every time, an answer when only an answer is allowed."""

    def __init__(self, agent, calls: list[str]) -> None:
        self.answer_only = call_schema(agent, answer_only=True)
        self.calls, self.prompts = list(calls), []

    def generate(self, prompt, params, sink, *, request_id=None, cancel=None):
        self.prompts.append(prompt)
        text = json.dumps({"answer": "42 customers."}) if params.json_schema == self.answer_only else self.calls.pop(0)
        done = RequestFinished(request_id=request_id or "r", text=text, output_tokens=10, finish_reason="stop")
        sink(done)
        return done

    def close(self) -> None:
        pass


def test_a_repeated_call_is_not_run_again_and_the_next_step_answers():
    agent = load_agent("sql_analyst")
    model = LoopingModel(agent, [CALL, CALL, CALL])
    events: list = []
    result = AgentRunner(agent, model).run("How many customers are from Japan?", events.append)
    assert result.ok and result.answer == "42 customers."
    assert len(result.calls) == 1 and result.generations == 3  # call, repeat, answer (was 4 steps + answer)
    assert sum(isinstance(e, ToolCall) for e in events) == 1
    assert sum(isinstance(e, ToolResult) for e in events) == 1
    warning = [e for e in events if isinstance(e, Error)]
    assert len(warning) == 1 and warning[0].level == "warning" and "repeats the previous call" in warning[0].message
    # The answer-only step sees the same conversation as the repeat did (nothing appended, prefix cached).
    assert model.prompts[2] == model.prompts[1]


def test_a_different_call_after_a_result_still_runs():
    agent = load_agent("sql_analyst")
    other = json.dumps({"tool": "query_sql", "arguments": {"sql": "SELECT count(*) FROM customers"}})
    model = LoopingModel(agent, [CALL, other, CALL])
    result = AgentRunner(agent, model).run("How many customers are from Japan?", lambda e: None)
    assert [c.arguments["sql"] for c in result.calls] == [
        json.loads(CALL)["arguments"]["sql"],
        json.loads(other)["arguments"]["sql"],
        json.loads(CALL)["arguments"]["sql"],
    ]
