"""Bench's side of grammar drafting: the ``draft_model+grammar`` configuration, the constrained
workloads, the recommendation it writes, and the draft-pass figures (no engine)."""

from __future__ import annotations

import json

import pytest

from specterm.bench import recommend
from specterm.bench.results import ConfigResult, Spread
from specterm.bench.runner import ConfigSpec, engine_config, plan
from specterm.engine.base import EngineConfig
from specterm.events import SpecStep, Token
from specterm.stats import SpecStats

BASE = EngineConfig(target="/m/target", draft="/m/draft")


def test_draft_model_plus_grammar_is_draft_model_with_grammar_drafting_and_plain_stays_plain():
    specs = plan(["draft_model", "draft_model+grammar", "ngram"], [4])
    assert [s.label for s in specs] == ["draft_model k=4", "draft_model+grammar k=4", "ngram k=4"]
    plain, grammar, ngram = (engine_config(BASE, s) for s in specs)
    assert (plain.method, plain.grammar_drafting, plain.drafts_with_grammar) == ("draft_model", False, False)
    assert (grammar.method, grammar.drafts_with_grammar) == ("draft_model", True)
    assert not ngram.drafts_with_grammar
    # --grammar-drafting given: plain draft_model drafts with the grammar too (one configuration)
    assert [s.label for s in plan(["draft_model", "draft_model+grammar"], [4], grammar=True)] == [
        "draft_model+grammar k=4"
    ]
    assert not engine_config(BASE, ConfigSpec(None)).drafts_with_grammar


def test_constrained_workloads_carry_their_senders_schema():
    from specterm.agent import load_agent
    from specterm.agent.prompt import call_schema
    from specterm.bench.workloads import EXTRACT_SCHEMA, chat_requests, output_schema
    from specterm.engine.schema import check_json_schema

    assert output_schema("toolcalls") == call_schema(load_agent("sql_analyst"), key="tool")
    assert output_schema("extract") is EXTRACT_SCHEMA
    assert output_schema("prose") is None and output_schema("extract", raw=True) is None
    check_json_schema(EXTRACT_SCHEMA)
    assert len(chat_requests("extract")) == 6


def _result(label, method, k, speedup, grammar=False, rate=None):
    return ConfigResult(
        label=label,
        method=method,
        k=k,
        requests=3,
        output_tokens=90,
        tokens_per_s=Spread.of([rate] if rate else []),
        wall_s=None,
        ttft_s=None,
        step_s=None,
        steps_per_token=None,
        speedup=Spread.of([speedup]),
        grammar=grammar,
    )


def test_the_recommendation_writes_grammar_drafting_only_when_it_was_compared(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    monkeypatch.setenv("SPECTERM_CONFIG", str(path))
    target = _result("target-only", None, 0, 1.0, rate=10.0)
    won = recommend.choose(
        {
            "toolcalls": [
                target,
                _result("draft_model k=4", "draft_model", 4, 1.3),
                _result("draft_model+grammar k=4", "draft_model", 4, 1.9, True),
            ]
        },
        BASE,
    )
    assert (won.method, won.grammar_drafting, won.label) == ("draft_model", True, "draft_model+grammar k=4")
    assert won.matches(BASE) and not won.matches(BASE.model_copy(update={"grammar_drafting": False}))
    recommend.write(path, won)
    assert "grammar_drafting = true" in path.read_text()
    lost = recommend.choose(
        {
            "toolcalls": [
                target,
                _result("draft_model k=4", "draft_model", 4, 1.9),
                _result("draft_model+grammar k=4", "draft_model", 4, 1.3, True),
            ]
        },
        BASE,
    )
    assert (lost.label, lost.grammar_drafting) == ("draft_model k=4", False)
    alone = recommend.choose({"toolcalls": [target, _result("draft_model k=4", "draft_model", 4, 1.9)]}, BASE)
    assert alone.grammar_drafting is None  # plain alone says nothing about grammar drafting
    assert recommend.Recommendation.model_validate(json.loads(won.model_dump_json())) == won


def _step(drafted, accepted, passes=None, grammar_drafts=0, dropped=0):
    tokens = [Token(id=i, text="x", verdict="accepted", grammar=i < grammar_drafts) for i in range(accepted)]
    tokens.append(Token(id=99, text="y", verdict="correction"))
    return SpecStep(
        request_id="r",
        index=0,
        drafted=list(range(drafted)),
        accepted=accepted,
        tokens=tokens,
        rejected=list(range(drafted))[accepted:],
        draft_passes=passes,
        grammar_drafts=grammar_drafts,
        dropped_drafts=dropped,
    )


def test_draft_passes_are_counted_as_run_and_estimated_only_for_old_sessions():
    stats = SpecStats()
    stats.add_step(_step(4, 2, passes=2, grammar_drafts=2))
    stats.add_step(_step(0, 0, passes=4, dropped=4))  # every draft dropped: the passes still ran
    assert (stats.draft_passes, stats.grammar_drafts, stats.grammar_accepted, stats.dropped_drafts) == (6, 2, 2, 4)
    assert stats.draft_passes_per_token == pytest.approx(6 / 4)
    old = SpecStats()
    old.add_step(_step(4, 2))  # recorded before passes were: one per draft slot
    assert old.draft_passes == 4
    merged = SpecStats()
    merged.merge(stats)
    assert merged.as_dict() == stats.as_dict()
    # the new fields stay out of a recording when unset (older readers, smaller files)
    assert "grammar" not in _step(4, 2).tokens[0].model_dump_json()
    assert "draft_passes" not in _step(4, 2).model_dump_json()


@pytest.mark.parametrize("width", [24, 60])
def test_the_acceptance_panel_shows_draft_passes_once_the_grammar_drafted(width):
    from rich.style import Style

    from specterm.ui.state import ViewState
    from specterm.ui.widgets.acceptance_panel import AcceptancePanel

    state = ViewState()
    panel = AcceptancePanel(state)
    from specterm.ui.widgets.styles import TEXT_CLASSES, TOKEN_CLASSES

    styles = {name: Style() for name in (*TOKEN_CLASSES, *TEXT_CLASSES)}  # every name style_map gives
    state.add(_step(4, 2, passes=4))
    assert "pass" not in panel.body(styles, width).plain  # plain drafting: nothing new
    state.add(_step(4, 3, passes=1, grammar_drafts=3))
    text = panel.body(styles, width).plain
    assert "pass" in text and "0.62" in text  # 5 passes over 8 tokens in the session
