"""Grammar-aware drafting on the real vLLM CPU engine (``engine/grammar_draft.py``), tiny pair.

What it must keep: greedy output token-identical to target-only, verdicts reconciled with vLLM's
counters, and at T > 0 the target's distribution. What it must change: no draft the grammar forbids
(vLLM would drop it), drafts from the grammar's forced runs marked and counted, fewer draft passes.
Plain ``draft_model`` on the same requests shows each count can be non-zero.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from specterm.engine import EngineConfig, GenerationParams, load_engine
from specterm.events import EngineCounters, SpecStep

pytestmark = pytest.mark.engine

TOOL = {
    "type": "object",
    "properties": {
        "tool": {"enum": ["query_sql", "search_docs"]},
        "arguments": {
            "type": "object",
            "properties": {"sql": {"type": "string", "maxLength": 48}},
            "required": ["sql"],
            "additionalProperties": False,
        },
    },
    "required": ["tool", "arguments"],
    "additionalProperties": False,
}
RECORD = {
    "type": "object",
    "properties": {
        "customer": {"type": "string", "maxLength": 16},
        "status": {"enum": ["placed", "shipped", "refunded"]},
        "items": {"type": "array", "maxItems": 2, "items": {"type": "integer", "minimum": 0, "maximum": 99}},
    },
    "required": ["customer", "status", "items"],
    "additionalProperties": False,
}
STATUS = {
    "type": "object",
    "properties": {"status": {"enum": ["placed", "shipped", "refunded"]}},
    "required": ["status"],
    "additionalProperties": False,
}
"""At most 21 characters, so at most 21 tokens: it finishes within ``max_tokens`` whatever the
model picks (the others may be cut, depending on the tokens the tiny pair takes on this CPU)."""
REQUESTS = [
    ("Call a tool:", TOOL),
    ('{"tool": "query_sql", "arguments": {"sql": "SELECT', TOOL),
    ("The customer bob placed 12 refunds with", RECORD),
    ("SELECT name, total FROM orders WHERE", RECORD),
    ("The order was", STATUS),
]
PLAIN = ["The customer alice placed", "Runbook: if the payments queue backs up,"]
K = 4


def _run(engine, prompt, schema):
    events = []
    finished = engine.generate(prompt, GenerationParams(max_tokens=48, json_schema=schema), events.append)
    return (
        finished,
        [e for e in events if isinstance(e, SpecStep)],
        [e for e in events if isinstance(e, EngineCounters)],
    )


@pytest.fixture(scope="module")
def runs(tiny_pair):
    """Every request through target-only, plain draft_model and draft_model with grammar drafting."""
    target, draft = tiny_pair
    out = {}
    for name, extra in (
        ("target", {"method": None}),
        ("plain", {"grammar_drafting": False}),
        ("grammar", {"grammar_drafting": None}),
    ):  # the default: on where it applies
        config = EngineConfig(target=target, draft=draft, num_speculative_tokens=K, **extra)
        with load_engine(config) as engine:
            assert engine.capabilities.grammar_drafting is (name == "grammar")
            out[name] = [_run(engine, p, s) for p, s in REQUESTS] + [_run(engine, p, None) for p in PLAIN]
    return out


def _ids(steps):
    return [t.id for s in steps for t in s.tokens]


def test_greedy_output_is_token_identical_to_target_only(runs):
    for i, ((f_t, s_t, _), (f_g, s_g, _)) in enumerate(zip(runs["target"], runs["grammar"])):
        assert _ids(s_g) == _ids(s_t), f"request {i}"
        assert f_g.text == f_t.text
    # Each structured request either finished under its grammar or was cut at max_tokens; which of
    # them are cut depends on the tokens taken, but STATUS always finishes.
    for (_, schema), (finished, _, _) in zip(REQUESTS, runs["grammar"]):
        if finished.finish_reason == "stop":
            jsonschema.validate(json.loads(finished.text), schema)
        else:
            assert finished.finish_reason == "length" and finished.output_tokens == 48, finished
    assert runs["grammar"][REQUESTS.index(("The order was", STATUS))][0].finish_reason == "stop"


def test_verdicts_reconcile_with_vllms_counters(runs):
    for finished, _, counters in runs["grammar"]:
        assert counters and counters[0].matched, counters[0].detail if counters else finished


def test_masked_drafts_are_never_dropped_or_invalid(runs):
    structured = len(REQUESTS)
    for _, steps, _ in runs["grammar"][:structured]:
        assert sum(s.dropped_drafts for s in steps) == 0
        assert sum(s.invalid_drafts for s in steps) == 0
    # The count is real: the unmasked draft proposes what the grammar forbids on the same requests.
    assert sum(s.dropped_drafts for _, steps, _ in runs["plain"][:structured] for s in steps) > 0


def test_forced_runs_are_proposed_as_grammar_drafts_and_marked_when_accepted(runs):
    structured = runs["grammar"][: len(REQUESTS)]
    steps = [s for _, ss, _ in structured for s in ss]
    assert sum(s.grammar_drafts for s in steps) > 0
    marked = [t for s in steps for t in s.tokens if t.grammar]
    assert marked and all(t.verdict == "accepted" for t in marked)
    for s in steps:  # a mark never exceeds what the grammar drafted, nor what was accepted
        assert sum(t.grammar for t in s.tokens) <= min(s.grammar_drafts, s.accepted)
    assert not any(s.grammar_drafts for _, ss, _ in runs["plain"] for s in ss)


def test_fewer_draft_passes_per_token_and_unchanged_without_a_grammar(runs):
    def passes(name, sl):
        rs = runs[name][sl]
        return (
            sum(s.draft_passes or 0 for _, ss, _ in rs for s in ss),
            sum(len(s.tokens) for _, ss, _ in rs for s in ss),
        )

    structured, free = slice(0, len(REQUESTS)), slice(len(REQUESTS), None)
    plain_passes, plain_tokens = passes("plain", structured)
    grammar_passes, grammar_tokens = passes("grammar", structured)
    assert plain_tokens == grammar_tokens
    assert grammar_passes < plain_passes
    # Plain draft_model: k passes in every step, for every request, whatever becomes of the drafts.
    for _, steps, _ in runs["plain"]:
        assert all(s.draft_passes == K for s in steps)
    # Without a grammar, grammar drafting is plain drafting: same drafts, same passes.
    for (_, s_p, _), (_, s_g, _) in zip(runs["plain"][free], runs["grammar"][free]):
        assert [s.drafted for s in s_g] == [s.drafted for s in s_p]
        assert [s.draft_passes for s in s_g] == [s.draft_passes for s in s_p]


def test_grammar_drafting_refuses_other_methods_in_one_line(tiny_pair):
    from specterm.engine.vllm_engine import validate_config
    from specterm.errors import ConfigError

    target, draft = tiny_pair
    with pytest.raises(ConfigError, match="needs --method draft_model, not ngram"):
        validate_config(EngineConfig(target=target, method="ngram", grammar_drafting=True))
    validate_config(EngineConfig(target=target, method=None, grammar_drafting=True))  # target-only ignores it
    assert not EngineConfig(target=target, method="ngram").drafts_with_grammar  # the default: only where it applies
    assert not EngineConfig(target=target, draft=draft, tensor_parallel_size=2).drafts_with_grammar
    assert EngineConfig(target=target, draft=draft).drafts_with_grammar


@pytest.fixture(scope="module")
def sampling_engines(tiny_pair):
    target, draft = tiny_pair
    spec = load_engine(EngineConfig(target=target, draft=draft, num_speculative_tokens=K, grammar_drafting=True))
    plain = load_engine(EngineConfig(target=target, method=None))
    yield spec, plain
    spec.close()
    plain.close()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_structured_samples_follow_the_target_distribution(sampling_engines, temperature):
    from specterm.bench.distribution import run_distribution_check

    check = run_distribution_check(
        *sampling_engines, "The customer bob placed", temperature=temperature, n=1500, positions=8, json_schema=RECORD
    )
    assert check.ok, check.describe()
    assert sum(t.categories >= 3 for t in check.tests) >= 2, "the schema must leave real choices: " + check.describe()


def test_by_default_a_failed_install_falls_back_to_plain_drafting_and_asked_for_it_is_one_line(tiny_pair, monkeypatch):
    from specterm.engine import grammar_draft
    from specterm.errors import EngineUnavailable

    def broken(worker, state):
        raise RuntimeError("the proposer moved")

    monkeypatch.setattr(grammar_draft, "install", broken)
    target, draft = tiny_pair
    with load_engine(EngineConfig(target=target, draft=draft)) as engine:
        assert not engine.capabilities.grammar_drafting
        finished, steps, counters = _run(engine, *REQUESTS[0])
        assert counters[0].matched and not any(s.grammar_drafts for s in steps)
    with pytest.raises(
        EngineUnavailable, match="grammar drafting could not be installed: RuntimeError: the proposer moved"
    ):
        load_engine(EngineConfig(target=target, draft=draft, grammar_drafting=True))
