"""The verdict hook: a vLLM scheduler that records what each engine step drafted and sampled.

vLLM does not expose per-token verdicts. Its scheduler, though, sees both halves of every step in
``update_from_output``:

* ``scheduler_output.scheduled_spec_decode_tokens[req_id]`` — the draft ids d1..dk the target
  verified in this step (padded with ``-1`` where the grammar invalidated a draft; vLLM excludes
  those from its draft count: ``num_invalid_spec_tokens``; and all ``-1`` on the first step of a
  request whose prefill is one token, which vLLM pads to ``1 + k`` rows and does count as drafts:
  ``StepRecord.padding``);
* ``model_runner_output.sampled_token_ids[req_index]`` — what the target emitted: the accepted
  prefix d1..da plus one token of its own (``a = len(sampled) - 1``).

``CapturingScheduler`` copies both before vLLM's own bookkeeping runs and appends one
``StepRecord`` per request per step to ``records``. With ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` and the
synchronous ``LLMEngine`` the scheduler lives in the caller's process and runs in the caller's thread,
so the engine reads ``records`` right after each ``step()`` — no side channel needed.

**Forced tokens.** For a structured-output request vLLM builds, once per step and before sampling,
one grammar bitmask row per position the target will sample: row i is the set of tokens the grammar
allows after the request's output plus drafts d1..di (rows d1..dk, then the bonus row). That is
exactly the mask each emitted token was sampled under: emitted token i is either the accepted draft
d(i+1) or the target's own token at position i, and in both cases the grammar state before it is
"output + d1..di". ``get_grammar_bitmask`` is where the scheduler asks the structured-output manager
for those rows (``StructuredOutputManager.grammar_bitmask``); the override below counts the allowed
tokens per row (a popcount over the packed int32 words, cut at the backend's vocabulary size) and
keeps the counts for ``update_from_output``, which stores them in ``StepRecord.allowed``. A position
is *forced* when its count is 1. This costs one popcount per sampled position and no extra grammar
work (the rows are vLLM's own, computed anyway); it works for every backend that fills vLLM's
bitmask (xgrammar, guidance, outlines). Rows vLLM leaves unconstrained (a terminated grammar, after a
``-1`` draft placeholder, reasoning sections) are full masks, so they never count as forced.

**Draft passes and dropped drafts.** vLLM's draft-model proposer runs k draft passes in every step
for every running request, whatever becomes of the drafts, so a step's record carries k
(``passes_per_step``), or what grammar drafting ran (``grammar_draft.py``, whose proposals
``schedule`` matches to the step that verifies them). With synchronous scheduling (the CPU build
always) vLLM hands the drafts to ``update_draft_token_ids``, which keeps their longest grammar-valid
prefix and drops the rest before it is scheduled: ``num_invalid_spec_tokens`` stays empty and vLLM's
counters never see them. The override counts them (``StepRecord.dropped``); drafts past the
grammar's end are not counted (the request stops there).

This is internal vLLM API (pinned: vllm 0.32.0), reached through ``vllm_internals.py``, which lists
every piece of it and whose test checks them against the installed vLLM; ``tests/test_engine_*``
exercise it on the real engine so an upgrade that moves it fails loudly.
"""

from __future__ import annotations

import numpy as np

from specterm.engine import vllm_internals
from specterm.engine.verdicts import StepRecord

Scheduler = vllm_internals.scheduler_class()


def _ends_grammar(request, kept) -> bool:
    """The kept drafts reach the end of the request's grammar (xgrammar), so what vLLM dropped lies
    past the end (the request stops there) rather than being forbidden."""
    matcher = vllm_internals.grammar_matcher(request)
    if matcher is None or not kept:
        return False
    fork = matcher.fork()
    return all(fork.accept_token(t) for t in kept) and fork.is_terminated()


