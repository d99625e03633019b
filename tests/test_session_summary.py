"""Known synthetic steps → known acceptance figures, through a real file and through the CLI."""

from __future__ import annotations

import gc
import json

import pytest
from pydantic_core import PydanticUndefined

from specterm.cli import main
from specterm.events import AgentStepStarted, RequestFinished, SpecStep, Token
from specterm.session import Recorder, read_session
from specterm.session.synthetic import synthetic_header
from specterm.stats import summarize


def _step(i: int, k: int, a: int, wall_s: float, rid: str = "r") -> SpecStep:
    """k drafts, the first a accepted: a accepted tokens then a correction (a < k) or a bonus (a = k);
    k = 0 gives one target token."""
    drafted = list(range(100, 100 + k))
    tokens = [Token(id=d, text=f"d{d}", verdict="accepted") for d in drafted[:a]]
    tokens.append(Token(id=1, text="t", verdict="target" if k == 0 else ("bonus" if a == k else "correction")))
    return SpecStep(
        t=0.01 * (i + 1),
        request_id=rid,
        index=i,
        drafted=drafted,
        accepted=a,
        tokens=tokens,
        rejected=drafted[a:],
        rejected_text=["x"] * (k - a),
        wall_s=wall_s,
    )


# (k, a): 4 drafted all kept; 4 drafted 1 kept; no draft; 2 drafted none kept.
STEPS = [_step(0, 4, 4, 0.010), _step(1, 4, 1, 0.020), _step(2, 0, 0, 0.030), _step(3, 2, 0, 0.040)]


@pytest.fixture(autouse=True)
def _unfreeze():
    yield
    gc.unfreeze()  # `replay` freezes the GC for its events (a CLI process-level choice); undo it here


@pytest.fixture
def session_file(tmp_path):
    path = tmp_path / "known.jsonl"
    with Recorder(path, synthetic_header()) as rec:
        rec.write(AgentStepStarted(t=0.0, request_id="r", step=0, kind="answer"))
        for step in STEPS:
            rec.write(step)
        rec.write(RequestFinished(t=0.05, request_id="r", finish_reason="stop", ttft_s=0.015, wall_s=0.1))
    return path


def test_known_steps_give_known_figures(session_file):
    s = summarize(read_session(session_file).events).session
    assert s.by_verdict == {"accepted": 5, "correction": 2, "bonus": 1, "target": 1}
    assert s.rejected == 3 + 2
    assert (s.steps, s.drafts, s.draft_tokens, s.accepted) == (4, 3, 10, 5)
    assert s.acceptance_rate == pytest.approx(5 / 10)
    assert s.mean_acceptance_length == pytest.approx(1 + 5 / 3)
    # position 1 accepted in 2 of 3 drafts (steps 0 and 1); positions 2-4 only in step 0.
    assert s.per_position == pytest.approx([2 / 3, 1 / 3, 1 / 3, 1 / 3])


