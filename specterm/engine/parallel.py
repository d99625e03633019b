"""Tensor/pipeline-parallel on vLLM's CPU build: where each worker's threads run.

specterm keeps vLLM's EngineCore (and so the verdict hook, ``capture.py``) in its own process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``). With ``tensor_parallel_size × pipeline_parallel_size > 1``
vLLM's multiproc executor starts one worker process per rank under that EngineCore; the scheduler
still runs in the caller's thread and gets each step's sampled ids from the driver worker, so
verdicts stay exact with no change to the hook.

What the CPU build needs is thread placement (measured here, 2 cores, embedded pair, TP = 2):
``VLLM_CPU_OMP_THREADS_BIND=nobind`` (specterm's single-process default) leaves each worker an
OpenMP pool the size of the machine, and two busy-waiting pools on two cores took 180 s for 32
tokens; one core per worker took 5 s. vLLM's own ``auto`` binds one NUMA node per rank and
refuses a machine with fewer nodes than ranks ("Not enough allowed NUMA nodes"), which is every
one-socket box. So, unless the user set the variable: ``auto`` where there are enough NUMA nodes
(vLLM's best placement), else the allowed cores split into one contiguous group per rank (vLLM's
documented manual form ``"0-3|4-7"``), else — more ranks than cores — ``auto`` again, so the user
gets vLLM's own refusal instead of an oversubscribed machine.
"""

from __future__ import annotations

import os

from specterm.errors import ConfigError

BIND_VAR = "VLLM_CPU_OMP_THREADS_BIND"
_ours: set[str] = set()
"""Environment variables specterm set itself (a user's own value is never overwritten)."""


def set_default_env(defaults: dict[str, str]) -> None:
    """``os.environ.setdefault`` for each, remembering which values are specterm's."""
    for key, value in defaults.items():
        if key not in os.environ:
            os.environ[key] = value
            _ours.add(key)


def _ranges(ids: list[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"0-2,5"`` (vLLM's ``parse_id_list`` syntax)."""
    parts, start = [], None
    for i, cur in enumerate(ids):
        if start is None:
            start = cur
        if i + 1 == len(ids) or ids[i + 1] != cur + 1:
            parts.append(str(start) if start == cur else f"{start}-{cur}")
            start = None
    return ",".join(parts)


def cpu_binding(local_ranks: int, cpus: list[int], numa_nodes: int) -> str:
    """The ``VLLM_CPU_OMP_THREADS_BIND`` value for ``local_ranks`` workers on this machine."""
    if local_ranks <= 1:
        return "nobind"
    if numa_nodes >= local_ranks or len(cpus) < local_ranks:
        return "auto"
    cpus = sorted(cpus)
    size, extra = divmod(len(cpus), local_ranks)
    groups, at = [], 0
    for rank in range(local_ranks):
        n = size + (rank < extra)
        groups.append(_ranges(cpus[at : at + n]))
        at += n
    return "|".join(groups)


def prepare_cpu_workers(world_size: int, backend: str | None) -> str | None:
    """Set the binding for an engine about to start with ``world_size`` ranks on the CPU build;
    returns the value in effect (``None``: left to vLLM — Ray places its workers on other nodes,
    each with its own environment)."""
    if BIND_VAR in os.environ and BIND_VAR not in _ours:
        return os.environ[BIND_VAR]  # the user's choice
    if backend == "ray":
        return os.environ.get(BIND_VAR)
    from specterm.engine.vllm_internals import cpu_topology, reset_env_cache

    value = cpu_binding(world_size, *cpu_topology())
    os.environ[BIND_VAR] = value
    _ours.add(BIND_VAR)
    # vLLM caches its environment after the first engine starts in a process ("environment
    # variables should NOT be updated after the service is initialized"); a second engine with
    # another world size must read the new value, so drop that cache (vLLM's own reset).
    reset_env_cache()
    return value


def check_executor(backend: str | None, build: str | None) -> None:
    """vLLM's CPU platform has no Ray device key, so its Ray executor refuses it after connecting to
    the cluster ("current platform cpu does not support ray"; vllm-project/vllm issue 21602, closed
    unfixed; PR 25386 to add it, closed unmerged). Said up front, in one line, with what works."""
    if backend == "ray" and build == "cpu":
        raise ConfigError(
            "--distributed-executor-backend ray: vLLM's CPU build does not support the Ray executor "
            "(vllm-project/vllm issue 21602); on one machine use mp (the default), across "
            "machines a CUDA build"
        )


def check_pipeline_parallel(size: int, speculative: bool, build: str | None) -> None:
    """Pipeline parallel fails in vLLM 0.32.0 after a long start, so refuse it up front (one line).
    With speculation every build: the drafter exists only on the last PP rank and the others crash
    on it at start ("'…ModelRunner' object has no attribute 'drafter'", vllm-project/vllm issue
    30436, open). Target-only on the CPU build (run here): the first step of the pipelined batch
    queue fails in ``Scheduler.update_from_output`` (``KeyError`` on the request id)."""
    if size <= 1:
        return
    if speculative:
        raise ConfigError(
            "pipeline_parallel_size > 1 with speculative decoding crashes in vLLM 0.32.0 "
            "(vllm-project/vllm issue 30436): use --tensor-parallel-size instead"
        )
    if build == "cpu":
        raise ConfigError(
            "pipeline_parallel_size > 1 fails on vLLM's CPU build under specterm's engine: "
            "use --tensor-parallel-size instead"
        )
