"""``SpecEngine`` on vLLM, in this process, with exact per-token verdicts.

Design (verified on vLLM 0.32.0; how verdicts are captured: docs/verdicts.md): the synchronous ``LLMEngine`` with
``VLLM_ENABLE_V1_MULTIPROCESSING=0`` runs vLLM's EngineCore in the calling thread; every ``step()``
is exactly one engine step, so a ``RequestOutputKind.DELTA`` output holds exactly that step's
emitted tokens — deltas are never merged however slow the consumer is. ``CapturingScheduler``
(``capture.py``) records the step's drafts and sampled ids in the same thread; this module pairs
each record with the step's delta and ``inflight.InFlight`` folds the pair into the request, verdicts
assigned by its ``StepAssembler`` (terms in ``specterm.events``). ``engine/batch.py`` drives the same
engine with many requests through the same stepping methods (``add_request``, ``step``, ``abort``).

After each request the verdict counts are reconciled with vLLM's own counters
(``vllm:spec_decode_*`` deltas and the per-request detailed metrics); the result is an
``engine_counters`` event, and a mismatch is also a loud ``error`` event.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any

from specterm.engine.base import (
    DEFAULT_MAX_MODEL_LEN,
    NEEDS_DRAFT_MODEL,
    Capabilities,
    EngineConfig,
    GenerationParams,
    SessionClock,
    SpecEngine,
)
from specterm.engine.chat import Prompt, PromptRenderer, check_fits
from specterm.engine.checks import check_model_dir, check_same_tokenizer, looks_like_hub_id
from specterm.engine.inflight import InFlight
from specterm.engine.installs import ENGINE_EXTRA_HINT, vllm_build, vllm_label
from specterm.engine.parallel import check_executor, check_pipeline_parallel, prepare_cpu_workers, set_default_env
from specterm.engine.prometheus import activate_collectors, own_vllm_collectors
from specterm.engine.suffix import reset_suffix_drafter, suffix_decoding_problem
from specterm.engine.verdicts import StepAssembler, StepRecord, reconcile, report_check, spec_counters
from specterm.engine.vllm_internals import (
    engine_args,
    engine_scheduler,
    refreeze_heap,
    shutdown_engine,
    work_around_kernel_scan_crash,
)
from specterm.errors import ConfigError, EngineUnavailable, first_error
from specterm.events import Error, RequestFinished, RequestStarted, Sink

# Must be set before vllm is imported: in-process EngineCore, and CPU-friendly defaults.
_ENV_DEFAULTS = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    # One process: no binding. TP/PP workers get one core group each (``parallel.py``).
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    # vLLM logs to stdout by default, which would corrupt `run --json` and the UI: leave logging
    # unconfigured (Python's last-resort handler writes to stderr) and raise the level below.
    "VLLM_CONFIGURE_LOGGING": "0",
    "TOKENIZERS_PARALLELISM": "false",
    "TQDM_DISABLE": "1",
    # torch's C++ warnings (NUMA binding) go straight to fd 2 and would scribble over the dashboard.
    "TORCH_CPP_LOG_LEVEL": "ERROR",
}


def _quiet_vllm() -> None:
    import logging
    import warnings

    level = os.environ.get("SPECTERM_VLLM_LOG_LEVEL", "ERROR").upper()
    logging.getLogger("vllm").setLevel(level)
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"vllm\..*")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"vllm\..*")


def _one_line(err: BaseException) -> str:
    """The most useful single line of an exception (pydantic errors: the first message)."""
    errors = getattr(err, "errors", None)
    if callable(errors):
        try:
            return f"{type(err).__name__}: {first_error(err)[1]}"
        except Exception:  # noqa: BLE001 - fall back to the text
            pass
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0] if lines else ''}"


def default_max_model_len(target: str) -> int | None:
    """The model's own context (``config.json``), capped at ``DEFAULT_MAX_MODEL_LEN``; ``None`` for a
    hub id (only vLLM reads its config: ``_engine_args`` has vLLM apply the same cap)."""
    import json
    from pathlib import Path

    if looks_like_hub_id(target):
        return None
    try:
        cfg = json.loads((Path(target).expanduser() / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    cfg = cfg.get("text_config", cfg)
    own = next(
        (
            cfg[k]
            for k in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
            if isinstance(cfg.get(k), int)
        ),
        None,
    )
    return min(own, DEFAULT_MAX_MODEL_LEN) if own else None


CPU_BLOCK_SIZE = 32
"""The prefix cache reuses whole KV blocks, and the CPU build's default block is 128 tokens, so an
agent step re-prefilled up to 127 tokens of the prompt it had just sent. 32 (the smallest size the
CPU attention backend prefers) took the Qwen pair's later agent steps from 71-86 % of their prompt
cached (TTFT 26-33 % of step 1) to 84-91 % (18-21 %), decode unchanged (README "Where an agent
turn's time goes"). CUDA's default is already 16. ``extra_engine_args`` can still override it."""


def _engine_args(config: EngineConfig):
    build = vllm_build()
    kwargs: dict[str, Any] = dict(
        model=config.target,
        dtype=config.dtype,
        max_model_len=config.max_model_len or default_max_model_len(config.target),
        seed=config.seed,
        tensor_parallel_size=config.tensor_parallel_size,
        pipeline_parallel_size=config.pipeline_parallel_size,
        distributed_executor_backend=config.distributed_executor_backend,
        scheduler_cls="specterm.engine.capture.CapturingScheduler",
        disable_log_stats=False,
        # Eager only where it is needed: the CPU build has no graph capture to turn off, while on CUDA
        # graphs are what small-batch decoding (exactly what a speculative step is) depends on.
        enforce_eager=build != "cuda",
        **({"block_size": CPU_BLOCK_SIZE} if build == "cpu" else {}),
        structured_outputs_config={
            "backend": config.structured_output_backend,
            # The per-request flag is ignored with speculation; the engine-wide one works.
            "disable_any_whitespace": config.structured_output_backend in ("xgrammar", "guidance"),
        },
    )
    if config.method is not None:
        kwargs["speculative_config"] = config.speculative_config()
        kwargs["per_request_spec_decode_metrics"] = "detailed"  # refused without speculation
        if config.drafts_with_grammar and build != "cpu":
            # The proposals are matched to the step that verifies them in schedule order (capture.py);
            # the CPU build never schedules asynchronously, CUDA may.
            kwargs["async_scheduling"] = False
    kwargs.update(config.extra_engine_args)
    # Where the context is still unknown (a hub id), vLLM caps the model's own at the default.
    return engine_args(kwargs, context_cap=DEFAULT_MAX_MODEL_LEN)


def validate_config(c: EngineConfig) -> None:
    """One line for a missing or non-model path, a draft with another tokenizer, or a parallel
    layout vLLM 0.32.0 cannot run, before loading."""
    build = vllm_build()
    check_pipeline_parallel(c.pipeline_parallel_size, c.speculative, build)
    check_executor(c.distributed_executor_backend, build)
    check_model_dir(c.target, "target")
    if c.method == "suffix" and (problem := suffix_decoding_problem()):
        raise EngineUnavailable(problem)
    if c.grammar_drafting is True and c.method is not None:  # asked for: say why it cannot run
        if c.method != "draft_model":
            raise ConfigError(f"--grammar-drafting needs --method draft_model, not {c.method}")
        if c.world_size > 1:
            raise ConfigError(
                "--grammar-drafting needs one worker (the grammar lives in the engine's "
                "process): drop --tensor-parallel-size / --pipeline-parallel-size"
            )
        if c.structured_output_backend not in ("xgrammar", "auto"):
            raise ConfigError(f"--grammar-drafting needs the xgrammar backend, not {c.structured_output_backend}")
    if c.method in NEEDS_DRAFT_MODEL:
        if not c.draft:
            raise ConfigError(f"method {c.method} needs a draft model (--draft PATH)")
        check_model_dir(c.draft, "draft")
        check_same_tokenizer(c.target, c.draft)


class VllmSpecEngine(SpecEngine):
    """vLLM's engine in this process; one request at a time (``generate`` holds a lock)."""

    def __init__(self, config: EngineConfig, *, clock: SessionClock | None = None) -> None:
        self.config = config
        self.clock = clock or SessionClock()
        set_default_env(_ENV_DEFAULTS)  # before anything imports torch or vllm
        self._validate()
        build = vllm_build()
        if build is None:
            raise EngineUnavailable(f"the vLLM engine is not installed: {ENGINE_EXTRA_HINT}")
        if build == "cpu":  # one core group per TP/PP worker process (parallel.py)
            prepare_cpu_workers(config.world_size, config.distributed_executor_backend)
        _quiet_vllm()
        work_around_kernel_scan_crash()
        from specterm.engine.vllm_patches import installed as sampling_fixed
        from specterm.engine.vllm_patches import register as fix_cpu_sampling

        fix_cpu_sampling()  # also a vLLM general plugin (worker processes); idempotent
        try:
            from vllm import LLMEngine  # the synchronous engine (an alias of vllm.v1's)

            self._engine = LLMEngine.from_engine_args(_engine_args(config))
        except Exception as err:  # vLLM raises many types; the user needs one line
            raise EngineUnavailable(f"engine failed to start: {_one_line(err)}") from err
        self._metrics = own_vllm_collectors()
        from specterm.engine.capture import CapturingScheduler

        scheduler = engine_scheduler(self._engine)
        self._scheduler = scheduler if isinstance(scheduler, CapturingScheduler) else None
        if self._scheduler is not None and config.method in NEEDS_DRAFT_MODEL:
            self._scheduler.passes_per_step = config.num_speculative_tokens
        from transformers import AutoTokenizer

        self._hf_tokenizer = AutoTokenizer.from_pretrained(config.target)
        grammar = config.drafts_with_grammar and self._install_grammar_drafting()
        self.renderer = PromptRenderer(
            self._hf_tokenizer, template_file=config.chat_template, model=f"the target model ({config.target})"
        )
        model_config = getattr(self._engine, "model_config", None)
        self.max_model_len = int(
            getattr(model_config, "max_model_len", None) or config.max_model_len or DEFAULT_MAX_MODEL_LEN
        )
        self._lock = threading.Lock()
        self.capabilities = Capabilities(
            speculative=config.speculative,
            verdicts=self._scheduler is not None,
            structured_output=True,
            reconcile=config.speculative,
            backend=f"vllm {vllm_label()}",
            # Only if the CPU sampling fix could not be installed (vllm_patches.register failed).
            sampling_verification_broken=build == "cpu" and config.speculative and not sampling_fixed(),
            grammar_drafting=grammar,
        )

    def _install_grammar_drafting(self) -> bool:
        """Install grammar drafting; whether it runs. Asked for (``--grammar-drafting``), a failure is
        an error; left to its default, vLLM's plain drafting goes on and a warning says why."""
        from specterm.engine.grammar_draft import GrammarDraftState, install

        try:
            if self._scheduler is None:
                raise RuntimeError("specterm's scheduler (capture.py) is not in this process")
            state = GrammarDraftState(self._scheduler, self._hf_tokenizer, self._engine.model_config.get_vocab_size())
            self._engine.collective_rpc(install, args=(state,))
        except Exception as err:  # one line: which part of vLLM's layout it did not find
            message = f"grammar drafting could not be installed: {_one_line(err)}"
            if self.config.grammar_drafting:
                self.close()
                raise EngineUnavailable(message) from err
            import logging

            logging.getLogger(__name__).warning("%s; drafting without the grammar", message)
            return False
        self._scheduler.grammar_drafts = state
        return True

    def _validate(self) -> None:
        validate_config(self.config)

    def generate(
        self,
        prompt: Prompt,
        params: GenerationParams,
        sink: Sink,
        *,
        request_id: str | None = None,
        cancel: threading.Event | None = None,
    ) -> RequestFinished:
        with self._lock:
            return self._generate(prompt, params, sink, request_id or uuid.uuid4().hex[:8], cancel)

    def _sampling_params(self, params: GenerationParams):
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        return SamplingParams(
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            seed=params.seed,
            stop=params.stop or None,
            output_kind=RequestOutputKind.DELTA,
            structured_outputs=StructuredOutputsParams(json=params.json_schema) if params.json_schema else None,
        )

    # -- stepping: how ``generate`` and ``engine/batch.py`` drive the engine (under ``lock``) ---------

    @property
    def lock(self) -> threading.Lock:
        """Held for a whole request (``generate``) or batch (``batch.run_concurrent``): every step
        advances every request in the engine, so one driver at a time."""
        return self._lock

    @property
    def hf_tokenizer(self) -> Any:
        return self._hf_tokenizer

    def cache_config(self) -> Any:
        """The scheduler's KV-cache config (``num_gpu_blocks``, ``block_size``); ``None`` if it has none."""
        return getattr(engine_scheduler(self._engine), "cache_config", None)

    @property
    def max_num_seqs(self) -> int | None:
        """Requests vLLM schedules in one step at most: where a batch-size schedule must end."""
        from specterm.engine.vllm_internals import max_num_seqs

        return max_num_seqs(self._engine)

    def counters_at_start(self) -> dict[str, Any] | None:
        """vLLM's spec-decode counters before a run, to reconcile with after it; ``None`` without
        speculation."""
        if not self.config.speculative:
            return None
        activate_collectors(self._metrics)  # another engine in this process may have replaced them
        return spec_counters(self._engine.get_metrics())

    def counters(self) -> dict[str, Any]:
        return spec_counters(self._engine.get_metrics())

    def add_request(self, request_id: str, prompt_ids: list[int], params: GenerationParams) -> str:
        """Put a rendered prompt in the engine; vLLM's id for it (what outputs and records carry)."""
        from vllm.inputs import TokensPrompt

        return self._engine.add_request(
            request_id, TokensPrompt(prompt_token_ids=prompt_ids), self._sampling_params(params)
        )

    def step(self) -> tuple[list[Any], dict[str, StepRecord], float]:
        """One engine step: its outputs (DELTA: this step's tokens), the capture hook's record of each
        request in it by vLLM's id (none without the hook), and the step's wall time."""
        t0 = time.perf_counter()
        outputs = self._engine.step()
        wall = time.perf_counter() - t0
        records = {r.req_id: r for r in self._scheduler.take_records()} if self._scheduler else {}
        return outputs, records, wall

    def abort(self, request_ids: list[str]) -> None:
        """Take requests out of the engine, and any records they left: a failing sink or Ctrl-C
        mid-request must not leave them for the next driver to step along with its own."""
        self._engine.abort_request(request_ids)
        if self._scheduler is not None:
            self._scheduler.take_records()

    def _generate(self, prompt, params, sink, rid, cancel) -> RequestFinished:
        clock = self.clock
        # Rendered and checked before anything is emitted: a bad prompt is one line, nothing half-sent.
        prompt_ids = self.renderer.ids(prompt)
        check_fits(len(prompt_ids), self.max_model_len)
        before = self.counters_at_start()
        sink(RequestStarted(t=clock(), request_id=rid, prompt_tokens=len(prompt_ids), params=params.as_recorded()))
        if params.temperature > 0 and self.capabilities.sampling_verification_broken:
            sink(
                Error(
                    t=clock(),
                    level="warning",
                    where="engine",
                    request_id=rid,
                    message="temperature > 0 on the vLLM CPU build without specterm's sampling fix "
                    "(vLLM issue 55005): verdicts and output may be wrong",
                )
            )
        start = time.perf_counter()
        internal_id = self.add_request(rid, prompt_ids, params)
        request = InFlight(rid, internal_id, StepAssembler(rid, self._hf_tokenizer, prompt_ids, clock, sink), start)
        try:
            cancelled = self._drive(request, cancel)
        except BaseException:
            self.abort([rid])
            raise
        wall_s = time.perf_counter() - start
        if self.config.speculative and not cancelled:
            self._reconcile(rid, request.assembler, before, request.detailed, sink)
        finished = request.finished(clock(), wall_s, cancelled=cancelled)
        sink(finished)
        return finished

    def _drive(self, request: InFlight, cancel: threading.Event | None) -> bool:
        """Step the engine until the request ends, folding its outputs into ``request``; whether it
        was cancelled."""
        while self._engine.has_unfinished_requests():
            if cancel is not None and cancel.is_set():
                self.abort([request.request_id])
                request.finish_reason = "cancelled"
                return True
            outputs, records, wall = self.step()
            for out in outputs:
                if out.request_id in (request.request_id, request.internal_id):
                    request.fold(out, records.get(request.internal_id), wall)
        return False

    def _reconcile(self, rid, assembler, before, detailed, sink) -> None:
        after = self.counters()
        ours, theirs, problems = reconcile(
            assembler.stats, assembler.per_step, before, after, detailed, assembler.padding
        )
        report_check(sink, self.clock(), rid, ours, theirs, "; ".join(problems), "vLLM's counters")

    def generate_concurrent(self, items, sink: Sink, *, concurrency: int):
        """``items`` (``engine.batch.BatchItem``) with up to ``concurrency`` in flight at once, verdicts
        per request (``engine/batch.py``); returns a ``BatchResult``."""
        from specterm.engine.batch import run_concurrent

        return run_concurrent(self, items, sink, concurrency=concurrency)

    def sample_token_ids(
        self,
        prompt: str,
        *,
        n: int,
        temperature: float,
        max_tokens: int,
        seed0: int = 0,
        batch: int = 256,
        json_schema: dict[str, Any] | None = None,
    ) -> list[list[int]]:
        """``n`` seeded samples (seeds ``seed0 .. seed0 + n - 1``) of the first ``max_tokens`` tokens
        after ``prompt``, batched ``batch`` requests at a time; no events. For statistical checks of
        the sampler (``bench.distribution``): batching also exercises vLLM's per-request expansion of
        sampling parameters over draft positions, where the CPU build's T > 0 bug was. ``json_schema``
        constrains every sample (grammar drafting's distribution check)."""
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        structured = StructuredOutputsParams(json=json_schema) if json_schema else None

        engine, out = self._engine, {}
        with self._lock:
            for start in range(0, n, batch):
                for i in range(start, min(n, start + batch)):
                    engine.add_request(
                        f"sample-{i}",
                        prompt,
                        SamplingParams(
                            max_tokens=max_tokens,
                            temperature=temperature,
                            seed=seed0 + i,
                            ignore_eos=True,
                            structured_outputs=structured,
                        ),
                    )
                while engine.has_unfinished_requests():
                    for o in engine.step():
                        if o.finished:
                            out[o.request_id] = list(o.outputs[0].token_ids)
                    if self._scheduler is not None:
                        self._scheduler.take_records()
        return [out[f"sample-{i}"] for i in range(n)]

    def reset_prefix_cache(self) -> None:
        if getattr(self, "_engine", None) is not None:
            self._engine.reset_prefix_cache()

    def reset_suffix_cache(self) -> None:
        """Forget what suffix decoding learned: a fresh global tree and no cached responses. vLLM has
        no public call for it (its prefix-cache reset leaves the drafter alone), so the model runner's
        drafter gets a new ``SuffixDecodingCache`` built as vLLM builds it."""
        if getattr(self, "_engine", None) is not None and self.config.method == "suffix":
            self._engine.collective_rpc(reset_suffix_drafter)

    def close(self) -> None:
        engine = getattr(self, "_engine", None)
        if engine is not None:
            shutdown_engine(engine)
            self._engine = None
            del engine  # before the collection below: the engine's own cycles go with it
            refreeze_heap()
