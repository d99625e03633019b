"""Scale-out (tensor parallel) keeps exact verdicts: the real vLLM CPU engine at TP = 2 (two CPU
worker processes under specterm's in-process EngineCore) against TP = 1, and the engine
arguments for a Ray cluster (which cannot exist here: only the arguments are checked).

The pair is the embedded one (``models/embedded``, 4+2 attention heads / 2+1 KV heads): the
tiny test pair's draft has one attention head, which vLLM cannot split over two ranks (and a
draft model must run at the target's TP size, ``v1/spec_decode/draft_model.py``).
"""

from __future__ import annotations

import os

import pytest

from specterm.bench.workloads import ENGINE_CHECK, RAW
from specterm.engine import EngineConfig, GenerationParams, load_engine
from specterm.engine.parallel import cpu_binding
from specterm.events import EngineCounters, SpecStep
from specterm.paths import embedded_pair_dir

TARGET, DRAFT = str(embedded_pair_dir() / "target"), str(embedded_pair_dir() / "draft")
PROMPTS = [*ENGINE_CHECK, RAW["toolcalls"][4]]


# --- no engine: arguments and thread placement ----------------------------------------------


def test_ray_backend_reaches_vllms_engine_args():
    from specterm.engine.vllm_engine import _engine_args

    config = EngineConfig(
        target=TARGET, draft=DRAFT, tensor_parallel_size=8, pipeline_parallel_size=2, distributed_executor_backend="ray"
    )
    args = _engine_args(config)
    assert (args.tensor_parallel_size, args.pipeline_parallel_size) == (8, 2)
    assert args.distributed_executor_backend == "ray"
    # The verdict hook stays in the EngineCore, whatever runs the workers.
    assert args.scheduler_cls == "specterm.engine.capture.CapturingScheduler"
    assert args.speculative_config["model"] == DRAFT
    assert _engine_args(EngineConfig(target=TARGET)).distributed_executor_backend is None


def test_backend_flag_and_bad_backend_from_config(monkeypatch):
    from specterm.cli import build_parser
    from specterm.cli.common import engine_config_from_args
    from specterm.errors import ConfigError

    args = build_parser().parse_args(
        [
            "run",
            "hi",
            "--tensor-parallel-size",
            "2",
            "--pipeline-parallel-size",
            "2",
            "--distributed-executor-backend",
            "ray",
        ]
    )
    config = engine_config_from_args(args)
    assert (config.tensor_parallel_size, config.pipeline_parallel_size, config.world_size) == (2, 2, 4)
    assert config.distributed_executor_backend == "ray"
    monkeypatch.setenv("SPECTERM_DISTRIBUTED_EXECUTOR_BACKEND", "spark")
    with pytest.raises(ConfigError, match="distributed_executor_backend .*environment"):
        engine_config_from_args(build_parser().parse_args(["run", "hi"]))


def test_the_ray_executor_on_the_cpu_build_is_one_line_before_any_connection():
    # Run here against a real two-node local Ray cluster: vLLM 0.32.0's CPU build connects, then
    # fails with "current platform cpu does not support ray" (vllm-project/vllm issue 21602).
    from specterm.engine.parallel import check_executor
    from specterm.errors import ConfigError

    with pytest.raises(ConfigError, match="vLLM's CPU build does not support the Ray executor .*issue 21602"):
        check_executor("ray", "cpu")
    check_executor("ray", "cuda")
    check_executor("mp", "cpu")
    check_executor(None, "cpu")


