"""A k-per-batch-size schedule on the real engine (vLLM's ``num_speculative_tokens_per_batch_size``):
every step records its batch size and k, a lone request drafts the schedule's k for one, a batch of
three what it says for three (0: target tokens), greedy output stays what target-only decoding
gives, counts reconcile with vLLM, and a recorded session replays each step's k."""

from __future__ import annotations

import pytest

from specterm.engine.base import GenerationParams
from specterm.events import EngineCounters, SpecStep

pytestmark = pytest.mark.engine

SCHEDULE = [(1, 1, 4), (2, 2, 2), (3, 256, 0)]
PROMPTS = ["The weather in the mountains", "SELECT count(*) FROM orders WHERE", "Once upon a time, a"]
PARAMS = GenerationParams(max_tokens=16, temperature=0.0)


@pytest.fixture(scope="module")
def engine(tiny_pair):
    from specterm.engine import EngineConfig, load_engine

    target, draft = tiny_pair
    config = EngineConfig(
        target=target, draft=draft, method="draft_model", num_speculative_tokens=4, spec_schedule=SCHEDULE
    )
    with load_engine(config) as eng:
        yield eng


def _k_for(batch: int) -> int:
    return next(k for first, last, k in SCHEDULE if first <= batch <= last)


def _steps(events, rid=None) -> list[SpecStep]:
    return [e for e in events if isinstance(e, SpecStep) and (rid is None or e.request_id == rid)]


def test_each_step_drafts_the_k_the_schedule_gave_the_batch_that_proposed_it(engine, tmp_path):
    from specterm.engine.batch import BatchItem

    solo: dict[int, list[int]] = {}
    events: list = []
    for i, prompt in enumerate(PROMPTS):
        engine.generate(prompt, PARAMS, events.append, request_id=f"solo{i}")
        steps = _steps(events, f"solo{i}")
        solo[i] = [t.id for s in steps for t in s.tokens]
        assert all(s.batch_size == 1 for s in steps)
        # after the prefill step every step verifies k = 4 drafts (the schedule's k for one request)
        assert len(steps) > 2 and all(s.k == 4 for s in steps[1:])
    batch: list = []
    result = engine.generate_concurrent(
        [BatchItem(p, PARAMS, f"b{i}") for i, p in enumerate(PROMPTS)], batch.append, concurrency=3
    )
    for i in range(len(PROMPTS)):
        steps = _steps(batch, f"b{i}")
        # the drafts a step verifies were proposed in the step before it, at that step's batch size
        for prev, step in zip(steps, steps[1:]):
            assert step.k == _k_for(prev.batch_size), (i, prev.batch_size, step.batch_size, step.k)
        # greedy: the same tokens whether drafted at k 4 alone or decoded as target tokens (k 0) in a batch of 3
        assert result.token_ids[f"b{i}"] == solo[i], PROMPTS[i]
    # three at once from the first step (their prefill) on: nothing drafted, every token the target's
    three = [s for s in _steps(batch) if s.batch_size == 3]
    assert three and all(s.k == 0 and {t.verdict for t in s.tokens} == {"target"} for s in three)
    counters = [e for e in events + batch if isinstance(e, EngineCounters)]
    assert counters and all(c.matched for c in counters), [c.detail for c in counters]
    assert result.counters["matched"], result.counters
    _replays_per_step_k(events + batch, tmp_path / "session.jsonl")


def _replays_per_step_k(events: list, path) -> None:
    """What was recorded is what a replay and ``replay --summary`` read: each step's k and batch size."""
    from specterm.session.fast_summary import summarize_file
    from specterm.session.reader import read_session
    from specterm.session.recorder import Recorder
    from specterm.session.synthetic import synthetic_header
    from specterm.stats import summarize

    with Recorder(path, synthetic_header()) as rec:
        for e in events:
            rec.write(e)
    back = _steps(read_session(path).events)
    assert [(s.k, s.batch_size) for s in back] == [(s.k, s.batch_size) for s in _steps(events)]
    live = summarize(events).session.by_k
    assert len(live) > 1 and summarize_file(path)[1].session.by_k == live
