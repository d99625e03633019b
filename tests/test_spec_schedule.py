"""A k-per-batch-size schedule (vLLM's ``num_speculative_tokens_per_batch_size``): built from bench
``--concurrency`` numbers, checked by vLLM's own validator, and its bad input one line each. No engine."""

from __future__ import annotations

import json

import pytest

from specterm.bench.load import LevelRun, summarize
from specterm.bench.runner import TARGET_ONLY
from specterm.bench.schedule import batch_sizes, build
from specterm.cli import main
from specterm.engine.base import EngineConfig
from specterm.engine.spec_schedule import lookup
from specterm.errors import ConfigError
from specterm.stats import SpecStats


def _stats(batches: dict[int, int]) -> SpecStats:
    return SpecStats(by_k={4: dict(batches)})


def sweep(ratios: dict[str, dict[int, float]], batches: dict[int, dict[int, int]]) -> list[LevelRun]:
    """One round per level: target-only, and each configuration at ``ratio`` × its throughput."""
    out = []
    for level in sorted(batches):
        out.append(LevelRun(TARGET_ONLY, level, 0, 10.0, 100 * level, [1.0], [0.1], _stats(batches[level])))
        for label, by_level in ratios.items():
            out.append(LevelRun(label, level, 0, 10.0 / by_level[level], 100 * level, [1.0], [0.1], _stats({})))
    return out


# levels 1, 2, 4, 8 whose steps mostly ran at 1, 2, 4 and 7 requests (a run's tail drains smaller)
BATCHES = {1: {1: 50}, 2: {2: 40, 1: 5}, 4: {4: 60, 3: 10, 1: 2}, 8: {7: 30, 8: 20, 2: 5}}
RATIOS = {
    "draft_model k=4": {1: 1.8, 2: 1.2, 4: 0.9, 8: 0.7},
    "draft_model k=2": {1: 1.5, 2: 1.3, 4: 0.95, 8: 0.8},
    "ngram k=4": {1: 1.1, 2: 1.0, 4: 0.9, 8: 0.8},
}


def test_levels_map_to_the_batch_sizes_the_steps_had_and_round_trip_through_vllms_validator():
    runs = sweep(RATIOS, BATCHES)
    measured = build(summarize(runs), batch_sizes(runs), max_num_seqs=256)
    assert measured is not None and measured.method == "draft_model" and measured.k_max == 4
    assert [lv[1] for lv in measured.levels] == [1, 2, 4, 7]  # medians of the recorded batch sizes
    # 1 → k4; 2..3 (midpoint of 2 and 4) → k2; from 4 on, speculation lost: k 0 up to max_num_seqs
    assert measured.schedule == [(1, 1, 4), (2, 3, 2), (4, 256, 0)]
    config = EngineConfig(target="t", draft="d", num_speculative_tokens=measured.k_max, spec_schedule=measured.schedule)
    dense = lookup(config.spec_schedule, 256, config.num_speculative_tokens)
    assert dense[1] == 4 and dense[3] == 2 and dense[4] == dense[256] == 0
    spec = config.speculative_config()
    assert spec["num_speculative_tokens_per_batch_size"] == [[1, 1, 4], [2, 3, 2], [4, 256, 0]]
    assert EngineConfig(target="t", draft="d", spec_schedule=json.dumps(spec["num_speculative_tokens_per_batch_size"]))


def test_no_schedule_where_speculation_never_pays_and_too_few_levels_is_one_line():
    runs = sweep({"ngram k=4": {1: 0.9, 2: 0.8}}, {1: {1: 9}, 2: {2: 9}})
    assert build(summarize(runs), batch_sizes(runs), 256) is None
    one = sweep(RATIOS, {1: {1: 9}})
    with pytest.raises(ConfigError, match="at least 2 concurrency levels"):
        build(summarize(one), batch_sizes(one), 256)


@pytest.mark.parametrize(
    ("schedule", "extra", "message"),
    [
        ("[[2,8,4]]", {}, "first batch-size range must start at 1"),
        ("[[1,4,4],[3,8,2]]", {}, "non-overlapping"),
        ("[[1,4,8]]", {}, "k 8 is above num_speculative_tokens 4"),
        ("[[1,4,-1]]", {}, "must be >= 0"),
        ("[[1,4,2]]", {"method": None}, "method none has no k"),
        ("[[1,4,2]]", {"extra_engine_args": {"data_parallel_size": 2}}, "data parallelism"),
    ],
)
def test_bad_schedules_are_one_line(schedule, extra, message):
    from pydantic import ValidationError

    from specterm.errors import first_error

    with pytest.raises(ValidationError) as err:
        EngineConfig(**({"target": "t", "method": "ngram", "spec_schedule": schedule} | extra))
    assert message in first_error(err.value)[1] and "\n" not in first_error(err.value)[1]


