"""Many requests in flight at once on the in-process engine: speculation under load.

``run_concurrent`` keeps ``concurrency`` requests in the engine (vLLM's scheduler batches them into
each step; a finished request's place goes to the next one waiting) and assigns every request's
verdicts exactly as ``generate`` does: one ``InFlight`` per request (``engine/inflight.py``, the
folding both share), fed that request's output and its own ``StepRecord`` of the step (the capture
hook records every scheduled request, keyed by vLLM's internal request id). It drives the engine
through ``VllmSpecEngine``'s stepping interface, as ``generate`` does (``lock``, ``add_request``,
``step``, ``abort``, the counters). Every event carries its request id, so a sink sees the requests'
streams interleaved step by step, as ``specterm attach`` sees a server's.

Reconciliation under batching: each request's per-step (drafted, accepted) is compared with vLLM's
own per-request ``spec_decode_metrics`` (``EngineCounters`` per request, as ``generate``), and the
sums over the batch with the deltas of vLLM's Prometheus counters, which cannot be split per request
(``BatchResult.counters``).

What a step costs is shared: ``SpecStep.wall_s`` is the whole engine step's wall time for each
request in it, so a request's wall time is its own start to finish, not a sum of its steps.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specterm.engine.base import GenerationParams
from specterm.engine.chat import Prompt, check_fits
from specterm.engine.inflight import InFlight
from specterm.engine.verdicts import StepAssembler, per_step_check, report_check, vllm_totals
from specterm.errors import ConfigError
from specterm.events import Error, RequestFinished, RequestStarted, Sink

# The engine is ``vllm_engine.VllmSpecEngine`` (its ``generate_concurrent`` calls in here); not
# imported, not even for its type, so the two modules form no import cycle.
VllmSpecEngine = Any


@dataclass(frozen=True)
class BatchItem:
    prompt: Prompt
    params: GenerationParams
    request_id: str


@dataclass
class BatchResult:
    finished: list[RequestFinished]
    """In the order of the items."""
    token_ids: dict[str, list[int]]
    """Every request's emitted token ids."""
    wall_s: float
    """First request added to last request finished."""
    counters: dict[str, Any] | None = None
    """Summed verdict counts vs vLLM's counter deltas over the batch: ``{"ours", "vllm", "matched"}``."""


def kv_capacity(engine: VllmSpecEngine, tokens_per_request: int) -> int | None:
    """How many requests of ``tokens_per_request`` (prompt + output) the KV cache holds at once;
    None when vLLM does not say."""
    cache = engine.cache_config()
    blocks, size = getattr(cache, "num_gpu_blocks", None), getattr(cache, "block_size", None)
    if not blocks or not size or tokens_per_request <= 0:
        return None
    per_request = -(-tokens_per_request // size)  # blocks, rounded up
    return blocks // per_request


def run_concurrent(engine: VllmSpecEngine, items: Sequence[BatchItem], sink: Sink, *, concurrency: int) -> BatchResult:
    """Run ``items`` with at most ``concurrency`` in flight; blocks until all finished."""
    if concurrency < 1:
        raise ConfigError("concurrency must be >= 1")
    with engine.lock:
        clock = engine.clock
        rendered = []
        for item in items:  # every prompt checked before any is sent: a bad one is one line, nothing half-run
            ids = engine.renderer.ids(item.prompt)
            check_fits(len(ids), engine.max_model_len)
            rendered.append(ids)
        speculative = engine.config.speculative
        before = engine.counters_at_start()
        waiting = list(zip(items, rendered))[::-1]
        open_: dict[str, InFlight] = {}
        assemblers: list[StepAssembler] = []
        done: dict[str, RequestFinished] = {}
        ids_out: dict[str, list[int]] = {}
        t_start = time.perf_counter()
        try:
            while waiting or open_:
                while waiting and len(open_) < concurrency:
                    item, ids = waiting.pop()
                    rid = item.request_id
                    sink(
                        RequestStarted(
                            t=clock(), request_id=rid, prompt_tokens=len(ids), params=item.params.as_recorded()
                        )
                    )
                    internal = engine.add_request(rid, ids, item.params)
                    assemblers.append(StepAssembler(rid, engine.hf_tokenizer, ids, clock, sink))
                    open_[rid] = InFlight(rid, internal or rid, assemblers[-1], time.perf_counter())
                outputs, records, wall = engine.step()
                for out in outputs:
                    req = open_.get(out.request_id) or next(
                        (o for o in open_.values() if o.internal_id == out.request_id), None
                    )
                    if req is None:
                        continue
                    if req.fold(out, records.get(req.internal_id), wall):
                        rid = req.request_id
                        del open_[rid]
                        if speculative:
                            _request_check(req, clock(), sink)
                        done[rid] = req.finished(clock(), time.perf_counter() - req.start)
                        ids_out[rid] = list(req.token_ids)
                        sink(done[rid])
        except BaseException:
            engine.abort(list(open_))  # never leave requests behind for the next call
            raise
        wall_s = time.perf_counter() - t_start
        result = BatchResult([done[i.request_id] for i in items], ids_out, wall_s)
        if speculative:
            result.counters = _batch_check(before, engine.counters(), assemblers, clock(), sink)
        return result


def _request_check(req: InFlight, t: float, sink: Sink) -> None:
    """One request's per-step (drafted, accepted), ours against vLLM's per-request metrics."""
    a, rid = req.assembler, req.request_id
    ours = {"drafts": a.stats.drafts, "draft_tokens": a.stats.draft_tokens, "accepted": a.stats.accepted}
    steps, problem = per_step_check(a.per_step, req.detailed)
    theirs = {} if steps is None else {"per_step": steps}
    report_check(sink, t, rid, ours, theirs, problem, "vLLM's")


def _batch_check(
    before: dict[str, Any], after: dict[str, Any], assemblers: Sequence[StepAssembler], t: float, sink: Sink
) -> dict[str, Any]:
    """The batch's summed counts against vLLM's counter deltas (padding slots counted as vLLM does)."""
    ours = vllm_totals(assemblers)
    theirs = {key: after[key] - before[key] for key in ours}
    matched = ours == theirs
    if not matched:
        sink(
            Error(
                t=t,
                level="warning",
                where="reconcile",
                message=f"the batch's verdicts disagree with vLLM's counters: ours {ours} vs vllm {theirs}",
            )
        )
    return {"ours": ours, "vllm": theirs, "matched": matched}
