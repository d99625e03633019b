"""``specterm serve``: the chat flags reach the served command, bad input is one line before
anything listens, and in a real browser (Chromium driven by Playwright) the served app takes a
prompt and paints its tokens in the theme's verdict colours, on the real engine."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specterm.cli import build_parser, main

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_sessions" / "sql_agent_multistep.jsonl"
CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps dialling Google services (refused here).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _browser_env(tmp_path: Path) -> dict[str, str]:
    """Chromium's environment with a home and XDG directories of its own under tmp_path. The
    session's isolation (conftest) covers specterm and vLLM, not the browser, which otherwise writes
    ~/.config/chromium/Crash Reports/settings.dat and, through GLib, a dconf database
    (~/.cache/dconf/user when there is no runtime dir) into the real home."""
    home = tmp_path / "browser-home"
    dirs = {
        "HOME": home,
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_CACHE_HOME": home / ".cache",
        "XDG_DATA_HOME": home / ".local" / "share",
        "XDG_STATE_HOME": home / ".local" / "state",
        "XDG_RUNTIME_DIR": home / "runtime",
    }
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    dirs["XDG_RUNTIME_DIR"].chmod(0o700)  # the XDG spec: a runtime dir only its owner may open
    return {**os.environ, **{name: str(path) for name, path in dirs.items()}}


def _serve_error(capsys, *argv):
    rc = main(["serve", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0
    assert len(err) == 1 and err[0].startswith("specterm: error: "), err
    return err[0]


def test_port_in_use_is_one_line_before_serving(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = _serve_error(capsys, "--host", "127.0.0.1", "--port", str(port), "--replay", str(SAMPLE))
    assert f"port {port} on 127.0.0.1 is in use" in line and "pass --port" in line


def test_bad_flags_fail_before_serving(capsys, tmp_path):
    assert "each browser tab records its own session" in _serve_error(capsys, "--record", str(tmp_path / "s.jsonl"))
    assert "no such file" in _serve_error(capsys, "--replay", str(tmp_path / "missing.jsonl"))
    assert "bad --port" in _serve_error(capsys, "--port", "70000", "--replay", str(SAMPLE))


def test_served_command_is_chat_with_the_chat_flags_only():
    from specterm.cli.serve import chat_command

    args = build_parser().parse_args(
        [
            "serve",
            "--port",
            "9001",
            "--host",
            "0.0.0.0",
            "--agent",
            "none",
            "--raw",
            "-k",
            "3",
            "--theme-file",
            "my theme.toml",
            "--no-record",
            "--target",
            "/m/t",
        ]
    )
    command = chat_command(args)
    assert command.startswith("trap '' INT; exec ")  # Ctrl+C is the server's; it quits the apps itself
    argv = shlex.split(command.removeprefix("trap '' INT; exec "))
    assert argv[:4] == [sys.executable, "-m", "specterm", "chat"]
    rest = argv[4:]
    assert {"--raw", "--no-record"} <= set(rest) and "--port" not in rest and "--host" not in rest
    for flag, value in (
        ("--agent", "none"),
        ("--num-speculative-tokens", "3"),
        ("--theme-file", "my theme.toml"),
        ("--target", "/m/t"),
    ):
        assert rest[rest.index(flag) + 1] == value
    assert "--max-tokens" not in rest  # defaults are left to chat itself


# The page keeps xterm.js's Terminal in a closure; this setter on Object.prototype catches the one
# ``this.terminal = new Terminal(...)`` assignment (and makes it an own property again), so the test
# reads the cells xterm.js paints: characters and their truecolor foregrounds.
CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, 'terminal', {configurable: true, set(value) {
  Object.defineProperty(this, 'terminal', {value, writable: true, configurable: true, enumerable: true});
  if (value && value.buffer) window.__specterm_terminal = value;
}});
"""
SCREEN = """() => { const term = window.__specterm_terminal, buf = term.buffer.active, rows = [];
  for (let y = 0; y < term.rows; y++) { const line = buf.getLine(buf.viewportY + y); if (!line) continue;
    const cells = [];
    for (let x = 0; x < line.length; x++) { const c = line.getCell(x);
      cells.push([c.getChars(), c.isFgRGB() ? c.getFgColor() : -1]); }
    rows.push({text: line.translateToString(true), cells}); }
  return rows; }"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _live_processes_in_group(pgid: int) -> list[str]:
    """Command lines of the processes in group ``pgid`` that still run (zombies excepted)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                alive.append((stat.parent / "cmdline").read_text().replace("\0", " "))
        except (OSError, IndexError, ValueError):
            continue  # ended while we looked
    return alive


def _verdict_colours() -> dict[int, str]:
    from specterm.ui.theming import DEFAULT_THEME, load_builtin_themes

    theme = {t.name: t for t in load_builtin_themes()}[DEFAULT_THEME]
    return {
        int(theme.variables[f"token-{v}"].lstrip("#"), 16): v for v in ("accepted", "correction", "bonus", "target")
    }


def _left(row) -> list[tuple[str, int]]:
    """The transcript's cells of a screen row: up to the side panels' box edge."""
    cells = []
    for chars, fg in row["cells"][1:]:
        if chars in ("│", "╭", "╰"):
            break
        cells.append((chars, fg))
    return cells


