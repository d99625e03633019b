"""Recorder: file layout, round trip, thread safety, crash safety under SIGKILL, CLI flags."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from specterm.cli.common import add_record_args, recorder_from_args
from specterm.errors import SessionFileError
from specterm.events import FORMAT_VERSION, SessionEnded, SpecStep, UserMessage
from specterm.session import Recorder, default_session_path, read_session
from specterm.session.synthetic import synthetic_header, synthetic_session

REPO = Path(__file__).resolve().parents[1]


def test_first_line_is_header_then_one_event_per_line(tmp_path):
    path = tmp_path / "s.jsonl"
    header = synthetic_header()
    with Recorder(path, header) as rec:
        rec.write(UserMessage(t=0.5, request_id="u", text="hi"))
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""  # every line, the last included, ends with a newline
    objs = [json.loads(line) for line in lines[:-1]]
    assert [o["type"] for o in objs] == ["session_started", "user_message", "session_ended"]
    assert objs[0]["format_version"] == FORMAT_VERSION
    assert objs[0]["models"]["target"] == "synthetic-target"
    assert objs[0]["specterm_version"]


def test_round_trip_preserves_types_tokens_and_verdicts(tmp_path):
    header, events = synthetic_session(300, steps_per_request=70, seed=3)
    path = tmp_path / "s.jsonl"
    with Recorder(path, header) as rec:
        for event in events:
            assert rec.write(event)
    data = read_session(path)
    assert data.header == header
    assert data.events == events  # pydantic equality: every field, tokens and verdicts included
    assert data.warnings == [] and data.skipped_unknown == 0
    steps = [e for e in data.events if isinstance(e, SpecStep)]
    assert len(steps) == 300
    assert [t.verdict for s in steps for t in s.tokens] == [
        t.verdict for e in events if isinstance(e, SpecStep) for t in e.tokens
    ]


def test_close_writes_session_ended_once(tmp_path):
    path = tmp_path / "s.jsonl"
    rec = Recorder(path, synthetic_header())
    rec.write(SessionEnded(t=1.0, reason="cancelled"))
    rec.close()
    rec.close()  # idempotent
    assert rec.write(UserMessage(request_id="u", text="late")) is False  # closed: not written
    data = read_session(path)
    assert [e.type for e in data.events] == ["session_ended"]
    assert data.events[0].reason == "cancelled"


def test_context_manager_records_why_it_ended(tmp_path):
    path = tmp_path / "s.jsonl"
    with pytest.raises(KeyboardInterrupt):
        with Recorder(path, synthetic_header()) as rec:
            rec.write(UserMessage(t=2.0, request_id="u", text="hi"))
            raise KeyboardInterrupt
    ended = read_session(path).events[-1]
    assert ended.type == "session_ended" and ended.reason == "interrupted"
    assert ended.t >= 2.0  # never before the last event


def test_existing_file_is_refused_not_overwritten(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("precious\n")
    with pytest.raises(SessionFileError, match="already exists"):
        Recorder(path, synthetic_header())
    assert path.read_text() == "precious\n"


def test_threads_writing_at_once_never_interleave_lines(tmp_path):
    path = tmp_path / "s.jsonl"
    rec = Recorder(path, synthetic_header())

    def writer(n: int) -> None:
        for i in range(200):
            rec.write(UserMessage(request_id=f"thread-{n}", text=f"{i}:" + "x" * 500))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rec.close()
    data = read_session(path)
    assert data.warnings == []
    assert rec.events_written == 1 + 800 + 1
    for n in range(4):
        mine = [e.text for e in data.events if getattr(e, "request_id", None) == f"thread-{n}"]
        assert mine == [f"{i}:" + "x" * 500 for i in range(200)]


def test_lone_surrogate_in_model_output_is_recorded_not_lost(tmp_path):
    # Half an emoji from a byte-level tokenizer: JSON cannot carry it; the event must survive.
    path = tmp_path / "s.jsonl"
    with Recorder(path, synthetic_header()) as rec:
        assert rec.write(UserMessage(request_id="u", text="ok \ud83d then"))
    event = read_session(path).events[0]
    assert event.text == "ok \ufffd then"


def test_failed_write_stops_recording_without_raising(tmp_path):
    errors: list[str] = []
    path = tmp_path / "s.jsonl"
    rec = Recorder(path, synthetic_header(), on_error=errors.append)
    os.close(rec._fd)  # the file system goes away under the recorder (EBADF on the next write)
    assert rec.write(UserMessage(request_id="u", text="lost")) is False
    assert rec.write(UserMessage(request_id="u", text="lost too")) is False
    rec.close()
    assert len(errors) == 1 and "recording stopped" in errors[0]
    assert rec.error == errors[0]
    assert read_session(path).header.type == "session_started"  # what was written stays readable


def test_default_session_path_is_under_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTERM_DATA_DIR", str(tmp_path / "data"))
    when = datetime(2026, 12, 2, 13, 55, 1, tzinfo=UTC)
    a, b = default_session_path(when), default_session_path(when)
    assert a.parent == tmp_path / "data" / "sessions"
    assert a.name.startswith("20261202T135501Z-") and a.suffix == ".jsonl"
    assert a != b  # the short id keeps sessions started in the same second apart


def test_record_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTERM_DATA_DIR", str(tmp_path / "data"))
    parser = argparse.ArgumentParser()
    add_record_args(parser)
    header = synthetic_header()

    assert recorder_from_args(parser.parse_args(["--no-record"]), header) is None

    explicit = tmp_path / "mine.jsonl"
    rec = recorder_from_args(parser.parse_args(["--record", str(explicit)]), header)
    rec.close()
    assert rec.path == explicit and read_session(explicit).events[-1].type == "session_ended"

    rec = recorder_from_args(parser.parse_args([]), header)  # on by default
    rec.close()
    assert rec.path.parent == tmp_path / "data" / "sessions" and rec.path.exists()

    with pytest.raises(SystemExit):  # mutually exclusive
        parser.parse_args(["--record", "x", "--no-record"])


_WRITER = textwrap.dedent(
    """
    import sys
    from specterm.events import SpecStep, Token
    from specterm.session import Recorder
    from specterm.session.synthetic import synthetic_header

    rec = Recorder(sys.argv[1], synthetic_header())
    i = 0
    while True:
        rec.write(SpecStep(t=i * 0.001, request_id="r", index=i, drafted=[7, 8, 9], accepted=1,
                           tokens=[Token(id=7, text="a" * (i % 300), verdict="accepted"),
                                   Token(id=5, text="b", verdict="correction")],
                           rejected=[8, 9], rejected_text=["x", "y"]))
        i += 1
        if i % 100 == 0:
            print(i, flush=True)
    """
)


def test_sigkill_mid_recording_loses_at_most_the_event_being_written(tmp_path):
    path = tmp_path / "killed.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        confirmed = 0
        while confirmed < 1000:  # the writer is still writing flat out when the kill lands
            line = proc.stdout.readline()
            assert line, f"writer died early (exit {proc.poll()})"
            confirmed = int(line)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL

    data = read_session(path)
    indexes = [e.index for e in data.events]
    # Every event reported written before the kill is there, in order, with nothing missing.
    assert len(indexes) >= confirmed
    assert indexes == list(range(len(indexes)))
    assert all(e.tokens[1].verdict == "correction" for e in data.events)
    # No session_ended (it was killed), said once; at most one partial line was dropped.
    assert any("no session_ended event" in w for w in data.warnings)
    assert sum("truncated" in w for w in data.warnings) <= 1
    assert len(data.warnings) <= 2


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o027])
def test_session_files_are_private_and_new_directories_too(tmp_path, umask):
    old = os.umask(umask)
    try:
        path = tmp_path / "data" / "sessions" / "s.jsonl"
        with Recorder(path, synthetic_header()):
            pass
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o600 & ~umask
    for d in (path.parent, path.parent.parent):
        assert d.stat().st_mode & 0o777 == 0o700 & ~umask


def test_an_existing_directory_keeps_its_mode(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    with Recorder(shared / "s.jsonl", synthetic_header()):
        pass
    assert shared.stat().st_mode & 0o777 == 0o755 and (shared / "s.jsonl").stat().st_mode & 0o777 == 0o600


def test_the_file_is_fsynced_at_the_end_of_every_request(tmp_path, monkeypatch):
    """A spy on ``os.fsync`` (the real call still runs) records which files were synced when."""
    from specterm.events import RequestFinished

    synced: list[int] = []
    real = os.fsync

    def spy(fd):
        synced.append(os.fstat(fd).st_ino)
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    path = tmp_path / "s.jsonl"
    rec = Recorder(path, synthetic_header())
    inode = path.stat().st_ino
    rec.write(UserMessage(t=0.1, request_id="r1", text="hi"))
    rec.write(SpecStep(t=0.2, request_id="r1", index=0))
    assert rec.syncs == 0  # not per event
    for i in (1, 2):
        rec.write(RequestFinished(t=0.3 * i, request_id=f"r{i}", text="done"))
        done = threading.Event()
        for _ in range(1000):  # the fsync runs on the recorder's thread: wait for it, no timing assert
            if rec.syncs >= i:
                break
            done.wait(0.01)
        assert rec.syncs == i
    rec.close()
    assert synced and set(synced) == {inode} and len(synced) == 3  # two requests + close


def test_the_header_names_models_without_this_machines_paths(tmp_path, monkeypatch):
    """A recorded session travels: shipped models are named relative to the checkout, built ones
    relative to the home directory; a hub id and a path elsewhere are kept as given."""
    from specterm.cli.common import session_header
    from specterm.engine.base import EngineConfig

    monkeypatch.setenv("HOME", str(tmp_path))
    built = tmp_path / ".cache" / "specterm" / "models" / "smollm2-agent"
    config = EngineConfig(target=str(built / "target"), draft=str(built / "draft"), method="draft_model")
    header = session_header(config)
    for where in (header.models, header.config):
        assert where["target"] == "~/.cache/specterm/models/smollm2-agent/target"
        assert where["draft"] == "~/.cache/specterm/models/smollm2-agent/draft"
    assert str(tmp_path) not in json.dumps(header.model_dump(mode="json"))

    shipped = EngineConfig(target=str(REPO / "models" / "embedded" / "target"), method=None)
    header = session_header(shipped)
    assert header.models["target"] == header.config["target"] == "models/embedded/target"
    assert header.models["draft"] is None
    for kept in ("HuggingFaceTB/SmolLM2-135M-Instruct", "/srv/models/qwen"):
        assert session_header(EngineConfig(target=kept, method=None)).models["target"] == kept