def test_cli_summary_json_reports_the_same_figures(session_file, capsys):
    assert main(["replay", str(session_file), "--summary", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    s = out["session"]
    assert s["by_verdict"] == {"accepted": 5, "correction": 2, "bonus": 1, "target": 1}
    assert s["acceptance_rate"] == pytest.approx(0.5)
    assert s["mean_acceptance_length"] == pytest.approx(8 / 3)
    assert s["per_position"] == pytest.approx([2 / 3, 1 / 3, 1 / 3, 1 / 3])
    assert out["step_latency_s"]["mean"] == pytest.approx(0.025)
    assert out["step_latency_s"]["p50"] == pytest.approx(0.020)
    assert out["step_latency_s"]["max"] == pytest.approx(0.040)
    assert out["ttft_s"]["mean"] == pytest.approx(0.015)
    [req] = out["requests"]
    assert req["request_id"] == "r" and req["acceptance_rate"] == pytest.approx(0.5)
    assert req["ttft_s"] == pytest.approx(0.015) and req["finish_reason"] == "stop"
    assert out["format_version"] == 1 and out["warnings"] == []


def test_cli_summary_table_shows_the_figures(session_file, capsys):
    assert main(["replay", str(session_file), "--summary"]) == 0
    out = capsys.readouterr().out
    assert "50.0%" in out  # acceptance rate
    assert "2.67" in out  # mean acceptance length
    assert "1: 0.67  2: 0.33  3: 0.33  4: 0.33" in out
    assert "accepted 5" in out and "correction 2" in out and "bonus 1" in out and "target 1" in out
    assert "mean 25.0" in out and "p95 40.0" in out  # step latency, ms


def test_cli_summary_table_shows_grammar_drafting_from_the_stats(tmp_path, capsys, monkeypatch):
    """The grammar-drafting row's draft passes per token is ``SpecStats.draft_passes_per_token``."""
    # Steps 0 and 3 had two of their draft slots from the grammar (fewer draft-model passes).
    # The first token of step 0 was a grammar draft (new lists: model_copy shares STEPS' own).
    grammar_first = [STEPS[0].tokens[0].model_copy(update={"grammar": True}), *STEPS[0].tokens[1:]]
    steps = [
        STEPS[0].model_copy(update={"grammar_drafts": 2, "draft_passes": 2, "tokens": grammar_first}),
        STEPS[1].model_copy(update={"draft_passes": 4}),
        STEPS[2],
        STEPS[3].model_copy(update={"grammar_drafts": 2, "draft_passes": 0}),
    ]
    path = tmp_path / "grammar.jsonl"
    with Recorder(path, synthetic_header()) as rec:
        for step in steps:
            rec.write(step)
    stats = summarize(read_session(path).events).session
    assert (stats.draft_passes, stats.tokens, stats.grammar_accepted) == (6, 9, 1)
    monkeypatch.setenv("COLUMNS", "200")  # the row on one line
    assert main(["replay", str(path), "--summary"]) == 0
    out = capsys.readouterr().out
    assert (
        f"4 of 10 draft tokens from the grammar, 1 accepted; 6 draft passes ({stats.draft_passes_per_token:.2f} per token)"
        in out
    ), out
    assert "(0.67 per token)" in out


def test_the_fast_summary_structs_mirror_the_events():
    # fast_summary decodes spec steps into its own structs: they must stay field for field in step
    # with the events (a field added to SpecStep or Token must be added there too).
    import msgspec

    from specterm.session.fast_summary import _SpecStep, _Token

    for struct, model in ((_SpecStep, SpecStep), (_Token, Token)):
        ours = {
            f.name: (
                f.default_factory()
                if f.default_factory is not msgspec.NODEFAULT
                else None
                if f.default is msgspec.NODEFAULT
                else f.default
            )
            for f in msgspec.structs.fields(struct)
        }
        theirs = {
            name: f.get_default(call_default_factory=True) for name, f in model.model_fields.items() if name != "type"
        }
        theirs = {k: (None if v is PydanticUndefined else v) for k, v in theirs.items()}
        assert ours == theirs, struct.__name__
        types = {f.name: f.type for f in msgspec.structs.fields(struct)}
        types = {k: (list[Token] if v == list[_Token] else v) for k, v in types.items()}
        assert types == {name: f.annotation for name, f in model.model_fields.items() if name != "type"}


def test_fast_summary_equals_reading_and_summarising(session_file):
    from specterm.session.fast_summary import summarize_file

    data, summary = summarize_file(session_file)
    whole = read_session(session_file)
    assert summary.as_dict() == summarize(whole.events).as_dict()
    assert data.warnings == whole.warnings and data.events == []


def test_fast_summary_counts_a_step_msgspec_refuses_but_pydantic_accepts(tmp_path):
    # "index": 1.0 is an int to pydantic's JSON mode, not to msgspec: the line takes the slow path
    # and must still be counted exactly once.
    from specterm.session.fast_summary import summarize_file

    path = tmp_path / "lax.jsonl"
    lines = [synthetic_header().model_dump_json()] + [s.model_dump_json() for s in STEPS]
    lines[2] = lines[2].replace('"index":1', '"index":1.0')
    assert '"index":1.0' in lines[2]
    path.write_text("\n".join(lines) + "\n")
    data, summary = summarize_file(path)
    assert summary.as_dict() == summarize(read_session(path).events).as_dict()
    assert summary.session.steps == len(STEPS)


def test_served_tokens_per_s_spans_first_step_start_to_last_step_end():
    """A server's output rate: every request's tokens together ÷ the time from the first step's start
    (its ``t`` less its wall time) to the last step's end, idle time between requests included."""
    two = [
        _step(0, 4, 4, 0.5, rid="a").model_copy(update={"t": 10.5}),  # began at 10.0: 5 tokens
        _step(0, 0, 0, 0.5, rid="b").model_copy(update={"t": 10.5}),  # the same batch: 1 token
        _step(1, 2, 1, 0.5, rid="a").model_copy(update={"t": 14.0}),  # after 3 s idle: 2 tokens
    ]
    summary = summarize([])
    assert summary.served_tokens_per_s() is None  # no step yet: no rate, not 0
    for step in two:
        summary.add(step)
    assert summary.session.tokens == 8 and summary.served_s == pytest.approx(4.0)
    assert summary.served_tokens_per_s() == pytest.approx(8 / 4.0)


def test_a_fleets_replicas_each_get_their_own_figures_by_the_same_definitions():
    """Requests labelled with the replica that ran them (``attach`` of several servers): each replica's
    summary holds exactly its requests' steps, the replicas add up to the session, and a replica's
    own hello (``ReplicaSeen``) is kept for its k and weight bytes. An unlabelled session has none."""
    from specterm.events import ReplicaSeen, RequestStarted

    events = [
        ReplicaSeen(replica="a·0", addr="ipc:///a.sock", speculation={"method": "ngram", "num_speculative_tokens": 4}),
        ReplicaSeen(replica="b·1", addr="ipc:///b-dp1.sock", dp_index=1),
        RequestStarted(request_id="x", replica="a·0"),
        RequestStarted(request_id="y", replica="b·1"),
        _step(0, 4, 4, 0.01, rid="x"),
        _step(0, 0, 0, 0.01, rid="y"),
        _step(1, 4, 1, 0.01, rid="x"),
        RequestFinished(request_id="x", wall_s=0.5, finish_reason="length"),
    ]
    summary = summarize(events)
    a, b = summary.replicas["a·0"], summary.replicas["b·1"]
    assert summary.replica_of == {"x": "a·0", "y": "b·1"}
    assert (a.session.tokens, b.session.tokens) == (
        7,
        1,
    ) and a.session.tokens + b.session.tokens == summary.session.tokens
    assert (a.session.accepted, a.session.draft_tokens) == (5, 8) and b.session.draft_tokens == 0
    assert set(a.requests) == {"x"} and a.requests["x"].finish_reason == "length" and set(b.requests) == {"y"}
    assert not a.replicas and not b.replicas  # a replica's summary routes nothing further
    assert summary.replica_seen["b·1"].dp_index == 1
    assert summarize(STEPS).replicas == {}
