"""The real vLLM CPU engine on the tiny trained pair: exact verdicts, losslessness, reconciliation.

One engine per configuration (module-scoped) keeps this file to a few minutes on 2 cores.
"""

from __future__ import annotations

import json
import threading

import jsonschema
import pytest

from specterm.bench.workloads import ENGINE_CHECK, RAW
from specterm.engine import EngineConfig, GenerationParams, load_engine
from specterm.events import EngineCounters, RequestFinished, SpecStep

pytestmark = pytest.mark.engine

PROMPTS = [
    *ENGINE_CHECK,
    RAW["toolcalls"][2],
    *RAW["prose"][2:4],
    RAW["toolcalls"][3],
    "then drain the search workers",
    "ORDER BY created_at LIMIT",
    "The quick brown fox",
    "{",
    "Speculative decoding pairs a small draft model",
    "The customer bob placed 12 refunds with",
    "scale the gateway service within",
    '{"tool": "query_sql", "arguments": {"sql": "SELECT status, amount FROM payments WHERE',
    "check the billing",
    "Runbook: if the auth queue backs up, roll back the",
    "id, name FROM customers WHERE country >",
    "page the owner of",
]
MAX_TOKENS = 32


def _run(engine, prompt, **kw):
    events = []
    finished = engine.generate(prompt, GenerationParams(max_tokens=MAX_TOKENS, **kw), events.append)
    steps = [e for e in events if isinstance(e, SpecStep)]
    return finished, steps, events


@pytest.fixture(scope="module")
def outputs(tiny_pair):
    """Token ids per prompt for target-only, draft_model and ngram, plus the spec runs' events."""
    target, draft = tiny_pair
    results = {}
    for method in (None, "draft_model", "ngram"):
        config = EngineConfig(target=target, draft=draft, method=method, num_speculative_tokens=4)
        with load_engine(config) as engine:
            results[method] = [_run(engine, p) for p in PROMPTS]
    return results


def _ids(steps):
    return [t.id for s in steps for t in s.tokens]


@pytest.mark.parametrize("method", ["draft_model", "ngram"])
def test_greedy_speculative_output_is_identical_to_target_only(outputs, method):
    assert len(PROMPTS) >= 20
    for prompt, (base, spec) in zip(PROMPTS, zip(outputs[None], outputs[method])):
        assert _ids(spec[1]) == _ids(base[1]), prompt
        assert spec[0].text == base[0].text


@pytest.mark.parametrize("method", ["draft_model", "ngram"])
def test_verdicts_reconcile_with_vllm_counters_on_every_request(outputs, method):
    for _, _, events in outputs[method]:
        counters = [e for e in events if isinstance(e, EngineCounters)]
        assert len(counters) == 1
        assert counters[0].matched, counters[0].detail
        assert counters[0].ours["accepted"] == counters[0].vllm["accepted"]


@pytest.mark.parametrize("method", ["draft_model", "ngram"])
def test_every_step_obeys_the_verdict_invariants(outputs, method):
    seen = set()
    for finished, steps, _ in outputs[method]:
        assert sum(len(s.tokens) for s in steps) == finished.output_tokens
        for i, s in enumerate(steps):
            verdicts = [t.verdict for t in s.tokens]
            seen.update(verdicts)
            assert s.rejected == s.drafted[s.accepted :]
            if not s.drafted:
                assert set(verdicts) == {"target"}
                continue
            last = i == len(steps) - 1
            if not last:  # the last step may be cut by max_tokens
                assert s.accepted + 1 == len(s.tokens)
            assert verdicts[: s.accepted] == ["accepted"] * min(s.accepted, len(verdicts))
            if len(s.tokens) == s.accepted + 1:
                expected = "bonus" if s.accepted == len(s.drafted) else "correction"
                assert verdicts[-1] == expected
                if expected == "correction":
                    assert s.tokens[-1].id != s.drafted[s.accepted]
            n = min(s.accepted, len(s.tokens))
            assert [t.id for t in s.tokens[:n]] == s.drafted[:n]
    if method == "draft_model":
        assert {"accepted", "correction", "bonus", "target"} <= seen


def test_target_only_has_only_target_verdicts_and_no_counters(outputs):
    for _, steps, events in outputs[None]:
        assert all(t.verdict == "target" for s in steps for t in s.tokens)
        assert all(len(s.tokens) == 1 for s in steps)
        assert not any(isinstance(e, EngineCounters) for e in events)


def test_text_pieces_concatenate_to_the_output_text(outputs):
    for finished, steps, _ in outputs["draft_model"]:
        assert "".join(t.text for s in steps for t in s.tokens) == finished.text


