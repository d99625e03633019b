"""The engine interface every source of live tokens implements.

A ``SpecEngine`` turns a prompt (a ``ChatPrompt`` rendered by the model's chat template, or raw
text) into a stream of events (``request_started``, one ``spec_step`` per
engine step, ``engine_counters``, ``request_finished``) delivered to a ``sink`` callable. The same
interface runs target-only (``EngineConfig.method = None``) so every comparison uses one code path.

Threading: an engine is driven from ONE thread (not the UI's event loop). ``generate`` blocks until
the request ends and calls ``sink`` from that thread; the dashboard's sink is the event bridge's
``push`` (``ui/bridge.py``: a thread-safe queue with one wake-up message per batch).
``cancel`` (a ``threading.Event``) stops a request between engine steps.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specterm.engine.chat import Prompt, PromptRenderer
from specterm.events import RequestFinished, Sink, Speculation

Method = Literal["draft_model", "ngram", "eagle", "eagle3", "suffix"]
ExecutorBackend = Literal["mp", "ray", "uni", "external_launcher"]
"""vLLM's ``distributed_executor_backend`` values (``EngineConfig``; ``--distributed-executor-backend``)."""
NEEDS_DRAFT_MODEL: frozenset[str] = frozenset({"draft_model", "eagle", "eagle3"})
DEFAULT_MAX_MODEL_LEN = 4096
SUFFIX_KNOBS = (
    "suffix_decoding_max_tree_depth",
    "suffix_decoding_max_cached_requests",
    "suffix_decoding_max_spec_factor",
    "suffix_decoding_min_token_prob",
)
"""``EngineConfig`` fields passed to vLLM's speculative config as they are (method ``suffix``)."""