def _answer_cells(rows) -> list[tuple[str, int]] | None:
    """The cells of the generated text: the rows between the transcript's ``generation`` heading and
    its finished line (``… tok/s``); ``None`` until that line is there."""
    texts = ["".join(c for c, _ in _left(row)) for row in rows]
    start = next((i for i, t in enumerate(texts) if t.strip() == "▌ generation"), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(texts)) if "tok/s" in texts[i]), None)
    if end is None:
        return None
    return [(c, fg) for row in rows[start + 1 : end] for c, fg in _left(row) if c.strip() and c != "▌"]


@pytest.mark.engine
def test_browser_prompt_streams_verdict_coloured_tokens(tiny_pair, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(
            f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium; make test "
            "installs it where it can: scripts/install_chromium.sh)"
        )
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra has it)")
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = tmp_path / "serve.log"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "specterm",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--target",
            tiny_pair[0],
            "--draft",
            tiny_pair[1],
            "--agent",
            "none",
            "--raw",
            "--max-tokens",
            "24",
            "--no-gpu",
            "--no-record",
        ],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        cwd=REPO,
        start_new_session=True,
    )
    colours = _verdict_colours()
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, env=_browser_env(tmp_path))
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.add_init_script(CATCH_TERMINAL)
            here = f"127.0.0.1:{port}"  # the page's web font lives on Google: nothing else may load
            page.route("**/*", lambda route: route.continue_() if here in route.request.url else route.abort())
            for _ in range(100):  # the server checks its flags before it listens
                try:
                    page.goto(f"http://{here}/", wait_until="domcontentloaded")
                    break
                except sync_api.Error:
                    assert server.poll() is None, log.read_text()[-2000:]
                    page.wait_for_timeout(300)
            page.wait_for_function("() => window.__specterm_terminal !== undefined", timeout=60_000)
            # The header says "ready" once this tab's own engine is up.
            page.wait_for_function(
                """() => { const l = window.__specterm_terminal.buffer.active.getLine(0);
                const t = l ? l.translateToString(true) : ''; return t.includes('ready') && !t.includes('starting'); }""",
                timeout=300_000,
            )
            page.locator("textarea.xterm-helper-textarea").focus()
            page.keyboard.type("The customer alice placed")
            page.keyboard.press("Enter")
            answer = None
            for _ in range(600):  # until the request's finished line is painted (the engine's pace)
                rows = page.evaluate(SCREEN)
                if (answer := _answer_cells(rows)) is not None:
                    break
                page.wait_for_timeout(500)
            # Ctrl+C with the tab still open: SIGINT to the whole process group, as a terminal sends it.
            os.killpg(server.pid, signal.SIGINT)
            rc = server.wait(timeout=120)
            browser.close()
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    screen = "\n".join(r["text"] for r in rows)
    assert "The customer alice placed" in screen, screen  # the prompt, echoed in the transcript
    assert answer is not None and len(answer) >= 10, screen
    # Every character of the answer is painted in one of the theme's verdict colours, and speculation
    # ran: after the prefill's target token every token is a draft kept, a correction or a bonus. Which
    # of those depends on the tokens the pair takes, which differ by CPU, so none is required.
    painted = [colours.get(fg) for _, fg in answer]
    assert None not in painted, (answer, screen)
    assert set(painted) & {"accepted", "correction", "bonus"}, (answer, screen)
    assert rc == 0, log.read_text()[-2000:]
    output = log.read_text()
    assert f"serving the dashboard on http://127.0.0.1:{port}" in output and "Traceback" not in output, output[-2000:]
    for _ in range(240):  # the tab's chat process (and its engine) ends with the server
        if not _live_processes_in_group(server.pid):
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"served processes outlived the server: {_live_processes_in_group(server.pid)}")


def test_report_renders_in_a_browser(tmp_path):
    """``replay --report``'s page opened from file:// in Chromium: laid out, verdict-coloured, its
    findings and charts shown, and nothing fetched from anywhere."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (scripts/install_chromium.sh)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra has it)")
    from test_report import spliced_session

    out = tmp_path / "report.html"
    assert main(["replay", str(spliced_session(tmp_path)), "--report", str(out)]) == 0
    fetched: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, env=_browser_env(tmp_path))
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.route(
            "**/*",
            lambda r: (
                r.continue_() if r.request.url.startswith("file://") else fetched.append(r.request.url) or r.abort()
            ),
        )
        page.goto(out.as_uri(), wait_until="load")
        assert page.title() == "specterm session spliced.jsonl"
        assert page.locator("li.finding").count() == 1
        charts = page.locator("svg")
        assert charts.count() == 4 and all(charts.nth(i).bounding_box()["width"] > 100 for i in range(4))
        correction = page.locator("pre .v-correction").first
        style = correction.evaluate("e => [getComputedStyle(e).color, getComputedStyle(e).fontWeight]")
        assert style == ["rgb(128, 0, 0)", "700"]  # the terminal's red, bold (render.VERDICT_STYLES)
        assert "How many orders above 100? <script>" in page.inner_text("body")  # shown, not run
        browser.close()
    assert fetched == []
