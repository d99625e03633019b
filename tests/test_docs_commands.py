"""Every command the docs show still parses (issue 36: "every command in the docs still runs").

Nothing here runs a command (an engine takes minutes): each ``specterm ...`` line goes through
specterm's real argparse parser (``specterm.cli.build_parser``, the one ``main`` uses) without its
handler, and each ``python scripts/NAME.py ...`` / ``python benchmarks/NAME.py ...`` line must name a
file that exists and use only flags its ``--help`` lists.

Where commands are found, in README.md and docs/*.md:

- fenced blocks tagged bash, sh, shell, zsh or console: every line is a command (a leading ``$ `` is
  dropped); untagged and ``text`` fences: only the lines that start with ``$ `` (the rest is output).
  Indented code blocks are not read: the docs have none, and a test below keeps it so.
- inline code spans that start with ``specterm``, ``.venv/bin/specterm`` or ``python scripts/`` /
  ``python benchmarks/``. Prose names a command or a flag without its value (``specterm models``,
  ``--k``), so for these a missing argument or a missing flag value is not an error; an unknown
  command, an unknown flag or a bad value still is.

How a line is read, as a shell would: ``\\`` continues it on the next line; ``#`` at the start of a
word starts a comment (a comment's own commands are not checked); ``|``, ``||``, ``&&``, ``;`` and
``&`` separate commands, and each one that is specterm or a script is checked (``> file`` redirects
are dropped); leading ``VAR=value`` words are skipped; ``$(...)`` is checked as a command of its own
and stands for one word in its place; ``$P/target`` and other variables stay as written (a path to
argparse).

Placeholders, the words a reader is meant to replace: ``...``, ``…``, ``<anything>``, a word that
starts with ``$``, and an upper-case word (``MODEL``, ``DIR``, ``FILE.gguf``, ``N``). ``[...]`` marks
an optional part: the brackets are dropped and what is inside is checked. A placeholder is fine
wherever argparse takes a string; where it wants a number or one of some choices, an error that
quotes the placeholder is not counted. Any other argparse error is reported with its file:line.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from specterm.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_FENCES = {"bash", "sh", "shell", "zsh", "console"}
PROMPT_FENCES = {"", "text"}  # output with `$ `-prompted commands in it
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")"}
REDIRECTS = {">", ">>", "<", ">|", "&>", ">&"}
PLACEHOLDER = re.compile(r"^(\.\.\.|…|<[^<>]+>|\$.*|[A-Z][A-Z0-9_]*(\.[A-Za-z0-9]+)?)$")
COMMAND_START = r"^((\S*/bin/)?specterm(\s|$)|(\S*/bin/)?python3? (scripts|benchmarks)/)"
"""How a command this test checks begins (a specterm command or a repo script)."""
HELP_TIMEOUT_S = 20
"""A script whose ``--help`` takes longer (heavy imports before argparse) is skipped, not failed."""


@dataclass(frozen=True)
class DocCommand:
    where: str  # "docs/x.md:12"
    kind: str  # "specterm" or "script"
    argv: tuple[str, ...]  # specterm: its arguments; script: (path, arguments...)
    inline: bool  # from an inline code span in prose
    text: str  # the command as the docs write it (after joining continuations)


def split_shell(text: str) -> tuple[list[list[str]], list[str]]:
    """The simple commands in one shell line (words, redirects dropped), and the texts of its
    ``$(...)`` substitutions (each replaced by the word ``$SUBST``)."""
    out: list[str] = []
    subs: list[str] = []
    quote = None
    i = 0
    while i < len(text):
        c = text[i]
        word_start = i == 0 or text[i - 1].isspace() or (not quote and text[i - 1] in "|&;()")
        if c == "\\" and quote != "'" and i + 1 < len(text):
            out.append(text[i : i + 2])
            i += 2
            continue
        if c == "$" and quote != "'" and text.startswith("$(", i):
            end = _closing_paren(text, i + 2)
            subs.append(text[i + 2 : end])
            out.append("$SUBST")
            i = end + 1
            continue
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and word_start:
            break
        elif c == "[" and word_start:  # an optional part: check what it holds
            i += 1
            continue
        elif c == "]" and (i + 1 == len(text) or text[i + 1].isspace()):
            i += 1
            continue
        out.append(c)
        i += 1
    lexer = shlex.shlex("".join(out), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # comments are cut above, where `#` starts a word (not in http://x#y)
    commands: list[list[str]] = [[]]
    words = list(lexer)
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
        elif word in SEPARATORS:
            commands.append([])
        elif word in REDIRECTS:
            skip_next = True  # the file it names
        else:
            commands[-1].append(word)
    return [c for c in commands if c], subs


def _closing_paren(text: str, start: int) -> int:
    depth, quote = 1, None
    for j in range(start, len(text)):
        c = text[j]
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"no closing parenthesis for $( in {text!r}")


def classify(words: list[str]) -> tuple[str, tuple[str, ...]] | None:
    """("specterm", args) or ("script", (path, args...)) for a command the docs show; None for others."""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]  # VAR=value prefixes
    if not words:
        return None
    prog, rest = words[0], words[1:]
    if prog == "specterm" or prog.endswith("/bin/specterm"):
        return "specterm", tuple(rest)
    if re.fullmatch(r"(.*/bin/)?python3?", prog):
        if rest[:2] == ["-m", "specterm"]:
            return "specterm", tuple(rest[2:])
        if rest and rest[0].endswith(".py") and rest[0].split("/")[0] in ("scripts", "benchmarks"):
            return "script", tuple(rest)
    return None


def fenced(text: str):
    """(line number, line, the fence's tag) for each line, the tag None outside a fence; the fence
    lines themselves are left out. A fence closes on a fence of the same character at least as long
    (so a ````text block may show a ```python one)."""
    fence: str | None = None
    lang = ""
    for lineno, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s*(`{3,}|~{3,})\s*([^`\s]*)\s*$", line)
        if m and fence is None:
            fence, lang = m.group(1), m.group(2).lower()
        elif m and not m.group(2) and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
            fence = None
        else:
            yield lineno, line, (lang if fence is not None else None)


def commands_in(path: Path, text: str) -> list[DocCommand]:
    rel = path.relative_to(REPO) if path.is_absolute() and path.is_relative_to(REPO) else path
    found: list[DocCommand] = []

    def add(lineno: int, line: str, inline: bool) -> None:
        pending = [line]
        while pending:
            simple, subs = split_shell(pending.pop())
            pending.extend(subs)
            for words in simple:
                got = classify(words)
                if got:
                    found.append(DocCommand(f"{rel}:{lineno}", got[0], got[1], inline, line))

    held: tuple[int, str] | None = None  # a command continued on the next line (`\\`)
    open_span: tuple[int, str] | None = None  # an inline span that goes on to the next line
    for lineno, line, lang in fenced(text):
        if lang is None:
            start, prose = lineno, line
            if open_span and line.strip():
                start, prose = open_span[0], open_span[1] + " " + line
            open_span = None
            carried = len(prose) - len(line)  # the part from earlier lines
            for m in re.finditer(r"`([^`]+)`", prose):
                if re.match(COMMAND_START, m.group(1).strip()):
                    add(start if m.start() < carried else lineno, m.group(1).strip(), inline=True)
            if prose.count("`") % 2:  # a span left open: it goes on in the next line of its paragraph
                cut = prose.rindex("`")
                open_span = (start if cut < carried else lineno, prose[cut:])
            continue
        command = line.strip()
        if held:
            lineno, command = held[0], held[1] + " " + command
            held = None
        elif lang in PROMPT_FENCES and not command.startswith("$ "):
            continue  # output
        elif lang not in SHELL_FENCES and lang not in PROMPT_FENCES:
            continue  # python, toml ...
        command = command.removeprefix("$ ")
        if command.endswith("\\"):
            held = (lineno, command[:-1])
        else:
            add(lineno, command, inline=False)
    return found


def doc_commands() -> list[DocCommand]:
    return [c for path in DOCS for c in commands_in(path, path.read_text(encoding="utf-8"))]


COMMANDS = doc_commands()


def parse_error(parser, cmd: DocCommand) -> str | None:
    """argparse's message for a command it refuses (None if it parses, or if the refusal is allowed)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            parser.parse_args(list(cmd.argv))
    except SystemExit as exc:
        if exc.code in (0, None):  # --help / --version
            return None
        message = err.getvalue().strip().splitlines()[-1]
        message = message.split(": error: ", 1)[-1]
        if any(PLACEHOLDER.match(w) and f"'{w}'" in message for w in cmd.argv):
            return None
        if cmd.inline and (
            message.startswith("the following arguments are required") or "expected one argument" in message
        ):
            return None
        return message
    return None


def test_the_docs_show_commands_to_check():
    """A reader that finds nothing checks nothing: guard the extraction itself."""
    specterm = [c for c in COMMANDS if c.kind == "specterm"]
    assert len([c for c in specterm if not c.inline]) >= 30, COMMANDS
    assert len([c for c in specterm if c.inline]) >= 30, COMMANDS
    assert len([c for c in COMMANDS if c.kind == "script"]) >= 5, COMMANDS


def test_every_specterm_command_in_the_docs_parses():
    parser = build_parser()
    failures = [
        f"{c.where}: {c.text}\n    {msg}" for c in COMMANDS if c.kind == "specterm" and (msg := parse_error(parser, c))
    ]
    assert not failures, "commands in the docs that specterm's parser refuses:\n" + "\n".join(failures)


def test_the_docs_have_no_indented_code_blocks_with_commands():
    """The reader above does not read indented code blocks; a command in one would go unchecked."""
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in DOCS
        for n, line, lang in fenced(path.read_text(encoding="utf-8"))
        if lang is None and re.match(r"^( {4,}|\t)(\$ )?" + COMMAND_START.removeprefix("^"), line)
    ]
    assert not found, "put these commands in a ```bash fence, where this test reads them:\n" + "\n".join(found)


SCRIPTS = sorted({c.argv[0] for c in COMMANDS if c.kind == "script"})


@pytest.fixture(scope="module")
def script_help() -> dict[str, str | None]:
    """Each script's ``--help`` (None where it took over HELP_TIMEOUT_S), all started at once."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    procs = {
        s: subprocess.Popen(
            [sys.executable, s, "--help"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for s in SCRIPTS
        if (REPO / s).is_file()
    }
    helps: dict[str, str | None] = {}
    for script, proc in procs.items():
        try:
            out, _ = proc.communicate(timeout=HELP_TIMEOUT_S)
            helps[script] = out if proc.returncode == 0 else f"(--help exited {proc.returncode})\n{out}"
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            helps[script] = None
    return helps


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_the_docs_run_exists_and_takes_its_flags(script, script_help):
    uses = [c for c in COMMANDS if c.kind == "script" and c.argv[0] == script]
    assert (REPO / script).is_file(), f"{script} does not exist; the docs run it at " + ", ".join(c.where for c in uses)
    help_text = script_help[script]
    if help_text is None:
        pytest.skip(f"{script} --help took over {HELP_TIMEOUT_S} s")
    unknown = [
        f"{c.where}: {flag}"
        for c in uses
        for flag in dict.fromkeys(w.split("=", 1)[0] for w in c.argv[1:] if w.startswith("--") and w != "--")
        if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text)
    ]
    assert not unknown, f"flags the docs give {script} that its --help does not list:\n" + "\n".join(unknown)


SAMPLE = """\
Some prose with `specterm bench --k` and `specterm models` in it, and `specterm run
--agent sql_analyst` over two lines.

```bash
$ specterm run --target $P/target \\
  --draft $P/draft "..."   # a comment with specterm chat --nope
FOO=1 .venv/bin/specterm attach --json > out.jsonl && python scripts/x.py [--flag N]
specterm chat --target "$(specterm models fetch smollm2 | tail -1)" http://x#y
```

````text
$ specterm doctor
specterm: error: this is output
```python
specterm not a command
```
````
"""


def test_the_reader_takes_a_line_as_a_shell_would():
    got = [(c.where, c.kind, c.argv, c.inline) for c in commands_in(Path("SAMPLE.md"), SAMPLE)]
    assert got == [
        ("SAMPLE.md:1", "specterm", ("bench", "--k"), True),
        ("SAMPLE.md:1", "specterm", ("models",), True),
        ("SAMPLE.md:1", "specterm", ("run", "--agent", "sql_analyst"), True),
        ("SAMPLE.md:5", "specterm", ("run", "--target", "$P/target", "--draft", "$P/draft", "..."), False),
        ("SAMPLE.md:7", "specterm", ("attach", "--json"), False),
        ("SAMPLE.md:7", "script", ("scripts/x.py", "--flag", "N"), False),
        ("SAMPLE.md:8", "specterm", ("chat", "--target", "$SUBST", "http://x#y"), False),
        ("SAMPLE.md:8", "specterm", ("models", "fetch", "smollm2"), False),
        ("SAMPLE.md:12", "specterm", ("doctor",), False),
    ]


def test_a_placeholder_may_stand_where_a_number_goes_but_a_wrong_flag_fails():
    parser = build_parser()

    def check(argv, inline=False):
        return parse_error(parser, DocCommand("x.md:1", "specterm", tuple(argv), inline, ""))

    assert check(["run", "-k", "N", "PROMPT"]) is None
    assert "invalid int value" in check(["run", "-k", "four", "PROMPT"])
    assert "unrecognized arguments" in check(["run", "--no-such-flag", "PROMPT"])
    assert "invalid choice" in check(["no-such-command"])
    assert check(["bench", "--k"], inline=True) is None
    assert "expected one argument" in check(["bench", "--k"])
