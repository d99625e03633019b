"""``specterm replay``: headless stream, warnings, errors, flags; and no Textual in core packages."""

from __future__ import annotations

import gc
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specterm.cli import main
from specterm.events import SpecStep, Token, ToolCall, UserMessage, dump_event
from specterm.session import Recorder, read_session
from specterm.session.synthetic import synthetic_header, synthetic_session

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _unfreeze():
    yield
    gc.unfreeze()  # `replay` freezes the GC for its events (a CLI process-level choice); undo it here


def _record(path: Path, events) -> Path:
    with Recorder(path, synthetic_header()) as rec:
        for event in events:
            rec.write(event)
    return path


HOSTILE = [
    UserMessage(t=0.0, request_id="u", text="hi \x1b]0;title\x07 [bold]there[/bold]"),
    SpecStep(
        t=0.1,
        request_id="r",
        index=0,
        drafted=[1],
        accepted=1,
        tokens=[
            Token(id=1, text="\x1b[2J\x1b]8;;http://evil\x07link", verdict="accepted"),
            Token(id=2, text="[red]not red[/red]", verdict="bonus"),
        ],
    ),
    ToolCall(t=0.2, request_id="r", step=0, name="lookup\x1b[5m", raw='{"q": "\x9b31m"}'),
]


def test_headless_prints_the_stream_and_a_summary(tmp_path, capsys):
    header, events = synthetic_session(60, steps_per_request=30)
    path = _record(tmp_path / "s.jsonl", events)
    assert main(["replay", str(path), "--headless"]) == 0
    out = capsys.readouterr().out
    assert "── step 0: validate" in out and "── step 1: retrieve" in out
    assert "> Where is order #42?" in out
    assert "acceptance" in out and "mean acceptance length" in out  # the closing summary line
    tokens = "".join(t.text for e in events if isinstance(e, SpecStep) for t in e.tokens)
    assert tokens[:40] in out.replace("\n", "")


@pytest.mark.parametrize("force_color", [False, True])
def test_hostile_text_comes_out_inert(tmp_path, capsys, monkeypatch, force_color):
    if force_color:
        monkeypatch.setenv("FORCE_COLOR", "1")  # our own styling may emit SGR; the file's bytes may not
    monkeypatch.delenv("NO_COLOR", raising=False)
    path = _record(tmp_path / "s.jsonl", HOSTILE)
    assert main(["replay", str(path), "--headless"]) == 0
    out = capsys.readouterr().out
    assert ("\x1b[" in out) is force_color
    for bad in ("\x1b]", "\x07", "\x1b[2J", "\x1b[5m", "\x9b"):
        assert bad not in out
    assert "[red]not red[/red]" in out and "[bold]there[/bold]" in out  # markup shown, not applied
    assert "\\x1b]8;;http://evil" in out


def test_no_color_is_respected(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("NO_COLOR", "1")
    path = _record(tmp_path / "s.jsonl", HOSTILE)
    assert main(["replay", str(path), "--headless"]) == 0
    out = capsys.readouterr().out
    params = [p for sgr in re.findall(r"\x1b\[([0-9;]*)m", out) for p in sgr.split(";")]
    assert "1" in params  # styling that is not colour (bold) stays: verdicts never rely on hue alone
    colours = [p for p in params if p and (30 <= int(p) <= 38 or 90 <= int(p) <= 97)]
    assert colours == []


def test_reader_warnings_go_to_stderr_one_line_each(tmp_path, capsys):
    path = tmp_path / "damaged.jsonl"
    lines = [
        dump_event(synthetic_header()),
        '{"type": "hologram"}',
        "garbage \x1b[31m",
        dump_event(UserMessage(t=0, request_id="u", text="hi")),
        '{"type": "user_mess',
    ]
    path.write_text("\n".join(lines))
    assert main(["replay", str(path), "--headless"]) == 0
    err = capsys.readouterr().err.splitlines()
    warnings = [line for line in err if line.startswith("specterm: warning: ")]
    assert len(warnings) == 4  # not JSON, truncated last line, unknown type, no session_ended
    assert any("line 3: not JSON" in w for w in warnings)
    assert any("line 5: truncated last line" in w for w in warnings)
    assert any("unknown type ('hologram')" in w for w in warnings)
    assert all("\x1b" not in line for line in err)


@pytest.mark.parametrize("content", [b"", b"not a session\n", b'{"type": "session_started", "format_version": 9}\n'])
def test_unreadable_file_is_one_error_line_and_non_zero(tmp_path, capsys, content):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    assert main(["replay", str(path)]) != 0
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith("specterm: error: ") and str(path) in line


def test_missing_file_via_the_real_entry_point(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from specterm.cli import main; sys.exit(main())",
            "replay",
            str(tmp_path / "none.jsonl"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode != 0
    assert proc.stderr.strip() == f"specterm: error: {tmp_path / 'none.jsonl'}: no such file"
    assert "Traceback" not in proc.stderr


def test_json_headless_output_is_itself_a_replayable_session(tmp_path, capsys):
    header, events = synthetic_session(40)
    path = _record(tmp_path / "s.jsonl", events)
    assert main(["replay", str(path), "--headless", "--json"]) == 0
    copy = tmp_path / "copy.jsonl"
    copy.write_text(capsys.readouterr().out)
    again = read_session(copy)
    assert again.events == read_session(path).events and again.warnings == []


def test_without_a_terminal_the_dashboard_falls_back_to_headless(tmp_path, capsys):
    path = _record(tmp_path / "s.jsonl", synthetic_session(10)[1])
    assert main(["replay", str(path)]) == 0  # capsys: stdout is not a terminal
    captured = capsys.readouterr()
    assert "specterm: note: standard output is not a terminal; replaying headless" in captured.err
    assert "── step 0" in captured.out


class _FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_without_the_dashboard_module_it_falls_back_with_a_note(tmp_path, capsys, monkeypatch):
    path = _record(tmp_path / "s.jsonl", synthetic_session(10)[1])
    monkeypatch.setitem(sys.modules, "specterm.ui.app", None)  # makes the import raise ImportError
    terminal = _FakeTerminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["replay", str(path)]) == 0
    assert "specterm: note: the dashboard is not available" in capsys.readouterr().err
    assert "── step 0" in terminal.getvalue()


@pytest.mark.parametrize("bad", ["-1", "nan", "fast"])
def test_bad_speed_is_a_usage_error(tmp_path, capsys, bad):
    with pytest.raises(SystemExit) as exit_:
        main(["replay", "x.jsonl", "--speed", bad])
    assert exit_.value.code == 2 and "--speed" in capsys.readouterr().err


@pytest.mark.parametrize("speed", ["max", "0", "inf", "1000"])
def test_speed_values(tmp_path, capsys, speed):
    path = _record(tmp_path / "s.jsonl", synthetic_session(10)[1])
    assert main(["replay", str(path), "--headless", "--speed", speed]) == 0
    assert "── step 0" in capsys.readouterr().out


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("flags", [["--headless"], ["--headless", "--json"], ["--summary"]])
def test_a_full_disk_on_stdout_is_one_error_line(tmp_path, flags):
    path = _record(tmp_path / "s.jsonl", synthetic_session(200)[1])
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from specterm.cli import main; sys.exit(main())",
                "replay",
                str(path),
                *flags,
            ],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            timeout=60,
        )
    assert proc.returncode != 0
    assert proc.stderr.strip() == "specterm: error: cannot write the output: No space left on device"
