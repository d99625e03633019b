"""The verdict hook: a vLLM scheduler that records what each engine step drafted and sampled.

vLLM does not expose per-token verdicts. Its scheduler, though, sees both halves of every step in
``update_from_output``:

* ``scheduler_output.scheduled_spec_decode_tokens[req_id]`` — the draft ids d1..dk the target
  verified in this step (padded with ``-1`` where the grammar invalidated a draft; vLLM excludes
  those from its draft count: ``num_invalid_spec_tokens``);
* ``model_runner_output.sampled_token_ids[req_index]`` — what the target emitted: the accepted
  prefix d1..da plus one token of its own (``a = len(sampled) - 1``).

``CapturingScheduler`` copies both before vLLM's own bookkeeping runs and appends one
``StepRecord`` per request per step to ``records``. With ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` and the
synchronous ``LLMEngine`` the scheduler lives in the caller's process and runs in the caller's thread,
so the engine reads ``records`` right after each ``step()`` — no side channel needed.

This is internal vLLM API (pinned: vllm 0.32.0); ``tests/test_engine_*`` exercise it on the real
engine so an upgrade that moves it fails loudly.
"""

from __future__ import annotations

from vllm.v1.core.sched.scheduler import Scheduler

from specterm.engine.verdicts import StepRecord


class CapturingScheduler(Scheduler):
    """vLLM's scheduler plus a per-step record of drafts and sampled tokens (see module doc)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.records: list[StepRecord] = []

    def update_from_output(self, scheduler_output, model_runner_output):
        sampled = model_runner_output.sampled_token_ids
        if sampled:
            spec = scheduler_output.scheduled_spec_decode_tokens
            invalid = scheduler_output.num_invalid_spec_tokens or {}
            index = model_runner_output.req_id_to_index
            for req_id in scheduler_output.num_scheduled_tokens:
                i = index.get(req_id)
                if i is None or not sampled[i]:
                    continue  # a partial prefill chunk: nothing emitted
                drafted = tuple(t for t in spec.get(req_id, ()) if t >= 0)
                self.records.append(
                    StepRecord(req_id, drafted, tuple(sampled[i]), invalid.get(req_id, 0))
                )
        return super().update_from_output(scheduler_output, model_runner_output)

    def take_records(self) -> list[StepRecord]:
        records, self.records = self.records, []
        return records