SCHEMA = {
    "type": "object",
    "properties": {
        "tool": {"enum": ["query_sql", "search_docs"]},
        "arguments": {
            "type": "object",
            "properties": {"sql": {"type": "string", "maxLength": 40}},
            "required": ["sql"],
            "additionalProperties": False,
        },
    },
    "required": ["tool", "arguments"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def spec_engine(tiny_pair):
    target, draft = tiny_pair
    with load_engine(EngineConfig(target=target, draft=draft, method="draft_model")) as engine:
        yield engine


def test_json_schema_request_is_schema_valid_with_speculation(spec_engine):
    events = []
    finished = spec_engine.generate("Call a tool:", GenerationParams(max_tokens=120, json_schema=SCHEMA), events.append)
    assert finished.finish_reason == "stop"
    jsonschema.validate(json.loads(finished.text), SCHEMA)
    counters = [e for e in events if isinstance(e, EngineCounters)]
    assert counters and counters[0].matched, counters[0].detail


def test_cancel_mid_generation_leaves_a_consistent_stream(spec_engine):
    cancel = threading.Event()
    events = []

    def sink(event):
        events.append(event)
        if isinstance(event, SpecStep) and event.index == 2:
            cancel.set()

    finished = spec_engine.generate(PROMPTS[2], GenerationParams(max_tokens=200), sink, cancel=cancel)
    assert finished.cancelled and finished.finish_reason == "cancelled"
    assert isinstance(events[-1], RequestFinished)
    steps = [e for e in events if isinstance(e, SpecStep)]
    assert len(steps) == 3 and finished.output_tokens == sum(len(s.tokens) for s in steps)
    # The engine is still usable and exact afterwards.
    _, after, evs = _run(spec_engine, PROMPTS[0])
    assert after and [e for e in evs if isinstance(e, EngineCounters)][0].matched


def test_slow_consumer_sees_the_same_exact_steps(spec_engine):
    import time

    fast = _run(spec_engine, PROMPTS[0])[1]
    slow = []

    def sink(event):
        if isinstance(event, SpecStep):
            time.sleep(0.02)  # a consumer that lags the engine
            slow.append(event)

    spec_engine.generate(PROMPTS[0], GenerationParams(max_tokens=MAX_TOKENS), sink)
    strip = lambda s: (s.drafted, s.accepted, [t.model_dump() for t in s.tokens])  # noqa: E731
    assert [strip(s) for s in slow] == [strip(s) for s in fast]


def test_a_failing_sink_leaves_the_engine_clean(spec_engine):
    class Boom(Exception):
        pass

    def sink(event):
        if isinstance(event, SpecStep) and event.index == 1:
            raise Boom

    with pytest.raises(Boom):
        spec_engine.generate(PROMPTS[3], GenerationParams(max_tokens=200), sink)
    # The aborted request is gone: the next request is exact and reconciles on its own counts.
    finished, steps, events = _run(spec_engine, PROMPTS[4])
    assert finished.output_tokens == MAX_TOKENS == sum(len(s.tokens) for s in steps)
    assert [e for e in events if isinstance(e, EngineCounters)][0].matched


def test_a_prompt_that_resends_the_previous_one_finds_its_prefix_in_vllms_cache(spec_engine):
    # What an agent step does: the same prompt plus the call and the tool result. vLLM reports the
    # prompt tokens it served from its prefix cache (full KV blocks only), with speculation on.
    first = " ".join(PROMPTS) * 2
    cold, _, _ = _run(spec_engine, first)
    warm, _, _ = _run(spec_engine, first + cold.text + " and the result was 42.")
    assert cold.cached_tokens is not None and warm.cached_tokens is not None
    assert warm.cached_tokens > cold.cached_tokens
    assert warm.cached_tokens >= 128  # at least a block of the resent prefix
    spec_engine.reset_prefix_cache()  # what the bench does before every measured request
    again, _, _ = _run(spec_engine, first)
    assert again.cached_tokens == 0 and again.text == cold.text


def test_a_one_token_prefill_after_a_prefix_cache_hit_reconciles_with_vllms_padding(spec_engine):
    """A prompt whose every block but its last token is in vLLM's prefix cache prefills one token,
    and vLLM pads that first step to 1 + k rows of ``-1`` "drafts", which its counters count as
    drafted and rejected (found on the agent workload: "drafts: ours 10 vs vllm 11"). Nothing was
    drafted: specterm's first step has no drafts and a target token, and the counts reconcile once
    vLLM's padding is added back."""
    from specterm.engine.vllm_engine import CPU_BLOCK_SIZE
    from specterm.events import RequestStarted

    prompt = None
    for extra in range(3 * CPU_BLOCK_SIZE):  # grow a prompt until its length is one past a block
        candidate = PROMPTS[5] + " x" * extra
        events = []
        spec_engine.generate(candidate, GenerationParams(max_tokens=1), events.append)
        n = next(e.prompt_tokens for e in events if isinstance(e, RequestStarted))
        if n % CPU_BLOCK_SIZE == 1 and n > CPU_BLOCK_SIZE:
            prompt = candidate
            break
    assert prompt is not None
    spec_engine.reset_prefix_cache()
    cold, cold_steps, _ = _run(spec_engine, prompt)
    warm, warm_steps, events = _run(spec_engine, prompt)  # all but the last prompt token cached
    assert warm.cached_tokens and warm.cached_tokens % CPU_BLOCK_SIZE == 0
    assert _ids(warm_steps) == _ids(cold_steps) and warm.text == cold.text
    first = warm_steps[0]
    assert first.drafted == [] and [t.verdict for t in first.tokens] == ["target"]
    counters = [e for e in events if isinstance(e, EngineCounters)][0]
    assert counters.matched, counters.detail
    assert counters.ours["vllm_padding"] == {"steps": 1, "slots": 4}
    assert tuple(counters.vllm["per_step"][0]) == (4, 0)
