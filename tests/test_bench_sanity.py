"""The sanity check: verdict logic on synthetic stats, and one real-engine run at T = 0."""

from __future__ import annotations

import json

import pytest

from specterm.bench.sanity import SanityRun, identical_draft_config, judge, one_draft_then_nothing
from specterm.stats import SpecStats


def stats(drafts, k, per_pos):
    """SpecStats for ``drafts`` steps of k drafts with accepted counts per position."""
    return SpecStats(drafts=drafts, draft_tokens=drafts * k, accepted=sum(per_pos), accepted_per_pos=list(per_pos))


def ident(st, temp=0.0, outputs=None, reference=None):
    return SanityRun("identical_draft", f"draft = target, T={temp:g}", temp, st, outputs or [[1, 2]], reference)


def test_passes_at_full_acceptance_and_identical_outputs():
    runs = [
        ident(stats(10, 4, [10, 10, 10, 10]), reference=[[1, 2]]),
        ident(stats(10, 4, [10, 10, 10, 9]), temp=1.0),  # 39/40 = 97.5%: just below
        SanityRun("lossless", "real draft", 0.0, stats(10, 4, [5, 3, 1, 0]), [[1, 2], [3]], [[1, 2], [3]]),
    ]
    violations = judge(runs)
    assert len(violations) == 1 and "97.5%" in violations[0].message  # only the 97.5% run
    assert judge(runs[:1]) == [] and judge(runs[2:]) == []  # low acceptance of a REAL draft is fine


def test_threshold_is_inclusive_at_98_percent():
    assert judge([ident(stats(50, 1, [49]))]) == []
    assert len(judge([ident(stats(50, 1, [48]))])) == 1


def test_low_acceptance_with_identical_draft_fails_and_names_the_cpu_signature():
    run = ident(stats(40, 4, [6, 0, 0, 0]), temp=1.0, outputs=[[5, 0, 7], [0]])
    (v,) = judge([run])
    assert v.check == "identical draft" and v.config == "draft = target, T=1"
    assert "3.8%" in v.message and "at most one draft accepted" in v.message and "token id 0 emitted 2×" in v.message
    assert "T=1" in str(v)


def test_low_acceptance_without_the_signature_does_not_blame_the_cpu_build():
    (v,) = judge([ident(stats(40, 4, [20, 10, 0, 0]))])
    assert "CPU" not in v.message


def test_no_drafts_is_a_violation_not_a_pass():
    (v,) = judge([ident(SpecStats())])
    assert "no draft tokens" in v.message


def test_mismatched_greedy_output_fails_with_prompt_and_position():
    run = SanityRun(
        "lossless",
        "draft_model k=4, real draft",
        0.0,
        stats(10, 4, [5, 3, 1, 0]),
        outputs=[[1, 2, 3], [4, 5, 9, 9]],
        reference=[[1, 2, 3], [4, 5, 6, 7]],
    )
    (v,) = judge([run])
    assert v.check == "lossless greedy" and "prompt 2" in v.message and "token 2" in v.message
    short = SanityRun("lossless", "x", 0.0, stats(1, 1, [1]), outputs=[[1, 2]], reference=[[1, 2, 3]])
    assert "token 2" in judge([short])[0].message
    fewer = SanityRun("lossless", "x", 0.0, stats(1, 1, [1]), outputs=[[1]], reference=[[1], [2]])
    assert "1 outputs for 2" in judge([fewer])[0].message


def test_signature_detector():
    assert one_draft_then_nothing([0.3, 0.0, 0.0])
    assert not one_draft_then_nothing([0.3, 0.1, 0.0])
    assert not one_draft_then_nothing([0.0, 0.0])
    assert not one_draft_then_nothing([0.5])


def test_identical_draft_config_samples_drafts_from_the_target_itself():
    cfg = identical_draft_config("/m/target", 3)
    spec = cfg.extra_engine_args["speculative_config"]
    assert (cfg.target, cfg.draft, cfg.method, cfg.num_speculative_tokens) == (
        "/m/target",
        "/m/target",
        "draft_model",
        3,
    )
    assert spec == {
        "method": "draft_model",
        "model": "/m/target",
        "num_speculative_tokens": 3,
        "draft_sample_method": "probabilistic",
    }


@pytest.mark.engine
def test_bench_sanity_cli_passes_at_temperatures_0_07_1_with_the_tiny_pair(tiny_pair, tmp_path, capsys):
    """The issue's acceptance check: on the CPU build (with specterm's sampling fix) the identical
    draft is accepted ≥ 98 % at every temperature, greedy is lossless, and the real draft's samples
    are distributed as target-only's at T = 0.7 and 1."""
    from specterm.cli import main

    target, draft = tiny_pair
    out = tmp_path / "sanity.json"
    rc = main(
        ["bench", "--sanity", "--temperatures", "0,0.7,1", "--target", target, "--draft", draft, "--json", str(out)]
    )
    data = json.loads(out.read_text())
    assert rc == 0, data["violations"]
    assert data["ok"] and data["violations"] == []
    identical = [r for r in data["runs"] if r["check"] == "identical_draft"]
    assert [r["temperature"] for r in identical] == [0.0, 0.7, 1.0]
    assert all(r["acceptance_rate"] >= 0.98 for r in identical)
    checks = {r["check"]: r for r in data["runs"]}
    assert checks["identical_draft"]["lossless"] is None  # the T = 1 run: no greedy reference
    assert identical[0]["lossless"]
    assert checks["lossless"]["lossless"] and checks["lossless"]["draft_tokens"] > 0
    dist = [r for r in data["runs"] if r["check"] == "distribution"]
    assert [r["temperature"] for r in dist] == [0.7, 1.0]
    assert "sanity: speculative decoding is correct" in capsys.readouterr().out
