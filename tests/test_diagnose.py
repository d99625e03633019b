"""The detectors (``specterm.diagnose``) on real recorded events: each fires on a fault spliced from
real steps of the shipped sample sessions, and stays quiet on the sessions as recorded.

Faults are made the way they happen: a mismatched draft is the prose session's low-acceptance steps
after the tool-call session's high-acceptance ones; a loop is one real step's tokens repeated; a
latency spike is one real step's time scaled; a mismatch is a real ``EngineCounters`` that did not
match."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specterm.cli import main
from specterm.config import load_thresholds
from specterm.diagnose import Diagnoser, Thresholds, diagnosing
from specterm.errors import ConfigError
from specterm.events import (
    EngineCounters,
    Finding,
    RequestFinished,
    RequestStarted,
    SpecStep,
    UserMessage,
    dump_event,
)
from specterm.session import read_session
from specterm.session.fast_summary import summarize_file

SAMPLES = Path(__file__).resolve().parent.parent / "sample_sessions"
SAMPLE_FILES = sorted(SAMPLES.glob("*.jsonl"))


def _steps(name: str, drafted_only: bool = True) -> list[SpecStep]:
    events = read_session(SAMPLES / f"{name}.jsonl").events
    return [e for e in events if isinstance(e, SpecStep) and (e.drafted or not drafted_only) and e.index]


HIGH = _steps("toolcall_high_acceptance")  # ≈ 80 % acceptance, schema-constrained
LOW = _steps("prose_low_acceptance")  # ≈ 26 %, n-gram on prose (5 drafting steps)
PROSE = _steps("prose_low_acceptance", drafted_only=False)  # every decode step, most without drafts


def _request(rid: str, steps: list[SpecStep], *, json_schema: bool = True, finish: str = "stop", asked: str = ""):
    """One request made of ``steps`` (real ones, renumbered): its start, steps and finish."""
    out: list = [UserMessage(request_id=rid, text=asked)] if asked else []
    out.append(RequestStarted(request_id=rid, params={"json_schema": json_schema}))
    out += [s.model_copy(update={"request_id": rid, "index": i + 1}) for i, s in enumerate(steps)]
    out.append(RequestFinished(request_id=rid, finish_reason=finish, output_tokens=sum(len(s.tokens) for s in steps)))
    return out


def _findings(events, thresholds: Thresholds | None = None) -> list[Finding]:
    diagnoser, found = Diagnoser(thresholds), []
    sink = diagnosing(lambda e: found.append(e) if isinstance(e, Finding) else None, diagnoser)
    for event in events:
        sink(event)
    return found


def _kinds(findings: list[Finding]) -> list[str]:
    return [f.kind for f in findings]


# -- false positives on every shipped sample session (the figure docs/diagnose.md reports) -------------


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_no_finding_on_any_sample_session(path):
    assert _findings(read_session(path).events) == []
    _, summary = summarize_file(path)  # replay --summary's path: the same detectors on slim structs
    assert summary.findings == []


# -- acceptance collapse --------------------------------------------------------------------------------


def test_collapse_fires_once_when_the_draft_stops_fitting():
    healthy = (HIGH * 40)[:400]
    events = _request("r", healthy + LOW * 20, json_schema=False)
    found = _findings(events)
    assert _kinds(found) == ["collapse"]
    assert found[0].evidence["window_rate"] < 0.5 * found[0].evidence["baseline_rate"]


def test_no_collapse_while_acceptance_holds():
    assert _findings(_request("r", (HIGH * 60)[:800])) == []


# -- outlier request ------------------------------------------------------------------------------------


def test_outlier_request_names_what_it_was_asked():
    events = []
    for n in range(6):
        events += _request(f"q{n}", HIGH, asked="How many orders above 100?")
    events += _request("odd", LOW, asked="Runbook: if the search queue backs up,")
    found = _findings(events)
    assert _kinds(found) == ["outlier"]
    assert found[0].request_id == "odd" and "Runbook" in found[0].message


def test_no_outlier_among_peers_alike_or_of_another_kind():
    events = []
    for n in range(6):
        events += _request(f"q{n}", HIGH)
    events += _request("prose", LOW, json_schema=False)  # free text is not compared with tool calls
    events += _request("q6", HIGH)
    assert _findings(events) == []


# -- degenerate loop ------------------------------------------------------------------------------------


def _looping(finish: str) -> list:
    step = next(s for s in HIGH if len(s.tokens) >= 3)
    return _request("loop", HIGH[:3] + [step] * 15, finish=finish)


def test_loop_reported_when_the_length_limit_cuts_it():
    found = _findings(_looping("length"))
    assert _kinds(found) == ["loop"]
    assert found[0].evidence["tokens"] >= Thresholds().loop_tokens


def test_no_loop_when_the_request_stopped_by_itself():
    assert _findings(_looping("stop")) == []


# -- reconciliation mismatch ------------------------------------------------------------------------------


def test_mismatch_is_a_red_finding():
    events = read_session(SAMPLES / "toolcall_high_acceptance.jsonl").events
    forced = [
        e.model_copy(update={"matched": False, "detail": "accepted 40 ours vs 41 vllm"})
        if isinstance(e, EngineCounters)
        else e
        for e in events
    ]
    found = _findings(forced)
    assert _kinds(found) == ["mismatch"] and found[0].severity == "error"


# -- grammar-invalid drafts, draft passes ------------------------------------------------------------------


def test_invalid_drafts_fire_once_per_episode():
    spoiled = [s.model_copy(update={"invalid_drafts": 3}) for s in HIGH * 8]
    assert _kinds(_findings(_request("r", spoiled))) == ["invalid_drafts"]


def test_draft_passes_rising_while_acceptance_holds():
    base = [s.model_copy(update={"draft_passes": 1}) for s in (HIGH * 40)[:400]]
    more = [s.model_copy(update={"draft_passes": 4}) for s in HIGH * 8]
    assert _kinds(_findings(_request("r", base + more))) == ["draft_passes"]
    assert _findings(_request("r", base + base[:100])) == []


# -- step latency spike ------------------------------------------------------------------------------------


def test_latency_spike_once_per_run_of_slow_steps():
    steps = PROSE
    median = sorted(s.wall_s for s in steps)[len(steps) // 2]
    slow = [s.model_copy(update={"wall_s": max(s.wall_s * 50, median * 50, 0.2)}) for s in steps[60:62]]
    found = _findings(_request("r", steps[:60] + slow + steps[62:], json_schema=False))
    assert _kinds(found) == ["latency_spike"]
    assert _findings(_request("r", steps, json_schema=False)) == []


def test_a_slow_engine_step_that_prefills_a_new_request_is_not_a_spike():
    """A burst of arrivals: the engine step that prefills a new request is slow for the requests
    already decoding in it, whose steps the stream gives first, all with that step's wall time. Not
    a spike when the new request's first step follows in the same engine step; a spike without it."""
    steps = PROSE
    median = sorted(s.wall_s for s in steps)[len(steps) // 2]
    slow = max(median * 50, 0.8)
    burst = steps[60].model_copy(update={"wall_s": slow})
    arrival = steps[0].model_copy(update={"request_id": "new", "index": 0, "wall_s": slow})
    after = _request("r", steps[:60] + [burst] + steps[61:80], json_schema=False)
    at = next(i for i, e in enumerate(after) if getattr(e, "wall_s", None) == slow) + 1
    with_prefill = [*after[:at], RequestStarted(request_id="new"), arrival, *after[at:]]
    assert _findings(with_prefill) == []
    # another request decoding in that engine step, given after the prefill: not a spike either
    other = burst.model_copy(update={"request_id": "other", "index": 5})
    assert (
        _findings([*with_prefill[: at + 2], RequestStarted(request_id="other"), other, *with_prefill[at + 2 :]]) == []
    )
    found = _findings(after)
    assert _kinds(found) == ["latency_spike"] and found[0].evidence["wall_s"] == slow


# -- surfaced: replay, summary, config ----------------------------------------------------------------------


def _spliced_file(tmp_path: Path) -> Path:
    """The tool-call session with its reconciliation failing, and a stale recorded finding that the
    replay must drop for the one it recomputes."""
    data = read_session(SAMPLES / "toolcall_high_acceptance.jsonl")
    path = tmp_path / "mismatch.jsonl"
    lines = [dump_event(data.header)]
    for e in data.events:
        if isinstance(e, EngineCounters):
            e = e.model_copy(update={"matched": False, "detail": "accepted 40 ours vs 41 vllm"})
            stale = Finding(t=e.t, kind="loop", message="stale, recorded with other thresholds")
            lines.append(dump_event(stale))
        lines.append(dump_event(e))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_replay_prints_and_counts_findings(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPECTERM_CONFIG", str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    path = _spliced_file(tmp_path)
    assert main(["replay", str(path), "--summary", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["findings_by_kind"] == {"mismatch": 1}
    assert main(["replay", str(path), "--headless"]) == 0
    out = capsys.readouterr().out
    assert out.count("⚑") == 1 and "⚑ mismatch" in out
    assert main(["replay", str(path), "--headless", "--json"]) == 0
    kinds = [json.loads(line).get("kind") for line in capsys.readouterr().out.splitlines()]
    assert [k for k in kinds if k] == ["mismatch"]


@pytest.mark.parametrize(
    ("table", "key"),
    [("window = 2", "diagnose.window"), ("collapse_ratio = 1.5", "diagnose.collapse_ratio"), ("windw = 9", "windw")],
)
def test_bad_threshold_is_one_line_naming_the_key(tmp_path, monkeypatch, table, key):
    path = tmp_path / "config.toml"
    path.write_text(f"[diagnose]\n{table}\n")
    monkeypatch.setenv("SPECTERM_CONFIG", str(path))
    with pytest.raises(ConfigError) as err:
        load_thresholds()
    assert key in str(err.value) and "\n" not in str(err.value)


def test_thresholds_from_the_config_file(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_text("[engine]\ntarget = 'x'\n[diagnose]\nwindow = 32\nspike_ratio = 3\n")
    monkeypatch.setenv("SPECTERM_CONFIG", str(path))
    assert (load_thresholds().window, load_thresholds().spike_ratio) == (32, 3.0)