def test_a_schedule_file_that_is_not_json_and_recommend_on_one_level_are_one_line(tmp_path, capsys):
    bad = tmp_path / "schedule.json"
    bad.write_text("1-1: 4\n")
    target = tmp_path / "nowhere"
    assert main(["run", "hi", "--target", str(target), "--method", "ngram", "--spec-schedule", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not JSON" in err and len(err.splitlines()) == 1
    assert main(["bench", "--target", str(target), "--concurrency", "4", "--recommend"]) == 2
    err = capsys.readouterr().err.strip()
    assert "at least 2 levels" in err and len(err.splitlines()) == 1


def test_vllm_serve_refuses_a_schedule_vllm_would_drop_or_refuse(tmp_path):
    import argparse

    from specterm.cli.vllm_serve import command

    spec = json.dumps(
        {
            "method": "ngram",
            "num_speculative_tokens": 4,
            "num_speculative_tokens_per_batch_size": [[1, 1, 4], [2, 256, 0]],
        }
    )
    ns = argparse.Namespace(
        model="m", vllm_args=["--speculative-config", spec, "-dp", "2"], publish="off", token=None, dry_run=True
    )
    with pytest.raises(ConfigError, match="data parallelism"):
        command(ns)
    ns.vllm_args = ["--speculative-config", spec.replace("[1, 1, 4]", "[1, 3, 4]")]
    with pytest.raises(ConfigError, match="non-overlapping"):
        command(ns)
    ns.vllm_args = ["--speculative-config", spec]
    assert spec in command(ns)[0]


def test_steps_per_k_and_batch_size_are_counted_and_merge():
    from specterm.events import SpecStep

    a, b = SpecStats(), SpecStats()
    a.add_step(SpecStep(request_id="r", index=0, drafted=[1, 2, 3, 4], batch_size=1))
    a.add_step(SpecStep(request_id="r", index=1, drafted=[1, 2], batch_size=2))
    b.add_step(SpecStep(request_id="s", index=0, batch_size=3))
    b.add_step(SpecStep(request_id="s", index=1, batch_size=5))
    b.add_step(SpecStep(request_id="s", index=2))  # an older session: no batch size
    a.merge(b)
    assert a.by_k == {4: {1: 1}, 2: {2: 1}, 0: {3: 1, 5: 1, 0: 1}}
    assert a.k_line() == "k4 ×1 @1 · k2 ×1 @2 · k0 ×3 @3–5"
    assert SpecStep(request_id="r", index=0, drafted=[1], invalid_drafts=2).k == 3


def test_replay_summary_shows_steps_per_k_and_their_batch_sizes(tmp_path, capsys):
    from specterm.events import SpecStep, Token
    from specterm.session.recorder import Recorder
    from specterm.session.synthetic import synthetic_header

    path = tmp_path / "s.jsonl"
    tok = Token(id=5, text="a", verdict="target")
    with Recorder(path, synthetic_header()) as rec:
        fix = Token(id=6, text="b", verdict="correction")
        rec.write(
            SpecStep(request_id="r", index=0, drafted=[1, 2, 3, 4], tokens=[fix], rejected=[1, 2, 3, 4], batch_size=1)
        )
        for i in range(1, 3):
            rec.write(SpecStep(request_id="r", index=i, tokens=[tok], batch_size=3 + i))
    assert main(["replay", str(path), "--summary"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "steps per k @ batch size" in out and "k4 ×1 @1 · k0 ×2 @4–5" in out


def test_schedule_serve_turns_its_served_rows_into_the_schedule_they_imply():
    """``benchmarks/schedule_serve.py`` ends with the schedule its own no-speculation and fixed-k rows
    imply (bench's rule on served throughputs): on the recorded runs, k = 2 at 1 in flight and off at
    8 where both fixed k lost; nothing where speculation never paid."""
    import argparse
    import importlib.util
    from pathlib import Path

    bench = Path(__file__).resolve().parent.parent / "benchmarks"
    spec = importlib.util.spec_from_file_location("schedule_serve", bench / "schedule_serve.py")
    serve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(serve)

    def implied(name: str) -> str:
        run = json.loads((bench / "results" / name).read_text())
        args = argparse.Namespace(method=run["args"]["method"], max_num_seqs=run["args"]["max_num_seqs"])
        return serve.served_schedule(serve.with_ratios(run["results"]), args)

    assert implied("schedule_serve_smollm2_ngram_bench_schedule.json").startswith(
        "the served rows imply [[1, 4, 2], [5, 8, 0]] (1 in flight → k 2, 8 in flight → k 0)"
    )
    assert "no speculation at any level" in implied("schedule_serve_smollm2_agent_prose.json")
