"""Grammar-aware drafting: the draft model proposes only what the request's grammar allows, and a run
the grammar leaves no choice about is proposed without running the draft model.

**Terms.** A *draft pass* is one forward pass of the draft model (all requests of the batch at once).
vLLM's ``draft_model`` proposer runs k of them per step: a *first pass* over the tokens the target
just verified (it also writes the draft's KV cache for them; it cannot be skipped), then k - 1 passes
of one token each. A *forced run* is the continuation the grammar admits alone at a draft position:
xgrammar's jump-forward string, spelt in tokens as the target spells it (``spelling.py``). *Grammar
drafts* are draft slots filled from a forced run rather than from the draft's logits.

**What changes** (vLLM 0.32.0 internals, pinned, all reached through ``vllm_internals.py``, whose
``install_draft_hooks`` swaps the running proposer's class for one that calls this module's
``GrammarDraftState``; ``tests/test_engine_grammar_draft.py`` runs them on the real engine):

* ``DraftModelProposer._sample_draft_tokens`` (called once per draft position with the batch's
  hidden states): the draft's argmax under the grammar's mask (the argmax itself whenever the
  grammar allows it, checked with one ``accept_token``; the bitmask only when it does not: that is
  most of this module's cost on a tiny pair). With vLLM's probabilistic draft sampling the mask is
  applied before the softmax, so the draft probabilities the rejection sampler reads are the masked,
  renormalised ones. A row with a forced run takes its next forced token (and a one-hot probability). The grammar state per request is a ``fork()`` of the scheduler's own
  xgrammar matcher (``Request.structured_output_request.grammar.matcher``), advanced over the tokens
  the target emitted this step and then over each proposed draft; the scheduler's matcher is never
  touched.
* ``prepare_next_token_ids_padded`` / ``_cpu`` (called with this step's sampled ids just before
  ``propose``): read to learn what the target emitted this step.
* ``propose``: brackets the step; the proposer's ``model`` is wrapped so that once every request of
  the batch has a forced run covering all its remaining draft positions, the remaining passes are
  not run (their outputs would be ignored; the draft KV they would write belongs to positions the
  next step's first pass writes again).

**Why output stays exact.** The target verifies every draft as before; vLLM's rejection sampler at
T = 0 accepts a draft iff it is the target's argmax, and at T > 0 with greedy drafting (vLLM's
default ``draft_sample_method``) treats the draft as one-hot, which it still is: a masked argmax or a
forced token is a deterministic function of the context. Masked drafts are never invalid: vLLM's
``validate_tokens`` accepts every one of them.

**Where it runs.** The proposer lives in the worker and the grammar in the scheduler; the engine
``VllmSpecEngine`` builds runs both in one process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, one
worker), which is what this needs. A ``vllm serve`` does not have it.

**What vLLM 0.32 allows.** k is fixed per engine (buffers and the scheduler's token budget are sized
to ``num_speculative_tokens``), so a forced run longer than the remaining slots continues next step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import xgrammar as xgr

from specterm.engine import vllm_internals
from specterm.engine.spelling import Key, Spelling


@dataclass(slots=True)
class Proposal:
    """What one propose call drafted for one request: the tokens, which came from the grammar, and
    the draft passes run for the batch they were proposed in."""

    tokens: list[int] = field(default_factory=list)
    from_grammar: list[bool] = field(default_factory=list)
    passes: int = 0
    keys: list[Key | None] = field(default_factory=list)
    """For a grammar draft, the token before it and the forced text ahead (``Spelling`` learns from it)."""


@dataclass(slots=True)
class _Row:
    matcher: Any
    """A fork of the scheduler's matcher, advanced over this step's output and the drafts so far."""
    forced: list[int] = field(default_factory=list)
    """The next positions' forced tokens (grammar drafts), in order."""
    keys: list[Key | None] = field(default_factory=list)
    """``Spelling``'s key of each of ``forced``."""
    last: int | None = None
    """The last token the matcher accepted (the forced text's context)."""