class CapturingScheduler(Scheduler):
    """vLLM's scheduler plus a per-step record of drafts and sampled tokens (see module doc)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.records: list[StepRecord] = []
        self._allowed: dict[str, tuple[int, ...]] = {}
        self.capture = True
        """Off: this is vLLM's scheduler and nothing more (the publisher with nobody attached)."""
        self.grammar_drafts = None
        """``GrammarDraftState`` when grammar drafting is on (``grammar_draft.py``): which drafts the
        grammar proposed and how many draft passes each step's proposal ran."""
        self.passes_per_step: int | None = None
        """Plain ``draft_model``: vLLM's proposer runs k draft passes in every step, for every
        running request, whatever becomes of the drafts (set by the engine; ``None``: no draft model)."""
        self._proposals: dict = {}
        self._dropped: dict[str, int] = {}

    def schedule(self, *args, **kwargs):
        # The drafts this schedule verifies are the last propose call's (synchronous scheduling: the
        # next propose runs inside this step's execution, after this call).
        if self.grammar_drafts is not None:
            self._proposals = self.grammar_drafts.take()
        return super().schedule(*args, **kwargs)

    def update_draft_token_ids(self, draft_token_ids) -> None:
        """Synchronous scheduling hands the proposer's drafts here, and vLLM keeps only their longest
        grammar-valid prefix (``validate_tokens``): the rest is dropped before it is ever scheduled,
        so neither ``num_invalid_spec_tokens`` nor vLLM's counters see it. Counted here as
        ``StepRecord.dropped`` of the step that verifies the kept drafts."""
        super().update_draft_token_ids(draft_token_ids)
        if not self.capture:
            return
        for req_id, proposed in zip(draft_token_ids.req_ids, draft_token_ids.draft_token_ids):
            request = self.requests.get(req_id)
            if request is None or request.is_finished() or request.is_prefill_chunk:
                continue
            kept = request.spec_token_ids
            real = sum(1 for t in proposed if t >= 0)
            if real > len(kept) and not _ends_grammar(request, kept):
                self._dropped[req_id] = real - len(kept)

    def get_grammar_bitmask(self, scheduler_output):
        grammar_output = super().get_grammar_bitmask(scheduler_output)
        self._allowed = {}
        if grammar_output is not None and self.capture:
            self._allowed = self._count_allowed(grammar_output, scheduler_output.scheduled_spec_decode_tokens)
        return grammar_output

    def _count_allowed(self, grammar_output, spec_tokens) -> dict[str, tuple[int, ...]]:
        """Allowed-token counts per bitmask row, split per request in vLLM's row order: each
        request has one row per scheduled draft slot (``-1`` placeholders included) plus one."""
        words = np.ascontiguousarray(grammar_output.grammar_bitmask).view(np.uint32)
        vocab = vllm_internals.grammar_vocab_size(self) or words.shape[1] * 32
        full, rest = divmod(vocab, 32)
        counts = np.bitwise_count(words[:, :full]).sum(axis=1, dtype=np.int64)
        if rest:  # bits past the vocabulary in the last word are padding, not tokens
            counts += np.bitwise_count(words[:, full] & np.uint32((1 << rest) - 1))
        out, row = {}, 0
        for req_id in grammar_output.structured_output_request_ids:
            n = len(spec_tokens.get(req_id, ())) + 1
            out[req_id] = tuple(int(c) for c in counts[row : row + n])
            row += n
        return out

    def update_from_output(self, scheduler_output, model_runner_output):
        sampled = model_runner_output.sampled_token_ids
        if sampled and self.capture:
            spec = scheduler_output.scheduled_spec_decode_tokens
            invalid = scheduler_output.num_invalid_spec_tokens or {}
            index = model_runner_output.req_id_to_index
            batch = len(scheduler_output.num_scheduled_tokens)  # what vLLM's k-by-batch-size lookup keys on
            passes = self._passes_this_step(scheduler_output)
            for req_id in scheduler_output.num_scheduled_tokens:
                i = index.get(req_id)
                if i is None or not sampled[i]:
                    continue  # a partial prefill chunk: nothing emitted
                slots = spec.get(req_id, ())
                drafted = tuple(t for t in slots if t >= 0)
                bad = invalid.get(req_id, 0)
                self.records.append(
                    StepRecord(
                        req_id,
                        drafted,
                        tuple(sampled[i]),
                        bad,
                        self._allowed.get(req_id),
                        padding=len(slots) - len(drafted) - bad,  # -1s the grammar did not cause
                        from_grammar=self._from_grammar(req_id, drafted),
                        draft_passes=self._passes(req_id, passes),
                        dropped=self._dropped.pop(req_id, 0),
                        batch_size=batch,
                    )
                )
        return super().update_from_output(scheduler_output, model_runner_output)

    def _from_grammar(self, req_id: str, drafted: tuple[int, ...]) -> tuple[bool, ...] | None:
        """Which verified drafts the grammar proposed (the proposal this step's schedule took)."""
        proposal = self._proposals.get(req_id) if drafted else None
        if proposal is None or tuple(proposal.tokens[: len(drafted)]) != drafted:
            return None
        return tuple(proposal.from_grammar[: len(drafted)])

    def _passes_this_step(self, scheduler_output) -> int | None:
        """Plain ``draft_model``: the k this step's proposer ran for, which a batch-size schedule
        (``num_speculative_tokens_per_batch_size``) sets per step from the batch size; ``None``
        without a draft model."""
        if self.passes_per_step is None:
            return None
        return getattr(scheduler_output, "num_spec_tokens_to_schedule", self.passes_per_step)

    def _passes(self, req_id: str, plain: int | None) -> int | None:
        """Draft passes this step's own proposal ran (it ran inside this step's execution, before
        ``update_from_output``): every step proposes, the last one too."""
        if self.grammar_drafts is not None:
            proposal = self.grammar_drafts.proposals.get(req_id)
            return proposal.passes if proposal is not None else 0
        return plain

    def take_records(self) -> list[StepRecord]:
        records, self.records = self.records, []
        return records
