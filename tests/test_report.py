"""``specterm replay FILE --report report.html`` (``specterm/session/report.py``): one valid,
self-contained page with the escaped transcript, one element per finding and the plots; an
unwritable path is one line and the session file is untouched. The browser check is in
``tests/test_serve.py`` (``test_report_renders_in_a_browser``)."""

from __future__ import annotations

import gc
from html.parser import HTMLParser
from pathlib import Path

import pytest

from specterm.cli import main
from specterm.events import EngineCounters, Finding, UserMessage, dump_event
from specterm.session import read_session

SAMPLES = Path(__file__).resolve().parent.parent / "sample_sessions"
ASKED = "How many orders above 100? <script>alert('x')</script> & \"more\""
VOID = {"meta", "br", "img", "hr", "input", "link"}


@pytest.fixture(autouse=True)
def _no_config(tmp_path, monkeypatch):
    (tmp_path / "none.toml").write_text("")
    monkeypatch.setenv("SPECTERM_CONFIG", str(tmp_path / "none.toml"))  # default thresholds
    yield
    gc.unfreeze()


def spliced_session(tmp_path: Path) -> Path:
    """The real tool-call session, asked a question full of markup, with its reconciliation failing
    (one mismatch finding) and a stale recorded finding the report must drop for the recomputed one."""
    data = read_session(SAMPLES / "toolcall_high_acceptance.jsonl")
    lines = [dump_event(data.header)]
    for e in data.events:
        if e.type == "request_started":
            lines.append(dump_event(UserMessage(t=e.t, request_id=e.request_id, text=ASKED)))
        if isinstance(e, EngineCounters):
            e = e.model_copy(update={"matched": False, "detail": "accepted 40 ours vs 41 vllm"})
            lines.append(dump_event(Finding(t=e.t, kind="loop", message="stale, recorded with other thresholds")))
        lines.append(dump_event(e))
    path = tmp_path / "spliced.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


class Page(HTMLParser):
    """Tags balanced, text collected, findings and charts counted."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.text: list[str] = []
        self.tags: dict[str, int] = {}
        self.findings = 0
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag == "li" and "finding" in (attrs.get("class") or "").split():
            self.findings += 1
        self.external += [v for k, v in attrs.items() if k in ("src", "href") and v and not v.startswith("#")]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    assert page.stack == [], page.stack
    return page


def test_report_is_one_valid_self_contained_page(tmp_path, capsys):
    session = spliced_session(tmp_path)
    before = session.read_bytes()
    out = tmp_path / "report.html"
    assert main(["replay", str(session), "--report", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"specterm: wrote {out}"
    html = out.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    page = parse(html)
    text = "".join(page.text)
    # the transcript, escaped in the source and whole in the text
    answer = "".join(t.text for e in read_session(session).events if e.type == "spec_step" for t in e.tokens)
    assert answer.startswith('{"tool":"query_sql"') and answer in text
    assert '{"tool"' not in html and "{&quot;tool" in html
    assert ASKED in text and "<script" not in html and page.tags.get("script") is None
    # one element per finding: the recomputed mismatch only (the stale recorded loop is dropped)
    assert page.findings == 1 and "mismatch" in text and "stale" not in text
    assert page.external == []  # no network: nothing to fetch
    assert page.tags["svg"] == 4  # by position, by region, k (no batch size recorded), latency
    for title in ("acceptance by position", "acceptance by region", "k and batch size", "step latency"):
        assert title in text
    assert "the draft gets numbers and dates in string values wrong" in text
    assert 'class="v-correction"' in html and ".v-correction{color:" in html
    assert session.read_bytes() == before


@pytest.mark.parametrize("where", ["missing-dir/report.html", "spliced.jsonl/report.html", "spliced.jsonl"])
def test_report_to_an_unwritable_path_is_one_line_and_the_session_is_untouched(tmp_path, capsys, where):
    session = spliced_session(tmp_path)
    before, mtime = session.read_bytes(), session.stat().st_mtime_ns
    assert main(["replay", str(session), "--report", str(tmp_path / where)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("specterm: error: ") and "report" in err[0], err
    assert session.read_bytes() == before and session.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in tmp_path.iterdir()) == ["none.toml", "spliced.jsonl"]  # no stray temp file


def test_report_of_every_sample_session_parses(tmp_path):
    from specterm.session.report import render_report

    for path in sorted(SAMPLES.glob("*.jsonl")):
        page = parse(render_report(read_session(path)))
        assert page.findings == 0, path.name  # the samples raise none (docs/diagnose.md)
        assert page.tags["svg"] >= 3 and page.tags["pre"] >= 1, path.name
