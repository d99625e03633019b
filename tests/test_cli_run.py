"""`specterm run`: bad input gives one clear line and a non-zero exit, nothing half-written; the
real engine streams verdicts as JSONL events or styled text."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from specterm.cli import main
from specterm.events import EVENT_TYPES, SessionStarted, SpecStep, parse_event


def _run_main(capsys, *argv):
    rc = main(["run", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    return rc, err


def _assert_one_line_error(rc, err, needle):
    assert rc != 0
    assert len(err) == 1 and err[0].startswith("specterm: error: "), err
    assert needle in err[0]


def test_missing_model_path(capsys, tmp_path):
    record = tmp_path / "s.jsonl"
    rc, err = _run_main(capsys, "hi", "--target", str(tmp_path / "nope"), "--record", str(record))
    _assert_one_line_error(rc, err, "target model path does not exist")
    assert not record.exists()


def test_directory_that_is_not_a_model(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    rc, err = _run_main(capsys, "hi", "--target", str(tmp_path), "--no-record")
    _assert_one_line_error(rc, err, "not a model directory")


@pytest.mark.engine  # builds tokenizers with the engine extra's transformers
def test_draft_with_a_different_tokenizer_is_refused_before_loading(capsys, tiny_pair, retokenized):
    target, draft = tiny_pair
    other = retokenized(draft, "other-draft")
    rc, err = _run_main(capsys, "hi", "--target", target, "--draft", str(other), "--no-record")
    _assert_one_line_error(rc, err, "different tokenizers")


@pytest.mark.parametrize("k", ["0", "-3", "500"])
def test_absurd_k(capsys, tiny_pair, k):
    rc, err = _run_main(capsys, "hi", "--target", tiny_pair[0], "--draft", tiny_pair[1], "-k", k, "--no-record")
    _assert_one_line_error(rc, err, "num_speculative_tokens")


def test_schema_file_that_is_not_json(capsys, tmp_path, tiny_pair):
    bad = tmp_path / "s.json"
    bad.write_text("{not json")
    rc, err = _run_main(capsys, "hi", "--target", tiny_pair[0], "--schema", str(bad), "--no-record")
    _assert_one_line_error(rc, err, "is not JSON")


def test_schema_file_that_is_not_json_schema(capsys, tmp_path, tiny_pair):
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"type": "object", "properties": {"a": {"type": 5}}}))
    rc, err = _run_main(capsys, "hi", "--target", tiny_pair[0], "--schema", str(bad), "--no-record")
    _assert_one_line_error(rc, err, "not a valid JSON Schema at properties/a/type")


def test_bad_config_file_names_the_file(capsys, tmp_path, monkeypatch, tiny_pair):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[engine\ntarget = 1")
    monkeypatch.setenv("SPECTERM_CONFIG", str(cfg))
    rc, err = _run_main(capsys, "hi", "--no-record")
    _assert_one_line_error(rc, err, str(cfg))


def _start(*argv, env_extra=None) -> subprocess.Popen:
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.Popen(
        [sys.executable, "-m", "specterm", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.fixture(scope="module")
def real_runs(tiny_pair, tmp_path_factory):
    """The module's two real ``specterm run`` processes, each as a user starts it, started at once:
    most of each one's time is importing vLLM on one core, so two side by side take little longer
    than one (their generations are 24 and 16 tokens). ``{name: (CompletedProcess, record)}``."""
    record = tmp_path_factory.mktemp("run-json") / "rec.jsonl"
    procs = {
        "json": _start(
            "run",
            "--json",
            "--raw",
            "--target",
            tiny_pair[0],
            "--draft",
            tiny_pair[1],
            "--max-tokens",
            "24",
            "--record",
            str(record),
            "The customer alice placed",
        ),
        "t1": _start(
            "run",
            "--target",
            tiny_pair[0],
            "--draft",
            tiny_pair[1],
            "--max-tokens",
            "16",
            "--temperature",
            "1.0",
            "--no-record",
            "--raw",
            "Runbook:",
            env_extra={"NO_COLOR": "1"},
        ),
    }
    done = {}
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=300)
            done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return done, record


@pytest.mark.engine
def test_run_json_parses_line_by_line_as_events(real_runs):
    runs, record = real_runs
    proc = runs["json"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = [parse_event(line) for line in proc.stdout.splitlines()]
    assert isinstance(events[0], SessionStarted)
    assert {e.type for e in events} <= EVENT_TYPES
    assert [e.type for e in events][1] == "user_message"
    assert [e.type for e in events][-3:] == ["engine_counters", "request_finished", "session_ended"]
    assert events[-3].matched
    steps = [e for e in events if isinstance(e, SpecStep)]
    assert sum(len(s.tokens) for s in steps) == 24
    # The recorded session holds the same stream.
    from specterm.session.reader import read_session

    recorded = read_session(record)
    assert [e.model_dump() for e in recorded.events if e.type == "spec_step"] == [s.model_dump() for s in steps]


@pytest.mark.engine
def test_temperature_above_zero_on_cpu_runs_without_warning(real_runs):
    """The CPU build's T > 0 bug is fixed in-process (vllm_patches), so nothing warns."""
    proc = real_runs[0]["t1"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "warning" not in proc.stderr
    assert "acceptance" in proc.stdout  # the summary line still prints
    assert "\x1b[" not in proc.stdout  # NO_COLOR: no colour escapes
