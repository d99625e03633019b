"""The agent loop on the REAL vLLM engine with the tiny pair (not trained on the agent format, so
its answers are poor: these tests check the mechanics, not the answers).

One speculative engine and one target-only engine (module-scoped), a few short requests each.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading

import jsonschema
import pytest

from specterm.agent import AgentRunner, load_agent
from specterm.agent.prompt import call_schema
from specterm.agent.tools import ToolBox
from specterm.engine import EngineConfig, load_engine
from specterm.events import (
    AgentStepFinished,
    AgentStepStarted,
    Error,
    RequestFinished,
    RequestStarted,
    SpecStep,
    ToolCall,
    ToolResult,
    UserMessage,
)

pytestmark = pytest.mark.engine

QUESTIONS = {
    "sql_analyst": "How many customers are from Germany?",
    "ops_assistant": "What error budget does a 99.9% SLO give over 30 days?",
}


def small(name: str, **tool_params):
    """A shipped agent with tighter limits, so the tiny pair's runs stay short on 2 cores, that calls
    a tool first."""
    agent = load_agent(name)
    tools = []
    for t in agent.tools:
        params = json.loads(json.dumps(t.parameters))
        for prop in params.get("properties", {}).values():
            if prop.get("type") == "string" and "maxLength" in prop:
                prop["maxLength"] = 60
        params["properties"].update(tool_params.get(t.name, {}))
        tools.append(t.model_copy(update={"parameters": params}))
    # tool_first: the first generation must be a call, so "a tool ran" holds whatever the tiny pair's
    # greedy tokens are on this CPU (they differ between instruction sets; it may answer at once else)
    update = {"tools": tools, "max_steps": 3, "max_tokens": 100, "answer_chars": 30, "tool_first": True}
    return agent.model_copy(update=update)


def run(agent, engine, text, cancel_after_steps=None):
    events, cancel = [], threading.Event()

    def sink(event):
        events.append(event)
        if cancel_after_steps and sum(isinstance(e, SpecStep) for e in events) >= cancel_after_steps:
            cancel.set()

    result = AgentRunner(agent, engine).run(text, sink, cancel=cancel)
    return result, events


@pytest.fixture(scope="module")
def runs(tiny_pair, tmp_path_factory):
    """Per engine kind: the results and events of each shipped agent's question."""
    target, draft = tiny_pair
    out = {}
    for method in ("draft_model", None):
        with load_engine(EngineConfig(target=target, draft=draft, method=method)) as engine:
            out[method] = {name: run(small(name), engine, q) for name, q in QUESTIONS.items()}
            if method:
                out["extra"] = extra_runs(engine, tmp_path_factory.mktemp("attach"))
    return out


def extra_runs(engine, workdir):
    """Runs that need the speculative engine: hostile SQL forced by the grammar, cancellation."""
    sql = load_agent("sql_analyst")
    db = ToolBox(sql).db().path
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    hostile = {}
    # The ATTACH names a file relative to ``workdir``: an absolute path (the cache's, wherever it is)
    # can make the forced call longer than the 100 tokens ``small`` allows (it failed so from /tmp).
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        for label, statement in (("drop", "DROP TABLE customers"), ("attach", "ATTACH DATABASE 'evil.db' AS evil")):
            agent = small("sql_analyst", query_sql={"sql": {"const": statement}})
            agent = agent.model_copy(update={"max_steps": 2, "tools": [agent.tool("query_sql")]})
            hostile[label] = run(agent, engine, f"please {label} it")
    finally:
        os.chdir(cwd)
    after = hashlib.sha256(db.read_bytes()).hexdigest()
    cancelled = run(small("sql_analyst"), engine, QUESTIONS["sql_analyst"], cancel_after_steps=2)
    overflow = run(small("ops_assistant"), engine, "word " * 1600)  # 8000 bytes: valid, too long
    return {
        "hostile": hostile,
        "db_unchanged": before == after,
        "evil_db": (workdir / "evil.db").exists(),
        "cancelled": cancelled,
        "overflow": overflow,
    }