class GrammarDraftState:
    """Shared by the proposer (worker side) and ``CapturingScheduler``, in one process. The proposer
    calls ``note_sampled``, ``begin``, ``choose`` (once per draft position) and ``end`` each step."""

    def __init__(self, scheduler: Any, tokenizer: Any, vocab_size: int) -> None:
        self.scheduler = scheduler
        self.spelling = Spelling(tokenizer)
        self.vocab_size = vocab_size
        self._previous: dict[str, Proposal] = {}
        self.proposals: dict[str, Proposal] = {}
        """The last propose call's drafts per request (read by the scheduler as it schedules them)."""
        self._sampled: dict[str, list[int]] = {}
        self._rows: list[_Row | None] = []
        self._req_ids: list[str] = []
        self._remaining = 0
        self.passes = 0
        """Draft-model passes run by the current (or last) propose call, for the whole batch."""
        self._bitmask = xgr.allocate_token_bitmask(1, vocab_size)
        self.model: _SkippableModel | None = None
        """The proposer's wrapped draft model (``install``): reset at the start of every step."""

    # -- per step --------------------------------------------------------------------------------
    def note_sampled(self, sampled: Any, req_ids: list[str]) -> None:
        rows = sampled.tolist() if isinstance(sampled, torch.Tensor) else sampled
        self._sampled = {rid: [t for t in row if t >= 0] for rid, row in zip(req_ids, rows)}

    def begin(self, req_ids: list[str], k: int) -> None:
        self._req_ids, self._remaining, self.passes = list(req_ids), k, 0
        self._learn()
        self._rows = [self._row(rid) for rid in self._req_ids]
        self.proposals = {rid: Proposal() for rid in self._req_ids}
        for row in self._rows:
            if row is not None:
                self._plan(row)
        if self.model is not None:
            self.model.reset()

    def _learn(self) -> None:
        """Where the target rejected a grammar draft, remember how it spelt that forced text."""
        for rid, sampled in self._sampled.items():
            last = self._previous.get(rid)
            if last is None:
                continue
            a = next((i for i, (d, t) in enumerate(zip(last.tokens, sampled)) if d != t), None)
            if a is not None and last.from_grammar[a] and (key := last.keys[a]) is not None:
                self.spelling.learn(key, sampled[a])

    def _row(self, req_id: str) -> _Row | None:
        request = self.scheduler.requests.get(req_id)
        matcher = vllm_internals.grammar_matcher(request)
        if matcher is None or not vllm_internals.grammar_applies(self.scheduler, request):
            return None
        fork, sampled = matcher.fork(), self._sampled.get(req_id, [])
        for token in sampled:
            if fork.is_terminated():
                return None
            if not fork.accept_token(token):
                return None  # a partial prefill's placeholder; vLLM drops its drafts anyway
        return None if fork.is_terminated() else _Row(fork, last=sampled[-1] if sampled else None)

    def _plan(self, row: _Row) -> None:
        """The next position's forced run, if the grammar admits only one continuation there."""
        matcher = row.matcher
        row.forced, row.keys = [], []
        if matcher.is_terminated():
            return
        jump = matcher.find_jump_forward_string()
        if not jump:
            return
        # Spelt as the target spelt it before, else tokenised on its own (``spelling.py``). The run's
        # last token may be spelt differently once the next free character is known (``"`` +
        # ``SELECT`` vs ``"SE``); proposing it anyway measured better than leaving it to the draft
        # (smollm2-agent, extract: MAL 1.81 vs 1.66, draft passes per token 1.86 vs 2.13).
        run, keys = self.spelling.tokens(jump, row.last, self._remaining)
        n = 0
        for token in run:  # a tokenizer may spell it with tokens the grammar refuses (a prefix space)
            if not matcher.accept_token(token):
                break
            n += 1
        if n:
            matcher.rollback(n)
            row.forced, row.keys = run[:n], keys[:n]

    def all_forced(self) -> bool:
        """Every request's remaining draft positions come from its forced run (skip the passes)."""
        return bool(self._rows) and all(r is not None and len(r.forced) >= self._remaining for r in self._rows)

    def choose(self, logits_fn, n: int, probabilistic: bool, sample_fn) -> tuple[torch.Tensor, Any]:
        """One draft position for the batch's ``n`` rows: forced tokens, or the draft's choice under
        the grammar (and probabilities when vLLM samples drafts probabilistically)."""
        rows = self._rows[:n] + [None] * max(0, n - len(self._rows))
        forced = [r.forced[0] if r is not None and r.forced else None for r in rows]
        taken = [False] * n
        """Rows whose token the matcher already accepted (while checking it)."""
        probs = None
        if all(f is not None for f in forced) and not probabilistic:
            tokens = torch.tensor(forced, dtype=torch.int64)
        elif probabilistic:  # the whole masked distribution is needed: mask every free row first
            logits = logits_fn()
            for i, r in enumerate(rows):
                if r is not None and forced[i] is None:
                    self._mask(r, logits[i])
            tokens, probs = sample_fn(logits)
        else:
            logits = logits_fn()
            tokens = logits.argmax(dim=-1)
            for i, r in enumerate(rows):
                if r is None or forced[i] is not None:
                    continue
                # The masked argmax is the argmax whenever the grammar allows it: check that first
                # (one accept) and build the mask only when it does not (most positions skip it).
                if r.matcher.accept_token(int(tokens[i])):
                    taken[i] = True
                else:
                    self._mask(r, logits[i])
                    tokens[i] = logits[i].argmax()
        for i, f in enumerate(forced):
            if f is not None:
                tokens[i] = f
                if probs is not None:
                    probs[i].zero_()
                    probs[i, f] = 1.0
        self._advance(tokens.tolist(), forced, taken)
        return tokens, probs

    def _mask(self, row: _Row, logits_row: torch.Tensor) -> None:
        """Forbid in ``logits_row`` what the grammar forbids at the row's next position."""
        if row.matcher.fill_next_token_bitmask(self._bitmask, 0):
            _apply_mask(logits_row, self._bitmask[0], self.vocab_size)

    def _advance(self, chosen: list[int], forced: list[int | None], taken: list[bool]) -> None:
        self._remaining -= 1
        for i, (rid, row, token, f) in enumerate(zip(self._req_ids, self._rows, chosen, forced)):
            proposal = self.proposals[rid]
            proposal.tokens.append(token)
            proposal.from_grammar.append(f is not None)
            proposal.keys.append(row.keys.pop(0) if f is not None and row is not None else None)
            if row is None:
                continue
            row.last = token
            if f is not None:
                row.forced.pop(0)
            # A masked or forced token is always accepted; the end of the grammar ends the masking
            # (vLLM drops drafts past it anyway).
            if not (taken[i] or row.matcher.accept_token(token)) or row.matcher.is_terminated():
                self._rows[i] = None
            elif not row.forced and self._remaining > 0:
                self._plan(row)

    def end(self) -> None:
        for proposal in self.proposals.values():
            proposal.passes = self.passes
        self._rows, self._sampled, self._previous = [], {}, self.proposals

    def take(self) -> dict[str, Proposal]:
        proposals, self.proposals = self.proposals, {}
        return proposals


