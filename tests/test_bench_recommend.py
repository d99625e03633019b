"""``bench --recommend``: the choice over measured results, the config file it writes (comments kept,
read back by the config layers), and what the dashboard shows next to the live speed-up."""

from __future__ import annotations

import pytest

from specterm.bench import recommend
from specterm.bench.results import ConfigResult, Spread
from specterm.config import resolve_engine_config
from specterm.engine.base import EngineConfig
from specterm.errors import ConfigError

BASE = EngineConfig(target="/m/target", draft="/m/draft")


def result(method, k, speedup, rate=None):
    return ConfigResult(
        label="target-only" if method is None else f"{method} k={k}",
        method=method,
        k=k,
        requests=3,
        output_tokens=90,
        tokens_per_s=Spread.of([rate] if rate else []),
        wall_s=None,
        ttft_s=None,
        step_s=None,
        steps_per_token=None,
        speedup=Spread.of([speedup]) if speedup else None,
    )


@pytest.fixture()
def config_file(tmp_path, monkeypatch):
    path = tmp_path / "specterm" / "config.toml"
    monkeypatch.setenv("SPECTERM_CONFIG", str(path))
    return path


def test_the_fastest_over_all_workloads_wins_by_geometric_mean():
    per = {
        "agent": [
            result(None, 0, 1.0, 100.0),
            result("draft_model", 2, 1.9),
            result("draft_model", 4, 2.6),
            result("ngram", 4, 1.2),
        ],
        "prose": [
            result(None, 0, 1.0, 25.0),
            result("draft_model", 2, 1.3),
            result("draft_model", 4, 0.8),
            result("ngram", 4, None),
        ],
    }  # ngram had no decode time on prose: not comparable
    rec = recommend.choose(per, BASE)
    assert (rec.method, rec.k, rec.label) == ("draft_model", 2, "draft_model k=2")
    assert rec.speedup == pytest.approx((1.9 * 1.3) ** 0.5, abs=1e-3)
    assert rec.candidates == {
        "draft_model k=2": pytest.approx(1.572, abs=1e-3),
        "draft_model k=4": pytest.approx(1.442, abs=1e-3),
    }
    assert rec.target_only_tok_s == pytest.approx(50.0) and rec.workloads == ["agent", "prose"]
    assert rec.draft == "/m/draft"


def test_nothing_beats_target_only_means_no_speculation():
    rec = recommend.choose(
        {"toolcalls": [result(None, 0, 1.0, 5.0), result("draft_model", 4, 0.64), result("ngram", 4, 0.97)]}, BASE
    )
    assert (rec.method, rec.k, rec.speedup, rec.label) == ("none", 0, 1.0, "no speculation")


def test_written_to_the_config_file_keeping_the_users_comments_and_read_back_by_the_config_layers(config_file):
    config_file.parent.mkdir(parents=True)
    config_file.write_text(
        '# my settings\n[engine]\ndtype = "bfloat16"  # fast enough\nmethod = "ngram"\n\n[other]\nkeep = 1\n'
    )
    rec = recommend.choose({"agent": [result(None, 0, 1.0, 80.0), result("draft_model", 6, 2.1)]}, BASE)
    recommend.write(config_file, rec)
    text = config_file.read_text()
    assert "# my settings" in text and "# fast enough" in text and "keep = 1" in text
    cfg = resolve_engine_config({})
    assert (cfg.target, cfg.draft, cfg.method, cfg.num_speculative_tokens, cfg.dtype) == (
        "/m/target",
        "/m/draft",
        "draft_model",
        6,
        "bfloat16",
    )
    assert recommend.read(config_file) == rec and recommend.for_engine(cfg) == rec
    assert recommend.for_engine(cfg.model_copy(update={"num_speculative_tokens": 4})) is None  # not what was measured
    # "none" is target-only when read back (TOML has no null)
    recommend.write(
        config_file, recommend.choose({"agent": [result(None, 0, 1.0, 80.0), result("draft_model", 6, 0.9)]}, BASE)
    )
    cfg = resolve_engine_config({})
    assert cfg.method is None and recommend.for_engine(cfg).label == "no speculation"


def test_a_config_file_that_is_not_toml_is_one_line_and_left_as_it_was(config_file):
    config_file.parent.mkdir(parents=True)
    config_file.write_text("[engine\ntarget = 1\n")
    rec = recommend.choose({"agent": [result(None, 0, 1.0, 80.0), result("draft_model", 4, 2.0)]}, BASE)
    with pytest.raises(ConfigError) as err:
        recommend.write(config_file, rec)
    assert str(err.value).startswith(f"cannot update config file {config_file}") and "\n" not in str(err.value)
    assert config_file.read_text() == "[engine\ntarget = 1\n"
    assert recommend.read(config_file) is None  # and chat still starts: no recommendation, no error


def test_the_dashboard_puts_the_live_decode_speedup_next_to_the_benched_one():
    from specterm.events import RequestFinished, SessionStarted, SpecStep, Token
    from specterm.ui.state import ViewState
    from specterm.ui.widgets.acceptance_panel import AcceptancePanel

    rec = recommend.choose({"agent": [result(None, 0, 1.0, 40.0), result("draft_model", 4, 1.9)]}, BASE)
    state = ViewState()
    panel = AcceptancePanel(state)
    state.add(SessionStarted(config={"recommendation": rec.model_dump()}))
    assert panel.speedup_line() == "– live · 1.90× bench"
    tok = Token(id=1, text="x", verdict="accepted")
    state.add(SpecStep(request_id="r", index=0, tokens=[tok] * 2, wall_s=0.5))  # prefill: not decoding
    state.add(SpecStep(request_id="r", index=1, tokens=[tok] * 4, wall_s=0.05))
    state.add(SpecStep(request_id="r", index=2, tokens=[tok] * 4, wall_s=0.05))
    state.add(RequestFinished(request_id="r", output_tokens=10, ttft_s=0.5, wall_s=0.6))
    assert state.summary.decode_tokens_per_s() == pytest.approx(80.0)  # 8 decode tokens in 0.1 s
    assert panel.speedup_line() == "2.00× live · 1.90× bench"
    assert panel.speedup_line(compact=True) == "2.00×·bench 1.90×"
    assert AcceptancePanel(ViewState()).speedup_line() == ""  # no recommendation: nothing shown