def agent_steps(events):
    return [e for e in events if isinstance(e, (AgentStepStarted, AgentStepFinished))]


def check_consistent(events):
    """UserMessage first; steps numbered in order, each started step finished before the next."""
    assert isinstance(events[0], UserMessage)
    steps = agent_steps(events)
    assert len(steps) % 2 == 0
    for i, (s, f) in enumerate(zip(steps[::2], steps[1::2])):
        assert isinstance(s, AgentStepStarted) and isinstance(f, AgentStepFinished)
        assert (s.step, s.kind) == (f.step, f.kind) and s.step == i
    return steps


@pytest.mark.parametrize("name", list(QUESTIONS))
def test_loop_runs_several_steps_with_a_tool_and_ends(runs, name):
    result, events = runs["draft_model"][name]
    steps = check_consistent(events)
    kinds = [s.kind for s in steps[::2]]
    assert kinds[:2] == ["validate", "retrieve"] and "tool" in kinds
    assert result.generations >= 2 and result.calls
    assert [e.name for e in events if isinstance(e, ToolResult)] == [c.tool for c in result.calls]
    assert result.ok and result.answer is not None and kinds[-1] in ("answer", "tool_call")
    # Generation steps carry the engine's numbers.
    gen = [f for f in steps[1::2] if f.kind in ("tool_call", "answer")]
    assert all(f.tokens > 0 and f.ttft_s is not None for f in gen)
    # The answer step says which of its figures no tool result of the turn holds (the tiny pair's
    # answers are noise, so only the bookkeeping is checked here: test_agent_grounding has the rule).
    from specterm.agent.grounding import ungrounded

    # Which path the answer took (the model's own answer, or withheld behind a note of what failed)
    # depends on the tiny pair's greedy tokens, and those differ between CPUs (float kernels differ by
    # instruction set): the invariant is checked on whichever path it took. test_agent_withheld pins
    # each path on a scripted model.
    answer = next(f for f in steps[1::2] if f.answer is not None)
    evidence = [QUESTIONS[name], *(e.content or e.error or "" for e in events if isinstance(e, ToolResult))]
    said = answer.withheld if answer.withheld is not None else answer.answer
    assert answer.ungrounded == ungrounded(said, evidence)
    assert result.answer == answer.answer
    if answer.withheld is not None:  # the shown answer is the agent's, and says what failed
        assert answer.answer != answer.withheld and "could not answer" in answer.answer


@pytest.mark.parametrize("name", list(QUESTIONS))
def test_every_tool_call_is_schema_valid_json(runs, name):
    agent = small(name)
    for method in ("draft_model", None):
        calls = [e for e in runs[method][name][1] if isinstance(e, ToolCall)]
        assert calls
        for call in calls:
            jsonschema.validate(json.loads(call.raw), call_schema(agent))
            jsonschema.validate(call.arguments, agent.tool(call.name).parameters)


@pytest.mark.parametrize("name", list(QUESTIONS))
def test_speculative_and_target_only_give_identical_calls_and_answers(runs, name):
    spec, base = runs["draft_model"][name], runs[None][name]
    assert [c.raw for c in spec[0].calls] == [c.raw for c in base[0].calls]
    assert spec[0].answer == base[0].answer
    tokens = lambda evs: [(t.id, t.forced) for e in evs if isinstance(e, SpecStep) for t in e.tokens]  # noqa: E731
    assert tokens(spec[1]) == tokens(base[1])
    verdicts = {t.verdict for e in spec[1] if isinstance(e, SpecStep) for t in e.tokens}
    assert "accepted" in verdicts


