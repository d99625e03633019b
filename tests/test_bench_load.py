"""``bench --concurrency``: the sweep's arithmetic (pure numbers), its verdict line, and its bad input
(one line each; a level the KV cache cannot hold is refused on the real engine before any run)."""

from __future__ import annotations

import pytest

from specterm.bench.load import LevelRun, crossover, summarize, verdict_line
from specterm.bench.runner import TARGET_ONLY
from specterm.cli import main
from specterm.stats import SpecStats


def runs(ratios: dict[int, float], rounds: int = 2) -> list[LevelRun]:
    out = []
    for level, ratio in ratios.items():
        for rnd in range(rounds):
            out.append(
                LevelRun(
                    TARGET_ONLY, level, rnd, wall_s=10.0, tokens=100 * level, latencies_s=[1.0, 2.0], ttfts_s=[0.1]
                )
            )
            out.append(
                LevelRun(
                    "draft_model k=4",
                    level,
                    rnd,
                    wall_s=10.0 / ratio,
                    tokens=100 * level,
                    latencies_s=[0.5, 0.7, 3.0],
                    ttfts_s=[0.2],
                    stats=SpecStats(),
                    reconciled=True,
                )
            )
    return out


def test_each_level_is_paired_with_target_only_round_by_round():
    results = summarize(runs({1: 2.0, 2: 1.5, 4: 1.1, 8: 0.9, 16: 0.6}))
    spec = {r.level: r for r in results if r.config != TARGET_ONLY}
    assert [round(spec[c].ratio, 6) for c in (1, 2, 4, 8, 16)] == [2.0, 1.5, 1.1, 0.9, 0.6]
    assert spec[4].throughput == pytest.approx(400 / (10 / 1.1))
    assert spec[1].p50_s == 0.7 and spec[1].p95_s == 3.0 and spec[1].reconciled is True
    assert crossover(results, "draft_model k=4") == 8
    assert verdict_line(results, "draft_model k=4").startswith(
        "draft_model k=4 stops paying at concurrency 8: keep it on up to 4 in flight, off from 8 (2.00× at 1"
    )


def test_a_dip_that_recovers_is_not_the_crossover_and_never_or_always_say_so():
    assert crossover(summarize(runs({1: 1.5, 2: 0.95, 4: 1.2, 8: 0.8})), "draft_model k=4") == 8
    always = summarize(runs({1: 1.5, 4: 1.2}))
    assert crossover(always, "draft_model k=4") is None
    assert verdict_line(always, "draft_model k=4").startswith("draft_model k=4 pays at every level measured")
    never = summarize(runs({1: 0.8, 4: 0.5}))
    assert verdict_line(never, "draft_model k=4").startswith("draft_model k=4 never pays here")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--concurrency", "0"], "bad --concurrency: each level must be >= 1"),
        (["--concurrency", "two"], "bad --concurrency: 'two' (expected a comma-separated list)"),
        (["--concurrency", "1,2", "--sanity"], "--sanity and --concurrency are separate runs; pick one"),
        (["--concurrency", "1", "--workload", "prose,code"], "--concurrency takes one workload at a time"),
    ],
)
def test_bad_sweeps_are_one_line(capsys, argv, message):
    assert main(["bench", "--preset", "embedded", "--raw", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


@pytest.mark.engine
def test_a_level_the_kv_cache_cannot_hold_says_how_many_fit(capsys):
    assert (
        main(
            [
                "bench",
                "--preset",
                "embedded",
                "--raw",
                "--workload",
                "prose",
                "--concurrency",
                "1,100000",
                "--methods",
                "ngram",
                "--k",
                "2",
                "--repeats",
                "1",
                "--max-tokens",
                "16",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "concurrency 100000 does not fit the KV cache: " in err and "requests of up to" in err


def test_the_recommendation_per_load_names_each_levels_winner_and_where_to_turn_it_off(tmp_path):
    from specterm.bench import recommend
    from specterm.bench.load import recommend_per_load
    from specterm.engine.base import EngineConfig

    two = runs({1: 2.0, 4: 1.2, 8: 0.9, 16: 0.7})
    ngram = [
        LevelRun(
            r.config.replace("draft_model k=4", "ngram k=2"),
            r.level,
            r.round,
            r.wall_s * (0.8 if r.level == 4 else 1.2),
            r.tokens,
            r.latencies_s,
            r.ttfts_s,
            r.stats,
            r.reconciled,
        )
        for r in runs({1: 1.5, 4: 1.4, 8: 0.95, 16: 0.8})
        if r.config != TARGET_ONLY
    ]
    base = EngineConfig(target="/m/t", draft="/m/d")
    rec = recommend_per_load(summarize(two + ngram), base)
    assert rec.per_load == {"1": "draft_model k=4", "4": "ngram k=2", "8": "none", "16": "none"}
    assert rec.speculation_off_from == 8 and rec.concurrency == 1
    assert (rec.method, rec.k, rec.draft, rec.speedup) == ("draft_model", 4, "/m/d", 2.0)
    path = tmp_path / "config.toml"
    path.write_text('# mine\n[engine]\ndtype = "float32"\n')
    recommend.write(path, rec)
    back = recommend.read(path)
    assert back.per_load == rec.per_load and back.speculation_off_from == 8 and "# mine" in path.read_text()
    never = recommend_per_load(summarize(runs({1: 0.9, 2: 0.8})), base)
    assert never.method == "none" and never.speculation_off_from == 1 and never.per_load == {"1": "none", "2": "none"}