class EngineConfig(BaseModel):
    """What to load. Fields map onto vLLM ``EngineArgs``; ``extra_engine_args`` passes through."""

    model_config = ConfigDict(extra="forbid")

    target: str
    draft: str | None = None
    method: Method | None = "draft_model"
    """``None`` runs target-only (speculation off)."""
    num_speculative_tokens: int = Field(4, ge=1, le=16)
    dtype: str = "float32"
    max_model_len: int | None = Field(None, ge=16)
    """Context length; ``None``: the model's own (``max_position_embeddings``), capped at
    ``DEFAULT_MAX_MODEL_LEN`` so the CPU build's KV cache holds one full sequence."""
    chat_template: str | None = None
    """A Jinja chat-template file that replaces the target tokenizer's own."""
    seed: int = 0
    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    distributed_executor_backend: ExecutorBackend | None = None
    """vLLM's executor for the TP/PP workers; ``None``: vLLM picks (``mp`` on one machine, ``ray``
    inside a Ray placement group). More than one machine: ``ray`` (README "Scale-out")."""
    structured_output_backend: Literal["xgrammar", "guidance", "outlines", "auto"] = "xgrammar"
    grammar_drafting: bool | None = None
    """Draft under each structured request's grammar: masked drafts, and the grammar's forced runs
    proposed without draft passes (``engine/grammar_draft.py``). ``None`` (the default): on wherever
    it applies (method ``draft_model``, one worker, xgrammar); ``True``: required (an error where it
    cannot run); ``False``: vLLM's plain drafting. Requests without a grammar draft as before."""
    ngram_prompt_lookup_min: int = Field(2, ge=1)
    ngram_prompt_lookup_max: int = Field(5, ge=1)
    # Suffix decoding (method "suffix", the arctic-inference package): vLLM's own knob names and
    # defaults. Its global tree caches past responses across requests, so it learns as an agent runs.
    suffix_decoding_max_tree_depth: int = Field(24, ge=1)
    suffix_decoding_max_cached_requests: int = Field(10000, ge=0)
    """Responses kept in the global tree; 0 leaves only the per-prompt trees."""
    suffix_decoding_max_spec_factor: float = Field(1.0, ge=0.0)
    suffix_decoding_min_token_prob: float = Field(0.1, ge=0.0, le=1.0)
    spec_schedule: list[tuple[int, int, int]] | None = None
    """k per batch size: vLLM's ``num_speculative_tokens_per_batch_size``, inclusive ``(first, last,
    k)`` ranges of requests per step, k = 0 off, each k at most ``num_speculative_tokens``
    (``engine/spec_schedule.py``; measured by ``bench --concurrency --recommend``). ``None``: k always."""
    extra_engine_args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("spec_schedule", mode="before")
    @classmethod
    def _schedule_is_vllms(cls, value: Any) -> Any:
        """JSON text or a file (flag, environment) parsed; then vLLM's own validator, one line."""
        if value is None:
            return None
        from specterm.engine import spec_schedule
        from specterm.errors import ConfigError

        try:
            return spec_schedule.validate(spec_schedule.parse(value))
        except ConfigError as err:
            raise ValueError(str(err)) from None

    @model_validator(mode="after")
    def _schedule_runs_as_written(self) -> EngineConfig:
        if self.spec_schedule is not None:
            from specterm.engine.spec_schedule import check_for
            from specterm.errors import ConfigError

            try:
                check_for(
                    self.spec_schedule,
                    method=self.method,
                    k_max=self.num_speculative_tokens,
                    data_parallel_size=int(self.extra_engine_args.get("data_parallel_size", 1) or 1),
                )
            except ConfigError as err:
                raise ValueError(str(err)) from None
        return self

    def speculative_config(self) -> dict[str, Any] | None:
        """vLLM's ``speculative_config`` for this engine (``None``: target-only); what the engine
        passes, and what ``bench --print-speculative-config`` prints for ``vllm serve``."""
        if self.method is None:
            return None
        spec: dict[str, Any] = {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}
        if self.method in NEEDS_DRAFT_MODEL:
            spec["model"] = self.draft
        if self.method == "ngram":
            spec["prompt_lookup_min"] = self.ngram_prompt_lookup_min
            spec["prompt_lookup_max"] = self.ngram_prompt_lookup_max
        if self.method == "suffix":
            spec |= {name: getattr(self, name) for name in SUFFIX_KNOBS}
        if self.spec_schedule is not None:
            spec["num_speculative_tokens_per_batch_size"] = [list(r) for r in self.spec_schedule]
        return spec

    @property
    def speculative(self) -> bool:
        return self.method is not None

    @property
    def drafts_with_grammar(self) -> bool:
        """Grammar drafting runs: a draft model drafts (target-only ignores the flag) and it was asked
        for, or left to its default where it applies. The default runs where vLLM schedules
        synchronously anyway (its CPU build); on CUDA it would turn vLLM's asynchronous scheduling off,
        which is not measured here, so there it runs only when asked for (``--grammar-drafting``)."""
        if self.grammar_drafting is False or self.method != "draft_model":
            return False
        if self.grammar_drafting:
            return True
        from specterm.engine.installs import vllm_build

        return self.world_size == 1 and self.structured_output_backend in ("xgrammar", "auto") and vllm_build() == "cpu"

    @property
    def world_size(self) -> int:
        """Worker processes vLLM starts (one per tensor × pipeline rank)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    def as_recorded(self) -> EngineConfig:
        """This config with its models named as a recorded session names them (``paths.portable``:
        no machine paths); what ``session_header`` and ``compare_header`` write."""
        from specterm.paths import portable

        return self.model_copy(update={"target": portable(self.target), "draft": portable(self.draft)})

    def models_summary(self) -> dict[str, Any]:
        speculation = Speculation(
            method=self.method or "none", num_speculative_tokens=self.num_speculative_tokens if self.method else 0
        )
        return {
            "target": self.target,
            "draft": self.draft if self.method in NEEDS_DRAFT_MODEL else None,
            **speculation.model_dump(),
            "dtype": self.dtype,
        }


class GenerationParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(128, ge=1, le=32768)
    temperature: float = Field(0.0, ge=0.0, le=5.0)
    json_schema: dict[str, Any] | None = None
    stop: list[str] = Field(default_factory=list)
    seed: int | None = None

    @field_validator("json_schema")
    @classmethod
    def _schema_is_json_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            from specterm.engine.schema import check_json_schema

            check_json_schema(value)
        return value

    def as_recorded(self) -> dict[str, Any]:
        """What a ``request_started`` event records: every field, the schema only as whether there was one."""
        return self.model_dump(exclude={"json_schema"}) | {"json_schema": self.json_schema is not None}


class Capabilities(BaseModel):
    """What an engine can report; the UI hides what an engine cannot do."""

    speculative: bool
    verdicts: bool
    """Exact per-token verdicts (the scheduler hook is installed)."""
    structured_output: bool
    reconcile: bool
    """Counts are checked against the backend's own counters after each request."""
    backend: str
    sampling_verification_broken: bool = False
    """Temperature > 0 verification is known broken on this backend (vLLM CPU build)."""
    grammar_drafting: bool = False
    """Structured requests draft under their grammar (``engine/grammar_draft.py``)."""


class SessionClock:
    """Seconds since the session started: the ``t`` of every event."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()

    def __call__(self) -> float:
        return time.monotonic() - self._t0


class SpecEngine(ABC):
    config: EngineConfig
    capabilities: Capabilities
    renderer: PromptRenderer
    """Renders and tokenizes prompts exactly as ``generate`` will (the agent sizes prompts with it)."""
    max_model_len: int
    """The context length the engine really runs with."""

    @abstractmethod
    def generate(
        self,
        prompt: Prompt,
        params: GenerationParams,
        sink: Sink,
        *,
        request_id: str | None = None,
        cancel: threading.Event | None = None,
    ) -> RequestFinished:
        """Run one request to completion (or cancellation), emitting its events to ``sink``.
        Raises ``ChatTemplateError`` / ``PromptTooLong`` (one line) before anything is emitted."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the engine's resources."""

    def reset_prefix_cache(self) -> None:  # noqa: B027 - optional hook
        """Forget cached prompt prefixes (vLLM's prefix cache), so the next request starts cold."""

    def reset_suffix_cache(self) -> None:  # noqa: B027 - optional hook
        """Forget what suffix decoding learned from earlier requests (its global tree). Nothing else
        resets it: ``reset_prefix_cache`` leaves it alone, so it keeps learning across requests."""

    def __enter__(self) -> SpecEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
