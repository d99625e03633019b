"""Verdict assignment and reconciliation logic (no engine needed: plain records and counters)."""

from types import SimpleNamespace

from specterm.engine.verdicts import StepRecord, assign_verdicts, reconcile, spec_counters
from specterm.events import SpecStep, Token
from specterm.stats import SpecStats


def rec(drafted, sampled, invalid=0):
    return StepRecord("r", tuple(drafted), tuple(sampled), invalid)


def test_no_draft_means_target():
    assert assign_verdicts([5], None) == (["target"], 0, 0)
    assert assign_verdicts([5], rec([], [5])) == (["target"], 0, 0)


def test_partial_acceptance_ends_in_correction():
    verdicts, a, k = assign_verdicts([1, 2, 9], rec([1, 2, 3, 4], [1, 2, 9]))
    assert (verdicts, a, k) == (["accepted", "accepted", "correction"], 2, 4)


def test_full_acceptance_ends_in_bonus():
    verdicts, a, _ = assign_verdicts([1, 2, 3, 7], rec([1, 2, 3], [1, 2, 3, 7]))
    assert verdicts == ["accepted"] * 3 + ["bonus"] and a == 3


def test_truncated_last_step_keeps_vllm_accepted_count():
    # max_tokens cut the step after 2 of 4 sampled tokens: vLLM still counts 3 accepted.
    verdicts, a, _ = assign_verdicts([1, 2], rec([1, 2, 3], [1, 2, 3, 7]))
    assert verdicts == ["accepted", "accepted"] and a == 3


def test_grammar_invalidated_slots_make_the_last_token_a_correction():
    # 2 real drafts + 2 slots the grammar refused: all real drafts kept, yet a < k.
    verdicts, a, k = assign_verdicts([1, 2, 8], rec([1, 2], [1, 2, 8], invalid=2))
    assert verdicts == ["accepted", "accepted", "correction"] and (a, k) == (2, 4)


def _step(drafted, accepted, n_tokens):
    toks = [Token(id=i, text="x", verdict="accepted") for i in range(n_tokens)]
    return SpecStep(
        request_id="r", index=0, drafted=drafted, accepted=accepted, tokens=toks, rejected=drafted[accepted:]
    )


def test_stats_follow_vllm_definitions():
    stats = SpecStats()
    stats.add_step(_step([1, 2, 3, 4], 2, 3))
    stats.add_step(_step([1, 2, 3, 4], 4, 5))
    stats.add_step(_step([], 0, 1))
    assert stats.drafts == 2 and stats.draft_tokens == 8 and stats.accepted == 6
    assert stats.acceptance_rate == 6 / 8
    assert stats.mean_acceptance_length == 1 + 6 / 2
    assert stats.per_position == [1.0, 1.0, 0.5, 0.5]
    assert stats.rejected == 2


def _metrics(drafts, tokens, accepted, per_pos):
    m = SimpleNamespace
    return [
        m(name="vllm:spec_decode_num_drafts", value=drafts),
        m(name="vllm:spec_decode_num_draft_tokens", value=tokens),
        m(name="vllm:spec_decode_num_accepted_tokens", value=accepted),
        m(name="vllm:spec_decode_num_accepted_tokens_per_pos", values=per_pos),
        m(name="vllm:unrelated", value=99),
    ]


def test_reconcile_matches_and_detects_disagreement():
    stats = SpecStats()
    stats.add_step(_step([1, 2, 3, 4], 2, 3))
    per_step = [(4, 2)]
    before = spec_counters(_metrics(10, 40, 20, [8, 6, 4, 2]))
    detailed = SimpleNamespace(per_step_drafted=[4], per_step_accepted=[2])
    after = spec_counters(_metrics(11, 44, 22, [9, 7, 4, 2]))
    _, theirs, problems = reconcile(stats, per_step, before, after, detailed)
    assert problems == [] and theirs["accepted"] == 2

    wrong = spec_counters(_metrics(11, 44, 23, [9, 7, 5, 2]))
    _, _, problems = reconcile(stats, per_step, before, wrong, detailed)
    assert any(p.startswith("accepted:") for p in problems)
    assert any(p.startswith("accepted_per_pos") for p in problems)

    _, _, problems = reconcile(
        stats, per_step, before, after, SimpleNamespace(per_step_drafted=[4], per_step_accepted=[3])
    )
    assert any("per-step" in p for p in problems)


def test_reconcile_adds_back_vllms_draftless_padding():
    # vLLM padded a one-token prefill to 1 + 4 rows of -1 and counted them as 4 drafted, 0 accepted.
    stats = SpecStats()
    stats.add_step(_step([], 0, 1))  # what happened: no drafts, one target token
    stats.add_step(_step([1, 2, 3, 4], 4, 5))
    per_step = [(4, 0), (4, 4)]
    before = spec_counters(_metrics(0, 0, 0, [0, 0, 0, 0]))
    after = spec_counters(_metrics(2, 8, 4, [1, 1, 1, 1]))
    detailed = SimpleNamespace(per_step_drafted=[4, 4], per_step_accepted=[0, 4])
    ours, _, problems = reconcile(stats, per_step, before, after, detailed, (1, 4))
    assert problems == [] and ours["drafts"] == 1 and ours["vllm_padding"] == {"steps": 1, "slots": 4}
    _, _, problems = reconcile(stats, per_step, before, after, detailed)  # without it: a mismatch
    assert any(p.startswith("drafts:") for p in problems)


def test_padding_slots_are_not_drafts():
    record = StepRecord("r", (), (7,), 0, padding=4)
    assert assign_verdicts([7], record) == (["target"], 0, 0) and record.accepted == 0