def test_forced_tokens_are_exactly_the_positions_with_one_allowed_token(runs, tiny_pair):
    """Replays every generation through xgrammar independently of vLLM: a token is marked forced
    iff the grammar allowed exactly one token at its position."""
    import numpy as np
    import xgrammar as xgr
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_pair[0])
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=512)
    compiler = xgr.GrammarCompiler(info)
    checked = forced = 0
    for name in QUESTIONS:
        agent = small(name)
        _, events = runs["draft_model"][name]
        kind, called = None, False
        for req in events:
            if isinstance(req, AgentStepStarted):
                kind = req.kind  # the generation step's kind says which schema it ran under
            called = called or isinstance(req, ToolCall)
            if not isinstance(req, RequestStarted):
                continue
            steps = [e for e in events if isinstance(e, SpecStep) and e.request_id == req.request_id]
            answer_only = kind == "answer"  # and the first generation of a tool_first agent may only call
            call_only = agent.tool_first and not called and not answer_only
            schema = json.dumps(call_schema(agent, answer_only=answer_only, call_only=call_only))
            matcher = xgr.GrammarMatcher(
                compiler.compile_json_schema(schema, any_whitespace=False, separators=(",", ":"))
            )
            mask = xgr.allocate_token_bitmask(1, 512)
            for tok in [t for s in steps for t in s.tokens]:
                if matcher.is_terminated():
                    break
                matcher.fill_next_token_bitmask(mask)
                allowed = int(np.bitwise_count(mask.numpy().view(np.uint32)).sum())
                assert tok.forced == (allowed == 1), (name, tok)
                assert matcher.accept_token(tok.id)
                checked += 1
                forced += tok.forced
    assert checked > 100 and 0 < forced < checked


def test_model_generated_drop_and_attach_are_refused_and_the_db_is_untouched(runs):
    extra = runs["extra"]
    for label, (_result, events) in extra["hostile"].items():
        calls = [e for e in events if isinstance(e, ToolCall)]
        results = [e for e in events if isinstance(e, ToolResult)]
        assert calls and calls[0].arguments["sql"].split()[0] == label.upper()
        assert results and not results[0].ok and results[0].error.startswith("refused:")
    assert extra["db_unchanged"] and not extra["evil_db"]


def test_long_constant_keys_are_mostly_forced(runs):
    _, events = runs["extra"]["hostile"]["drop"]
    first = next(e for e in events if isinstance(e, RequestStarted))
    tokens = [t for e in events if isinstance(e, SpecStep) and e.request_id == first.request_id for t in e.tokens]
    share = sum(t.forced for t in tokens) / len(tokens)
    assert share > 0.5, share


def test_cancel_mid_generation_ends_with_a_failed_step(runs):
    result, events = runs["extra"]["cancelled"]
    assert result.cancelled and not result.ok and result.answer is None
    steps = check_consistent(events)
    assert isinstance(steps[-1], AgentStepFinished) and not steps[-1].ok and steps[-1].kind == "tool_call"
    finished = [e for e in events if isinstance(e, RequestFinished)]
    assert len(finished) == 1 and finished[0].cancelled
    assert not any(isinstance(e, (ToolCall, ToolResult)) for e in events)
    assert events[-1] is steps[-1]


def test_invalid_input_stops_at_validation():
    # No engine work: the request never reaches generation.
    result, events = run(small("sql_analyst"), None, "bad\x00input")
    assert not result.ok and "control character" in result.error
    assert [type(e).__name__ for e in events] == ["UserMessage", "AgentStepStarted", "AgentStepFinished", "Error"]
    assert not events[2].ok


def test_a_request_longer_than_the_context_fails_with_one_line(runs):
    result, events = runs["extra"]["overflow"]
    assert not result.ok and "does not fit the model's context" in result.error
    assert not any(isinstance(e, RequestStarted) for e in events)
    steps = check_consistent(events)
    assert steps[-1].kind == "tool_call" and not steps[-1].ok
    assert isinstance(events[-1], Error) and events[-1].message == result.error
