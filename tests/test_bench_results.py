"""Aggregation of benchmark records (synthetic numbers) and the runner's interleaving (fake engine)."""

from __future__ import annotations

import pytest

from specterm.bench.results import Spread, aggregate, decode_rate, draft_cost_ratio, merge_stats
from specterm.bench.runner import DRAFT_AS_TARGET, TARGET_ONLY, BenchRunner, ConfigSpec, RequestRecord
from specterm.bench.theory import alpha_from_acceptance_length, theoretical_speedup
from specterm.engine.base import EngineConfig, GenerationParams
from specterm.events import RequestFinished, RequestStarted, SpecStep, Token
from specterm.stats import SpecStats


def rec(config, block, rnd, *, tokens=33, wall=1.0, ttft=0.1, step=0.01, steps=None, drafts=0, k=0, accepted=0):
    stats = SpecStats(steps=steps or tokens, drafts=drafts, draft_tokens=drafts * k, accepted=accepted)
    stats.by_verdict["target"] = tokens
    if drafts:
        stats.accepted_per_pos = [accepted // k] * k
    return RequestRecord(
        config=config,
        block=block,
        round=rnd,
        prompt=0,
        tokens=tokens,
        first_step_tokens=1,
        steps=steps or tokens,
        wall_s=wall,
        ttft_s=ttft,
        decode_step_s=[step] * 5,
        stats=stats,
    )


def test_spread_median_and_range():
    s = Spread.of([3.0, 1.0, 2.0, 10.0])
    assert (s.median, s.lo, s.hi, s.n) == (2.5, 1.0, 10.0, 4)
    assert Spread.of([]) is None
    assert Spread.of([None, 2.0]).median == 2.0


def test_decode_rate_excludes_the_first_token_and_ttft():
    r = rec(TARGET_ONLY, "x", 0, tokens=33, wall=1.1, ttft=0.1)
    assert decode_rate([r]) == pytest.approx(32 / 1.0)
    assert decode_rate([]) is None


def test_speedup_is_paired_per_round_then_median_and_range():
    spec = ConfigSpec("draft_model", 4)
    records = []
    # Three rounds; the machine drifts (target slower each round) but each pair is 2x, 3x, 2.5x.
    for rnd, (t_wall, ratio) in enumerate([(1.1, 2.0), (2.1, 3.0), (1.6, 2.5)]):
        records.append(rec(TARGET_ONLY, spec.label, rnd, wall=t_wall))
        spec_decode = (t_wall - 0.1) / ratio
        records.append(rec(spec.label, spec.label, rnd, wall=0.1 + spec_decode, steps=12, drafts=10, k=4, accepted=20))
    res = aggregate(records, [spec])
    target, dm = res
    assert target.label == TARGET_ONLY and target.speedup.median == 1.0
    assert (dm.speedup.median, dm.speedup.lo, dm.speedup.hi, dm.speedup.n) == pytest.approx((2.5, 2.0, 3.0, 3))
    assert dm.acceptance_rate == pytest.approx(60 / 120)
    assert dm.mean_acceptance_length == pytest.approx(1 + 60 / 30)
    assert dm.steps_per_token == pytest.approx(36 / 99)
    assert dm.per_position == pytest.approx([5 / 10] * 4)
    assert dm.c is None and dm.theory is None  # no draft timing block: no c, so no theory


def test_c_from_the_draft_timing_block_feeds_the_theory():
    spec, ngram = ConfigSpec("draft_model", 2), ConfigSpec("ngram", 2)
    records = [
        rec(TARGET_ONLY, DRAFT_AS_TARGET, 0, step=0.010),
        rec(DRAFT_AS_TARGET, DRAFT_AS_TARGET, 0, step=0.004),
        rec(TARGET_ONLY, DRAFT_AS_TARGET, 1, step=0.020),
        rec(DRAFT_AS_TARGET, DRAFT_AS_TARGET, 1, step=0.006),
        rec(TARGET_ONLY, spec.label, 0, step=0.010),
        rec(spec.label, spec.label, 0, wall=0.6, step=0.016, drafts=10, k=2, accepted=15),
        rec(TARGET_ONLY, ngram.label, 0, step=0.010),
        rec(ngram.label, ngram.label, 0, wall=0.8, step=0.012, drafts=10, k=2, accepted=10),
    ]
    c = draft_cost_ratio(records)
    assert (c.median, c.lo, c.hi) == pytest.approx((0.35, 0.3, 0.4))
    by = {r.label: r for r in aggregate(records, [spec, ngram])}
    dm, ng = by[spec.label], by[ngram.label]
    assert dm.c == pytest.approx(0.35)
    assert dm.c_inline == pytest.approx((0.016 - 0.010) / (2 * 0.010))
    alpha = alpha_from_acceptance_length(2.5, 2)
    assert dm.alpha == pytest.approx(alpha)
    assert dm.theory == pytest.approx(theoretical_speedup(alpha, 2, 0.35))
    assert dm.measured_over_theory == pytest.approx(dm.speedup.median / dm.theory)
    assert ng.c == 0.0 and ng.theory == pytest.approx(theoretical_speedup(ng.alpha, 2, 0.0))
    assert TARGET_ONLY in by and DRAFT_AS_TARGET not in by


def test_merge_stats_sums_counts_and_keeps_stats_definitions():
    a, b = SpecStats(drafts=2, draft_tokens=8, accepted=6), SpecStats(drafts=1, draft_tokens=2, accepted=0)
    a.accepted_per_pos, b.accepted_per_pos = [2, 2, 1, 1], [0, 0]
    m = merge_stats([_with(a), _with(b)])
    assert (m.drafts, m.draft_tokens, m.accepted, m.accepted_per_pos) == (3, 10, 6, [2, 2, 1, 1])
    assert m.acceptance_rate == pytest.approx(0.6) and m.mean_acceptance_length == pytest.approx(3.0)


def _with(stats):
    r = rec("x", "x", 0)
    r.stats = stats
    return r


class FakeEngine:
    """Emits ``n`` one-token steps; logs every request so the test can see the run order."""

    def __init__(self, config, log):
        self.config, self.log = config, log

    def generate(self, prompt, params, sink, **_):
        name = TARGET_ONLY if self.config.method is None else self.config.method
        self.log.append((name, prompt, params.max_tokens))
        for i in range(params.max_tokens):
            sink(SpecStep(request_id="r", index=i, tokens=[Token(id=5, text="x", verdict="target")], wall_s=0.01))
        sink(RequestFinished(request_id="r", output_tokens=params.max_tokens, wall_s=0.1, ttft_s=0.01))

    def close(self):
        self.log.append(("close", self.config.method, 0))

    def reset_prefix_cache(self):
        self.log.append(("reset", self.config.method, 0))

    def reset_suffix_cache(self):
        self.log.append(("suffix-reset", self.config.method, 0))


def test_runner_interleaves_and_swaps_order_and_closes_engines():
    log = []
    base = EngineConfig(target="t", draft="d")
    runner = BenchRunner(
        base,
        {"w": ["p1", "p2"]},
        [ConfigSpec("ngram", 2)],
        repeats=2,
        params=GenerationParams(max_tokens=3),
        loader=lambda c: FakeEngine(c, log),
    )
    records = runner.run()
    assert len(records) == runner.total_requests == 8
    measured = [(n, p) for n, p, mt in log if mt == 3]
    assert measured == [
        (TARGET_ONLY, "p1"),
        ("ngram", "p1"),
        ("ngram", "p2"),
        (TARGET_ONLY, "p2"),
        ("ngram", "p1"),
        (TARGET_ONLY, "p1"),
        (TARGET_ONLY, "p2"),
        ("ngram", "p2"),
    ]
    assert [e for e in log if e[0] == "close"] == [("close", "ngram", 0), ("close", None, 0)]
    # each measured request starts from a cold prefix cache, on both sides
    runs = [
        e for e in log if e[0] not in ("close", "suffix-reset") and e[2] != 4
    ]  # (the 4-token warm-ups are not measured)
    assert all(runs[i][0] == "reset" and runs[i + 1][0] != "reset" for i in range(0, len(runs), 2))
    assert [r[1] for r in runs[::2]] == [None, "ngram", "ngram", None, "ngram", None, None, "ngram"]
    assert {r.workload for r in records} == {"w"} and all(r.decode_tokens == 2 for r in records)


def test_runner_times_the_draft_only_for_draft_model():
    base = EngineConfig(target="t", draft="d")
    with_dm = BenchRunner(base, {"w": ["p"]}, [ConfigSpec("draft_model", 2)], loader=lambda c: None)
    no_dm = BenchRunner(base, {"w": ["p"]}, [ConfigSpec("ngram", 2)], loader=lambda c: None)
    assert with_dm.time_draft and with_dm.blocks == 2
    assert not no_dm.time_draft and no_dm.blocks == 1


def test_a_load_spike_on_one_pair_does_not_move_the_round_median():
    spec = ConfigSpec("ngram", 2)
    records = []
    for prompt, spike in enumerate([1.0, 1.0, 20.0]):  # prompt 2's target run hit a load spike
        t = rec(TARGET_ONLY, spec.label, 0, wall=0.1 + 1.0 * spike)
        s = rec(spec.label, spec.label, 0, wall=0.1 + 0.5, drafts=5, k=2, accepted=5)
        t.prompt = s.prompt = prompt
        records += [t, s]
    (_, ng) = aggregate(records, [spec])
    assert ng.speedup.median == pytest.approx(2.0)


def test_report_renders_table_plot_and_svg(tmp_path):
    from rich.console import Console

    from specterm.bench.report import acceptance_table, results_table, speedup_plot, write_svg

    spec = ConfigSpec("draft_model", 4)
    records = [
        rec(TARGET_ONLY, DRAFT_AS_TARGET, 0, step=0.01),
        rec(DRAFT_AS_TARGET, DRAFT_AS_TARGET, 0, step=0.003),
        rec(TARGET_ONLY, spec.label, 0),
        rec(spec.label, spec.label, 0, wall=0.4, drafts=8, k=4, accepted=24),
    ]
    results = aggregate(records, [spec])
    console = Console(record=True, width=100, color_system=None)
    console.print(results_table(results), acceptance_table(results), speedup_plot(results))
    out = console.export_text()
    assert "draft_model k=4" in out and "target-only" in out and "D draft_model" in out and "theory" in out
    assert "[bold]" not in out
    svg = tmp_path / "p.svg"
    write_svg(str(svg), results, title="t [bold]x[/bold]")
    assert svg.read_text().startswith("<svg") and "draft_model" in svg.read_text()


def test_an_agent_turn_of_two_engine_requests_folds_into_one_record():
    from specterm.bench.runner import record_from_events

    def step(rid, i, n, wall):
        return SpecStep(request_id=rid, index=i, tokens=[Token(id=7, text="x", verdict="target")] * n, wall_s=wall)

    events = [
        RequestStarted(request_id="a", prompt_tokens=500),
        step("a", 0, 1, 0.5),
        step("a", 1, 3, 0.01),
        step("a", 2, 2, 0.01),
        RequestFinished(request_id="a", output_tokens=6, wall_s=0.6, ttft_s=0.5, cached_tokens=0),
        RequestStarted(request_id="b", prompt_tokens=540),
        step("b", 0, 1, 0.3),
        step("b", 1, 1, 0.02),
        RequestFinished(request_id="b", output_tokens=2, wall_s=0.4, ttft_s=0.3, cached_tokens=496),
    ]
    r = record_from_events(events, config="c", block="c", round=0, prompt=0, workload="agent")
    assert (r.tokens, r.steps, r.first_step_tokens, r.decode_tokens) == (8, 5, 2, 6)
    assert r.wall_s == pytest.approx(1.0) and r.ttft_s == 0.5
    assert r.decode_s == pytest.approx(1.0 - 0.8) and r.decode_step_s == [0.01, 0.01, 0.02]
    assert r.step_ttft_s == [0.5, 0.3] and r.step_cached == [(500, 0), (540, 496)]


def test_ttft_by_agent_step_is_the_median_per_step_index_and_steps_after_the_first_are_compared_to_it():
    from rich.console import Console

    from specterm.bench.report import ttft_steps_table
    from specterm.bench.results import ttft_by_step

    recs = [rec("draft_model k=4", "draft_model k=4", 0) for _ in range(3)]
    recs[0].step_ttft_s, recs[1].step_ttft_s, recs[2].step_ttft_s = [1.0, 0.2, 0.1], [3.0, 0.4], [2.0, None, 0.3]
    recs[0].step_cached = [(400, 0), (440, 400), (480, 432)]
    recs[1].step_cached = [(400, None), (440, None)]  # not reported: left out, not counted as misses
    assert ttft_by_step(recs) == [2.0, pytest.approx(0.3), pytest.approx(0.2)]
    res = aggregate(recs, [ConfigSpec("draft_model", 4)])[1]
    assert res.ttft_by_step == [2.0, pytest.approx(0.3), pytest.approx(0.2)]
    assert res.later_ttft_share == pytest.approx(0.125) and res.as_dict()["later_ttft_share"] == res.later_ttft_share
    assert res.later_cached_share == pytest.approx(832 / 920)
    console = Console(width=100, record=True)
    console.print(ttft_steps_table([res]))
    out = console.export_text()
    assert "step 3" in out and "2000" in out and "12%" in out and "90%" in out
    single = rec(TARGET_ONLY, TARGET_ONLY, 0)
    single.step_ttft_s = [0.5]
    assert ttft_steps_table(aggregate([single], [])) is None  # plain requests: no per-step table


@pytest.mark.parametrize("cold", [False, True])
def test_suffix_tree_is_reset_after_the_warmup_and_before_each_unit_only_when_asked(cold):
    log = []
    runner = BenchRunner(
        EngineConfig(target="t"),
        {"w": ["p1", "p2"]},
        [ConfigSpec("suffix", 4)],
        repeats=2,
        params=GenerationParams(max_tokens=3),
        loader=lambda c: FakeEngine(c, log),
        suffix_cold=cold,
    )
    runner.run()
    # the suffix engine's requests (logged by method) and its cache resets (logged with the method)
    suffix = [e[0] for e in log if "suffix" in (e[0], e[1]) and e[0] not in ("close", "reset")]
    # the warm-up teaches the tree nothing; then it keeps learning across units unless --suffix-cold
    assert suffix[:2] == ["suffix", "suffix-reset"]
    assert suffix[2:].count("suffix-reset") == (4 if cold else 0)
    assert suffix[2:].count("suffix") == 4


def test_speedup_by_turn_follows_the_order_the_engine_ran_the_units():
    from specterm.bench.results import speedup_by_turn

    records = []
    for rnd in range(2):
        for prompt, speed in enumerate((1.0, 2.0)):
            for config, wall in ((TARGET_ONLY, 1.0), ("suffix k=4", 1.0 / (speed + rnd))):
                r = rec(config, "suffix k=4", rnd, wall=wall + 0.1, ttft=0.1)
                r.prompt = prompt
                records.append(r)
    assert speedup_by_turn(records, "suffix k=4") == pytest.approx([1.0, 2.0, 2.0, 3.0])

    from rich.console import Console

    from specterm.bench.report import turns_table

    console = Console(width=120, record=True, color_system=None)
    console.print(turns_table(records, ["suffix k=4"], per_round=2))
    row = next(line for line in console.export_text().splitlines() if "suffix k=4" in line)
    assert [c.strip() for c in row.split("│")[2:5]] == ["1.00× · 1.00", "2.00× · 1.00", "2.50× · 1.00"]
