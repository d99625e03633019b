"""One request in the in-process engine, step by step: each step's output for it folded into what
its ``request_finished`` reports (verdicts through its ``StepAssembler``, TTFT, prefix-cache hits,
text, token ids, finish reason and vLLM's per-request spec-decode metrics).

The one owner of that folding for ``VllmSpecEngine.generate`` (one request, with cancel) and
``engine/batch.run_concurrent`` (many in flight at once); each drives the engine through
``VllmSpecEngine``'s stepping interface (``add_request``, ``step``, ``abort``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from specterm.engine.verdicts import StepAssembler, StepRecord
from specterm.events import RequestFinished


@dataclass
class InFlight:
    request_id: str
    internal_id: str
    """vLLM's id for the request (``add_request`` returns it): what outputs and the scheduler's records carry."""
    assembler: StepAssembler
    start: float
    """``time.perf_counter()`` when the request was added: its TTFT and wall time count from here."""
    ttft: float | None = None
    cached: int | None = None
    """Prompt tokens the prefix cache served."""
    text: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    detailed: Any = None
    """vLLM's per-request spec-decode metrics, from the output that finished it (reconciliation)."""

    def fold(self, out: Any, record: StepRecord | None, wall_s: float) -> bool:
        """One step's ``RequestOutput`` for this request (a DELTA: that step's tokens only), with the
        scheduler's record of the step and the step's wall time; whether the request finished."""
        comp = out.outputs[0]
        if (n := getattr(out, "num_cached_tokens", None)) is not None:
            self.cached = max(self.cached or 0, n)
        if comp.token_ids and self.ttft is None:
            self.ttft = time.perf_counter() - self.start
        self.assembler.add(list(comp.token_ids), record, wall_s)
        self.text.append(comp.text)
        self.token_ids += comp.token_ids
        if comp.finish_reason is None:
            return False
        self.finish_reason = comp.finish_reason
        self.detailed = getattr(comp, "spec_decode_metrics", None)
        return True

    def finished(self, t: float, wall_s: float, *, cancelled: bool = False) -> RequestFinished:
        return RequestFinished(
            t=t,
            request_id=self.request_id,
            finish_reason=self.finish_reason,
            text="".join(self.text),
            output_tokens=self.assembler.stats.tokens,
            ttft_s=self.ttft,
            wall_s=wall_s,
            cancelled=cancelled,
            cached_tokens=self.cached,
        )
