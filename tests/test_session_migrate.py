"""Format versions: current files read natively, older ones migrate, newer ones are refused clearly."""

from __future__ import annotations

import json

import pytest

from specterm.errors import SessionFileError
from specterm.events import FORMAT_VERSION, SessionStarted, SpecStep
from specterm.session import migrate, read_session


def _write(tmp_path, *objs) -> str:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


STEP = {
    "type": "spec_step",
    "t": 0.1,
    "request_id": "r",
    "index": 0,
    "drafted": [5],
    "accepted": 1,
    "tokens": [{"id": 5, "text": "hi", "verdict": "accepted"}, {"id": 6, "text": "!", "verdict": "bonus"}],
}


def test_current_version_reads_without_migration(tmp_path):
    data = read_session(_write(tmp_path, {"type": "session_started", "format_version": FORMAT_VERSION}, STEP))
    assert data.format_version == FORMAT_VERSION
    assert migrate.migrator(FORMAT_VERSION) is None  # the fast path does no per-event work


def test_version_0_example_migrates_on_read(tmp_path):
    old_header = {"type": "session_start", "format_version": 0, "models": {"target": "t0"}}
    data = read_session(_write(tmp_path, old_header, STEP, {"type": "session_ended", "t": 1}))
    assert isinstance(data.header, SessionStarted)
    assert data.header.format_version == FORMAT_VERSION  # the header now describes what we hold
    assert data.format_version == 0  # ... and SessionData remembers what the file was
    assert data.header.models == {"target": "t0"}
    assert isinstance(data.events[0], SpecStep) and data.events[0].tokens[1].verdict == "bonus"
    assert data.warnings == []


def test_version_0_bad_lines_are_skipped_not_fatal(tmp_path):
    old_header = {"type": "session_start", "format_version": 0}
    path = _write(tmp_path, old_header, [1, 2], "text", STEP)
    data = read_session(path)
    assert [e.type for e in data.events] == ["spec_step"]
    assert any("line 2" in w for w in data.warnings) and any("line 3" in w for w in data.warnings)


def test_newer_version_is_refused_naming_both_versions(tmp_path):
    path = _write(tmp_path, {"type": "session_started", "format_version": 7}, STEP)
    with pytest.raises(SessionFileError) as err:
        read_session(path)
    assert f"written by a newer specterm: format 7, this reads up to {FORMAT_VERSION}" in str(err.value)
    assert str(path) in str(err.value)


def test_version_without_migration_path_is_refused_naming_both_versions(tmp_path):
    path = _write(tmp_path, {"type": "session_started", "format_version": -3}, STEP)
    with pytest.raises(SessionFileError, match=rf"format -3 is too old: this specterm reads format {FORMAT_VERSION}"):
        read_session(path)


@pytest.mark.parametrize("version", [None, "1", 1.0, True, [1]])
def test_version_must_be_an_integer(tmp_path, version):
    header = {"type": "session_started"} | ({} if version is None else {"format_version": version})
    with pytest.raises(SessionFileError, match="no valid format_version"):
        read_session(_write(tmp_path, header, STEP))


def test_every_version_below_current_down_to_the_oldest_has_a_step():
    oldest = min(migrate.MIGRATIONS)
    for version in range(oldest, FORMAT_VERSION):
        assert migrate.has_path(version), version
    assert not migrate.has_path(oldest - 1)
