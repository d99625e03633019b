"""Reader: every kind of damaged or hostile file gives a clear result — never a traceback, never a write."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specterm.errors import SessionFileError
from specterm.events import SpecStep, Token, UserMessage, dump_event
from specterm.render import step_text
from specterm.session import read_session
from specterm.session.fast_summary import summarize_file
from specterm.session.synthetic import synthetic_header, synthetic_session
from specterm.stats import summarize

HEADER = dump_event(synthetic_header())
STEP = dump_event(
    SpecStep(
        t=0.1,
        request_id="r",
        index=0,
        drafted=[1, 2],
        accepted=1,
        tokens=[Token(id=1, text="a", verdict="accepted"), Token(id=3, text="c", verdict="correction")],
        rejected=[2],
        rejected_text=["b"],
    )
)
END = '{"type": "session_ended", "t": 1.0}'


def write(tmp_path: Path, *lines: str | bytes, name: str = "s.jsonl", newline_at_end: bool = True) -> Path:
    parts = [ln.encode() if isinstance(ln, str) else ln for ln in lines]
    path = tmp_path / name
    path.write_bytes(b"\n".join(parts) + (b"\n" if newline_at_end and parts else b""))
    return path


def read_unchanged(path: Path):
    """read_session, asserting it wrote nothing: same bytes and mtime before and after."""
    before = (path.read_bytes(), path.stat().st_mtime_ns) if path.is_file() else None
    try:
        return read_session(path)
    finally:
        if before is not None:
            assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_clean_file_has_no_warnings(tmp_path):
    data = read_unchanged(write(tmp_path, HEADER, STEP, END))
    assert [e.type for e in data.events] == ["spec_step", "session_ended"]
    assert data.warnings == [] and data.skipped_unknown == 0


def test_truncated_last_line_is_dropped_with_a_warning(tmp_path):
    path = write(tmp_path, HEADER, STEP, STEP[: len(STEP) // 2], newline_at_end=False)
    data = read_unchanged(path)
    assert [e.type for e in data.events] == ["spec_step"]
    assert any("line 3: truncated last line" in w for w in data.warnings)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"this is not json\n", "line 1 is not JSON"),
        (b'{"type": "session_st', "ends inside its first line"),
        (b"[1, 2, 3]\n", "not a session_started header"),
        (STEP.encode() + b"\n", "not a session_started header"),
        (b'{"type": "session_started", "format_version": "1"}\n', "no valid format_version"),
        (b'{"type": "session_started", "format_version": 1, "models": 5}\n', "invalid session header: models"),
        (b'{"type": "session_started", "format_version": 1, "agent": 5}\n', "invalid session header: agent: Input"),
        (b"\x89PNG\r\n\x1a\n\x00\x00binary", "line 1 is not JSON"),
        (b"\xfd7zXZ\x00\x00compressed", "xz-compressed"),
    ],
)
def test_unreadable_files_raise_one_line_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(SessionFileError, match=message) as err:
        read_unchanged(path)
    text = str(err.value)
    assert "\n" not in text and str(path) in text


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(SessionFileError, match="no such file"):
        read_session(tmp_path / "nope.jsonl")
    with pytest.raises(SessionFileError, match="is a directory"):
        read_session(tmp_path)


def test_bad_lines_in_the_middle_are_skipped_with_line_numbers(tmp_path):
    path = write(
        tmp_path,
        HEADER,
        "not json",
        STEP,
        '["a", "list"]',
        '{"type": "spec_step"}',
        '{"type": "spec_step", "request_id": "r", "index": 1, "tokens": [{"id": 1, "text": "x", "verdict": "maybe"}]}',
        "",
        STEP,
        END,
    )
    data = read_unchanged(path)
    assert [e.type for e in data.events] == ["spec_step", "spec_step", "session_ended"]
    joined = "\n".join(data.warnings)
    assert "line 2: not JSON" in joined
    assert "line 4: a JSON list, not an event object" in joined
    assert "line 5: invalid 'spec_step': request_id" in joined
    assert "line 6: invalid 'spec_step': tokens.0.verdict" in joined
    assert "line 7" not in joined  # a blank line is harmless


def test_unknown_event_types_are_skipped_and_counted(tmp_path):
    future = '{"type": "hologram", "t": 0.2, "beams": 3}'
    path = write(tmp_path, HEADER, future, STEP, future, '{"type": "quantum_step"}', END)
    data = read_unchanged(path)
    assert [e.type for e in data.events] == ["spec_step", "session_ended"]
    assert data.skipped_unknown == 3
    assert sum("unknown type" in w for w in data.warnings) == 1
    assert "'hologram'" in data.warnings[0] and "'quantum_step'" in data.warnings[0]


def test_many_distinct_unknown_types_are_all_counted(tmp_path):
    lines = [json.dumps({"type": f"future_{i}"}) for i in range(1000)]
    data = read_unchanged(write(tmp_path, HEADER, *lines, END))
    assert data.skipped_unknown == 1000
    [warning] = [w for w in data.warnings if "unknown type" in w]
    assert "'future_0', 'future_1', 'future_10'" in warning and warning.endswith("newer specterm?")


def test_a_10_mb_line_is_skipped_with_bounded_memory(tmp_path):
    huge = json.dumps({"type": "user_message", "request_id": "u", "text": "x" * 10_000_000})
    path = write(tmp_path, HEADER, STEP, huge, STEP, END)
    data = read_session(path, max_line_bytes=1_000_000)
    assert [e.type for e in data.events] == ["spec_step", "spec_step", "session_ended"]
    assert any("line 3: 10000" in w and "over the 1000000 bytes line limit" in w for w in data.warnings)


def test_a_huge_line_does_not_grow_memory_by_its_size(tmp_path):
    # A 64 MB line against the default 4 MiB limit. The file is written here, in chunks, and read in a
    # fresh process, so that process's peak RSS growth measures the read alone.
    import subprocess
    import sys

    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as f:
        f.write(HEADER.encode() + b'\n{"type": "user_message", "request_id": "u", "text": "')
        for _ in range(64):
            f.write(b"x" * 1_000_000)
        f.write(b'"}\n' + END.encode() + b"\n")
    code = (
        "import resource, sys\n"
        "from specterm.session import read_session\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "d = read_session(sys.argv[1])\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print((after - before) // 1024, len(d.events), d.warnings[0])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert out.returncode == 0, out.stderr
    grown_mb, events, warning = out.stdout.split(" ", 2)
    assert events == "1" and "line 2: 640000" in warning and "over the 4 MiB line limit" in warning
    assert int(grown_mb) < 20  # holding the line would cost 64 MB or more


def test_invalid_utf8_line_is_skipped(tmp_path):
    bad = b'{"type": "user_message", "request_id": "u", "text": "\xff\xfe"}'
    data = read_unchanged(write(tmp_path, HEADER, bad, STEP, END))
    assert [e.type for e in data.events] == ["spec_step", "session_ended"]
    assert any("line 2: not valid UTF-8" in w for w in data.warnings)


def test_escape_sequences_and_markup_in_tokens_come_out_inert(tmp_path):
    hostile = ["\x1b[2J\x1b[31mred", "\x1b]0;pwned\x07", "[bold red]markup[/]", "\u202eevil", "\x9b31m"]
    step = SpecStep(
        t=0.1,
        request_id="r",
        index=0,
        tokens=[Token(id=i, text=text, verdict="target") for i, text in enumerate(hostile)],
    )
    data = read_unchanged(write(tmp_path, HEADER, dump_event(step), END))
    read_back = data.events[0]
    assert [t.text for t in read_back.tokens] == hostile  # the reader keeps text verbatim ...
    rendered = step_text(read_back)  # ... and the renderer makes it inert
    plain = rendered.plain
    assert not any(ch in plain for ch in "\x1b\x07\x9b\u202e")
    assert "[bold red]markup[/]" in plain  # markup shown literally, not interpreted
    assert "\\x1b]0;pwned" in plain
    assert all(span.style != "bold red" for span in rendered.spans)


def test_timestamps_going_backwards_warn_once(tmp_path):
    events = [dump_event(UserMessage(t=t, request_id="u", text="x")) for t in (1.0, 5.0, 2.0, 6.0, 0.5)]
    data = read_unchanged(write(tmp_path, HEADER, *events, END))
    assert len(data.events) == 6
    warnings = [w for w in data.warnings if "backwards" in w]
    assert len(warnings) == 1 and "2 time(s)" in warnings[0] and "first at event 2" in warnings[0]


def test_non_finite_timestamps_warn(tmp_path):
    data = read_unchanged(
        write(tmp_path, HEADER, '{"type": "user_message", "request_id": "u", "text": "x", "t": NaN}', END)
    )
    assert len(data.events) == 2
    assert any("non-finite timestamp" in w for w in data.warnings)


def test_gzip_is_read_transparently_whatever_its_name(tmp_path):
    header, events = synthetic_session(50)
    body = "\n".join([dump_event(header), *map(dump_event, events)]) + "\n"
    path = tmp_path / "session.jsonl"  # no .gz suffix: recognised by magic bytes
    path.write_bytes(gzip.compress(body.encode()))
    data = read_unchanged(path)
    assert data.compressed and data.events == events and data.warnings == []


def test_truncated_gzip_keeps_what_came_before(tmp_path):
    header, events = synthetic_session(200)
    body = "\n".join([dump_event(header), *map(dump_event, events)]) + "\n"
    blob = gzip.compress(body.encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(blob[: len(blob) // 2])
    data = read_unchanged(path)
    assert 0 < len(data.events) < len(events)
    assert data.events == events[: len(data.events)] or data.events[:-1] == events[: len(data.events) - 1]
    assert any("compressed data is damaged" in w or "truncated" in w for w in data.warnings)


def test_many_bad_lines_give_bounded_warnings(tmp_path):
    data = read_unchanged(write(tmp_path, HEADER, *(["garbage"] * 5000), END))
    assert len(data.warnings) <= 25
    assert any("4980 more bad lines skipped" in w for w in data.warnings)


def test_unreadable_permissions(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root can read anything")
    path = write(tmp_path, HEADER, END)
    path.chmod(0)
    with pytest.raises(SessionFileError, match="cannot open"):
        read_session(path)


# -- fuzzing: the reader returns normally or raises SessionFileError, nothing else ------------------

_FUZZ_DIR = Path(tempfile.mkdtemp(prefix="specterm-fuzz-"))
"""One file rewritten per example (hypothesis runs many examples per test, a tmp_path would be one
per test); removed when the module ends."""


@pytest.fixture(scope="module", autouse=True)
def _remove_fuzz_dir():
    yield
    shutil.rmtree(_FUZZ_DIR, ignore_errors=True)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_event_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["spec_step", "user_message", "session_started", "session_start", "nope"]) | _json_values},
    optional={
        "t": _json_values,
        "request_id": _json_values,
        "tokens": _json_values,
        "text": _json_values,
        "format_version": _json_values,
        "index": _json_values,
    },
)
_line = st.one_of(
    st.sampled_from([HEADER, STEP, END, ""]),
    _event_like.map(json.dumps),
    _json_values.map(json.dumps),
    st.binary(max_size=80).map(lambda b: b.decode("latin-1")),
    st.tuples(st.sampled_from([HEADER, STEP]), st.integers(0, 200)).map(lambda p: p[0][: p[1]]),
)


def _read_fuzzed(content: bytes) -> None:
    path = _FUZZ_DIR / "fuzz.jsonl"
    path.write_bytes(content)
    try:
        data = read_session(path)
    except SessionFileError as err:
        assert str(err).isprintable()  # one line, no control characters from the file
        with pytest.raises(SessionFileError, match=re.escape(str(err))):
            summarize_file(path)
        return
    assert all(isinstance(w, str) and w.isprintable() for w in data.warnings)
    # The fast summary (msgspec for spec steps) accepts, skips and warns exactly as the reader does.
    fast_data, fast = summarize_file(path)
    assert fast_data.warnings == data.warnings and fast_data.skipped_unknown == data.skipped_unknown
    assert repr(fast.as_dict()) == repr(summarize(data.events).as_dict())  # repr: NaN == NaN


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=600))
def test_fuzz_arbitrary_bytes(content):
    _read_fuzzed(content)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_line, max_size=12), st.booleans(), st.booleans())
def test_fuzz_line_structured(lines, with_header, compress):
    text = "\n".join(([HEADER] if with_header else []) + lines)
    content = text.encode("utf-8", "surrogatepass")
    _read_fuzzed(gzip.compress(content) if compress else content)


def test_a_pipe_is_read_too(tmp_path):
    # `specterm replay <(zcat old.jsonl.gz)`: no seeking allowed.
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    body = gzip.compress(f"{HEADER}\n{STEP}\n{END}\n".encode())
    writer = threading.Thread(target=fifo.write_bytes, args=(body,))
    writer.start()
    try:
        data = read_session(fifo)
    finally:
        writer.join(10)
    assert data.compressed and [e.type for e in data.events] == ["spec_step", "session_ended"]


def test_reading_in_pieces_gives_what_reading_at_once_gives(tmp_path):
    from specterm.session.reader import SessionReader

    header, events = synthetic_session(300, steps_per_request=40)
    path = tmp_path / "s.jsonl"
    lines = [header.model_dump_json()] + [e.model_dump_json() for e in events]
    lines.insert(50, "not json")  # a bad line inside the second piece
    path.write_text("\n".join(lines) + "\n")
    whole = read_session(path)
    with SessionReader(path) as reader:
        head = reader.read(30)
        pieces = [head]
        while not reader.done:
            pieces.append(reader.read(100))
    assert len(head) == 30  # the 30 lines after the header (the bad line is in a later piece)
    assert [e for piece in pieces for e in piece] == whole.events == reader.data.events
    assert reader.data.warnings == whole.warnings and any("line 51: not JSON" in w for w in whole.warnings)
