"""Speculation under load (``engine/batch.py``): several greedy requests in flight at once on the real
engine are each token-identical to their solo run, and their verdicts reconcile with vLLM, per
request (its per-step metrics) and summed over the batch (its counters)."""

from __future__ import annotations

import pytest

from specterm.engine.base import GenerationParams
from specterm.events import EngineCounters, Error, RequestFinished, SpecStep

pytestmark = pytest.mark.engine

PROMPTS = [
    "The weather in the mountains",
    "SELECT count(*) FROM orders WHERE",
    "Once upon a time, a",
    "def fibonacci(n):",
    "The capital of France is",
    "1, 2, 3, 4, 5,",
]


@pytest.fixture(scope="module")
def engine():
    from specterm.engine import EngineConfig, load_engine
    from specterm.paths import embedded_pair_dir

    pair = embedded_pair_dir()
    with load_engine(
        EngineConfig(
            target=str(pair / "target"), draft=str(pair / "draft"), method="draft_model", num_speculative_tokens=4
        )
    ) as eng:
        yield eng


def test_batched_requests_equal_their_solo_runs_and_reconcile(engine):
    from specterm.engine.batch import BatchItem, kv_capacity

    params = GenerationParams(max_tokens=24, temperature=0.0)
    solo = {}
    for i, p in enumerate(PROMPTS):
        events: list = []
        engine.generate(p, params, events.append, request_id=f"solo{i}")
        solo[i] = [t.id for e in events if isinstance(e, SpecStep) for t in e.tokens]
    items = [BatchItem(p, params, f"b{i}") for i, p in enumerate(PROMPTS)]
    events = []
    result = engine.generate_concurrent(items, events.append, concurrency=4)
    assert [f.request_id for f in result.finished] == [i.request_id for i in items]
    for i in range(len(PROMPTS)):
        rid = f"b{i}"
        ids = [t.id for e in events if isinstance(e, SpecStep) and e.request_id == rid for t in e.tokens]
        assert ids == solo[i] == result.token_ids[rid], PROMPTS[i]
    counters = [e for e in events if isinstance(e, EngineCounters)]
    assert len(counters) == len(PROMPTS) and all(c.matched for c in counters), [c.detail for c in counters]
    assert result.counters["matched"] and result.counters["ours"]["draft_tokens"] > 0, result.counters
    assert not [e for e in events if isinstance(e, Error)]
    # they really ran together: b3 started before b0..b2 ended. A request that ends after one token
    # ends in the engine step that starts b3, so only those that ran longer solo count (the pair's
    # raw continuations run to max_tokens here, but which tokens they take, EOS among them, is the CPU's).
    steps = [(e.t, e.request_id) for e in events if isinstance(e, SpecStep)]
    finished_at = {e.request_id: e.t for e in events if isinstance(e, RequestFinished)}
    longer = [finished_at[f"b{i}"] for i in range(3) if len(solo[i]) > 1]  # more than the prefill step
    assert longer and min(longer) > min(t for t, r in steps if r == "b3")
    assert kv_capacity(engine, 64) >= 4