@pytest.mark.parametrize("spec", [[], ["--no-spec"]])
def test_pipeline_parallel_is_refused_before_loading(capsys, spec):
    # vLLM 0.32.0 crashes on it after the engine start (see parallel.check_pipeline_parallel).
    from specterm.cli import main

    rc = main(
        [
            "run",
            "--raw",
            "--no-record",
            "--target",
            TARGET,
            "--draft",
            DRAFT,
            *spec,
            "--pipeline-parallel-size",
            "2",
            "hello",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1, err
    assert err[0].startswith("specterm: error: pipeline_parallel_size > 1") and "--tensor-parallel-size" in err[0]
    if not spec:
        assert "issue 30436" in err[0]


@pytest.mark.parametrize(
    ("ranks", "cpus", "nodes", "expected"),
    [
        (1, [0, 1], 1, "nobind"),  # one process: specterm's default
        (2, [0, 1], 1, "0|1"),  # this machine: one core per worker
        (2, list(range(8)), 1, "0-3|4-7"),
        (3, [0, 1, 2, 3, 8, 9, 10], 1, "0-2|3,8|9-10"),
        (2, list(range(16)), 2, "auto"),  # a NUMA node per rank: vLLM's own placement
        (4, [0, 1], 1, "auto"),  # more ranks than cores: vLLM refuses (test below)
    ],
)
def test_cpu_binding_gives_each_worker_its_own_cores(ranks, cpus, nodes, expected):
    assert cpu_binding(ranks, cpus, nodes) == expected


# --- the real engine at TP = 1 and TP = 2 ----------------------------------------------------


def _worker_has_sampling_fix(worker) -> bool:
    from specterm.engine.vllm_patches import installed

    return installed()


@pytest.fixture(scope="module")
def by_tp():
    """Per TP size: (token ids, engine_counters events) per prompt; for TP = 2 also whether each
    worker process runs the CPU sampling fix (loaded there as a vLLM general plugin)."""
    results = {}
    for tp in (1, 2):
        config = EngineConfig(target=TARGET, draft=DRAFT, num_speculative_tokens=4, tensor_parallel_size=tp)
        with load_engine(config) as engine:
            assert engine.capabilities.verdicts
            runs = []
            for prompt in PROMPTS:
                events: list = []
                engine.generate(prompt, GenerationParams(max_tokens=32), events.append)
                ids = [t.id for e in events if isinstance(e, SpecStep) for t in e.tokens]
                runs.append((ids, [e for e in events if isinstance(e, EngineCounters)]))
            fix = engine._engine.collective_rpc(_worker_has_sampling_fix) if tp > 1 else None
            results[tp] = runs, fix
    return results


@pytest.mark.engine
def test_tp2_greedy_output_is_token_identical_to_tp1(by_tp):
    (tp1, _), (tp2, _) = by_tp[1], by_tp[2]
    assert all(ids for ids, _ in tp1)
    assert [ids for ids, _ in tp2] == [ids for ids, _ in tp1]


@pytest.mark.engine
@pytest.mark.parametrize("tp", [1, 2])
def test_verdicts_reconcile_with_vllms_counters(by_tp, tp):
    runs, _ = by_tp[tp]
    for ids, counters in runs:
        assert len(counters) == 1 and counters[0].matched, counters
        # drafting starts after the prefill's token: an output that ended there (EOS, which the pair
        # could pick on another CPU) drafted nothing
        assert counters[0].ours["draft_tokens"] > 0 or len(ids) == 1, (ids, counters)


@pytest.mark.engine
def test_every_tp_worker_runs_the_cpu_sampling_fix(by_tp):
    assert by_tp[2][1] == [True, True]


@pytest.mark.engine
def test_tp_larger_than_the_machine_is_vllms_error_on_one_line(capsys, monkeypatch):
    # One allowed core for two ranks: vLLM's CPU executor refuses before it starts a worker.
    # (Last in the file: the failed start runs in this process, after the engines above.)
    from specterm.cli import main

    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        rc = main(
            ["run", "--raw", "--no-spec", "--no-record", "--target", TARGET, "--tensor-parallel-size", "2", "hello"]
        )
    finally:
        os.sched_setaffinity(0, cpus)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0
    assert len(err) == 1 and err[0].startswith("specterm: error: engine failed to start: "), err
    assert "decrease DP/TP/PP" in err[0]