def _apply_mask(logits_row: torch.Tensor, mask: torch.Tensor, vocab_size: int) -> None:
    xgr.apply_token_bitmask_inplace(
        logits_row.unsqueeze(0),
        mask.unsqueeze(0).to(logits_row.device),
        vocab_size=min(vocab_size, logits_row.shape[-1]),
    )
    if logits_row.shape[-1] > vocab_size:  # vLLM pads the vocabulary; padding is never a token
        logits_row[vocab_size:] = float("-inf")


class _SkippableModel:
    """The draft model, except that a call is not run while every row is forced to the end."""

    def __init__(self, model: Any, state: GrammarDraftState) -> None:
        self.__dict__["_model"] = model
        self.__dict__["_state"] = state
        self.__dict__["_last"] = None

    def __call__(self, *args, **kwargs):
        state = self._state
        if self._last is not None and state.all_forced():
            return self._last  # its output is never read: every row takes its forced token
        out = self._model(*args, **kwargs)
        state.passes += 1
        self.__dict__["_last"] = out
        return out

    def reset(self) -> None:
        self.__dict__["_last"] = None

    def __getattr__(self, name):
        return getattr(self._model, name)

    def __setattr__(self, name, value):
        setattr(self._model, name, value)


def grammar_drafting_problem(drafter: Any) -> str | None:
    """Why this engine's proposer cannot draft with the grammar, or ``None``."""
    if not vllm_internals.is_draft_model_proposer(drafter):
        return f"grammar drafting needs vLLM's draft-model proposer, not {type(drafter).__name__}"
    if vllm_internals.uses_heterogeneous_vocab(drafter):
        return "grammar drafting needs a draft with the target's vocabulary"
    return None


def install(worker, state: GrammarDraftState) -> None:
    """Runs in the (in-process) worker: hook the proposer to ``state`` and wrap its model."""
    if (problem := grammar_drafting_problem(vllm_internals.worker_drafter(worker))) is not None:
        raise RuntimeError(problem)

    def wrap(model: Any) -> _SkippableModel:
        if not isinstance(model, _SkippableModel):
            model = _SkippableModel(model, state)
        state.model = model
        return model

    vllm_internals.install_draft_hooks(worker, state, wrap)
