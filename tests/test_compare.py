"""`specterm compare`: two configurations on one request. The real engine with the tiny pair
(greedy outputs identical on both sides, figures per side, one session file that replays as a
compare), the refusal of two tokenizers before anything loads, and the tally on recorded events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specterm.bench.compare import order, parse_side
from specterm.bench.compare_tally import CompareTally, is_compare
from specterm.cli import main
from specterm.events import SpecStep, UserMessage, parse_event
from specterm.session.reader import read_session

SAMPLE = Path(__file__).resolve().parent.parent / "sample_sessions" / "compare_agent.jsonl"


def test_side_specs_and_order():
    assert parse_side("method=ngram,k=6", "--a") == {"method": "ngram", "num_speculative_tokens": 6}
    assert parse_side("method=none", "--b") == {"method": None}
    assert order(3) == ["a", "b", "b", "a", "a", "b"]


@pytest.mark.parametrize(
    "spec, needle", [("k=four", "k must be an integer"), ("speed=3", "unknown key"), ("method", "key=value")]
)
def test_bad_side_spec_is_one_line(capsys, spec, needle):
    rc = main(["compare", "hi", "--a", spec, "--b", "method=none", "--no-record"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and err[0].startswith("specterm: error: bad --a") and needle in err[0]


def test_lane_is_left_out_of_ordinary_events():
    plain = UserMessage(request_id="r", text="x")
    assert "lane" not in plain.model_dump_json()
    tagged = plain.model_copy(update={"lane": "b"})
    assert parse_event(tagged.model_dump_json()).lane == "b"


def test_recorded_compare_session_tally():
    """The shipped sample: both sides' greedy outputs agree, each side has its own figures, and a
    changed token on one side is reported as a mismatch (the loud path)."""
    data = read_session(SAMPLE)
    assert is_compare(data.header)
    tally = CompareTally(data.header).add_all(data.events)
    assert tally.rounds_done >= 1 and tally.mismatch is None
    a, b = tally.sides["a"], tally.sides["b"]
    assert a.summary.session.tokens == b.summary.session.tokens > 0
    assert a.summary.session.draft_tokens > 0
    assert "wins" in tally.verdict() or "tie" in tally.verdict()
    # Flip one emitted token of side B's first run.
    events = list(data.events)
    i = next(i for i, e in enumerate(events) if isinstance(e, SpecStep) and e.lane == "b" and e.tokens)
    step = events[i]
    bad = step.tokens[0].model_copy(update={"id": step.tokens[0].id + 1})
    events[i] = step.model_copy(update={"tokens": [bad, *step.tokens[1:]]})
    mismatch = CompareTally(data.header).add_all(events).mismatch
    assert mismatch is not None and mismatch.round == 0
    assert "GREEDY OUTPUTS DIFFER" in mismatch.message(tally.labels)


def test_a_side_still_streaming_is_not_a_mismatch():
    """Mid-run (replay or live), side B's first answer is shorter than A's only because it has not
    finished: no mismatch may be reported until a later run starts or the session ends."""
    events = list(read_session(SAMPLE).events)
    i = next(i for i, e in enumerate(events) if isinstance(e, SpecStep) and e.lane == "b" and e.tokens)
    partial = CompareTally(read_session(SAMPLE).header).add_all(events[: i + 1])
    assert partial.rounds_done == 0 and partial.mismatch is None
    assert len(partial.sides["a"].runs[0].token_ids) > len(partial.sides["b"].runs[0].token_ids)
    partial.close()  # the run returned: now the short side is compared, and differs
    assert partial.rounds_done == 1 and partial.mismatch is not None


def test_replay_headless_of_a_mismatched_session_fails_loudly(tmp_path, capsys):
    lines = SAMPLE.read_text().splitlines()
    for n, line in enumerate(lines):
        event = json.loads(line)
        if event.get("type") == "spec_step" and event.get("lane") == "a" and event["tokens"]:
            event["tokens"][0]["id"] += 1
            lines[n] = json.dumps(event)
            break
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    rc = main(["replay", "--headless", str(bad)])
    captured = capsys.readouterr()
    assert rc == 1 and "GREEDY OUTPUTS DIFFER" in captured.err


@pytest.mark.engine  # builds a tokenizer with the engine extra's transformers
def test_two_tokenizers_are_refused_before_loading(capsys, tmp_path, tiny_pair, retokenized):
    target, draft = tiny_pair
    other = retokenized(target, "other-target")
    record = tmp_path / "s.jsonl"
    rc = main(
        [
            "compare",
            "hi",
            "--raw",
            "--target",
            target,
            "--draft",
            draft,
            "--a",
            f"target={other}",
            "--b",
            "method=none",
            "--headless",
            "--record",
            str(record),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and err[0].startswith("specterm: error: ")
    assert "two sides use different tokenizers" in err[0]
    assert not record.exists()  # refused before anything was loaded or recorded


@pytest.mark.engine
def test_compare_real_engine_greedy_identical_and_replayable(capsys, tmp_path, tiny_pair):
    target, draft = tiny_pair
    record = tmp_path / "cmp.jsonl"
    rc = main(
        [
            "compare",
            "The customer alice placed",
            "--raw",
            "--target",
            target,
            "--draft",
            draft,
            "--a",
            "method=draft_model,k=4",
            "--b",
            "method=none",
            "--max-tokens",
            "16",
            "--json",
            "--record",
            str(record),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    figures = json.loads(out)
    assert figures["greedy_identical"] is True and figures["mismatch"] is None
    a, b = figures["sides"]["a"], figures["sides"]["b"]
    assert a["label"] == "draft_model k=4" and b["label"] == "target-only"
    assert a["tokens"] == b["tokens"] == 16
    assert a["draft_tokens"] > 0 and a["acceptance_rate"] is not None and a["median_step_s"] > 0
    assert b["draft_tokens"] == 0 and b["by_verdict"]["target"] == 16
    # One session file: both lanes, same token ids, and it replays as a compare.
    data = read_session(record)
    assert is_compare(data.header)
    ids = {
        lane: [t.id for e in data.events if isinstance(e, SpecStep) and e.lane == lane for t in e.tokens]
        for lane in ("a", "b")
    }
    assert ids["a"] == ids["b"] and len(ids["a"]) == 16
    assert {e.lane for e in data.events if e.type != "session_ended"} == {"a", "b"}
    # Both engines alive in one process: side A's verdicts still reconcile with its own vLLM counters.
    counters = [e for e in data.events if e.type == "engine_counters"]
    assert [e.lane for e in counters] == ["a"] and all(e.matched for e in counters)
    rc = main(["replay", "--headless", str(record)])
    replayed = capsys.readouterr().out
    assert rc == 0 and "── A: draft_model k=4" in replayed and "── B: target-only" in replayed


def test_replay_summary_of_a_compare_session_is_per_side(capsys):
    rc = main(["replay", "--summary", "--json", str(SAMPLE)])
    figures = json.loads(capsys.readouterr().out)
    assert rc == 0 and set(figures["sides"]) == {"a", "b"} and figures["greedy_identical"] is True
