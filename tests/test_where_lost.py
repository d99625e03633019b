"""Acceptance by region of a structured output, and where corrections cluster (``specterm/regions.py``),
on the real structured requests of the shipped sample sessions."""

from __future__ import annotations

import gc
import json
import re
from pathlib import Path

import pytest

from specterm.cli import main
from specterm.regions import REGIONS, SHORT, JsonRegions, word_class
from specterm.session import read_session
from specterm.session.fast_summary import summarize_file
from specterm.stats import summarize

SAMPLES = Path(__file__).resolve().parent.parent / "sample_sessions"
STRUCTURED = ["toolcall_high_acceptance", "sql_agent_multistep", "attach_vllm_serve", "compare_agent"]


@pytest.fixture(autouse=True)
def _unfreeze():
    yield
    gc.unfreeze()  # `replay` freezes the GC for its events


# A different algorithm from the lexer's: regexes over the whole text, a string being a key when the
# next non-blank character is ':' (lookahead, where the lexer keeps state).
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d[\d.eE+-]*|true|false|null|[{}\[\],:]|\s+')


def _char_regions(text: str) -> list[str]:
    out = ["free"] * len(text)
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=len(text))
    pos, depth = start, 0
    while pos < len(text):
        m = _JSON_TOKEN.match(text, pos)
        if m is None or (depth == 0 and pos > start):
            break  # past the document: free text
        tok = m.group()
        region = "structure"
        if tok[0] == '"':
            key = text[m.end() :].lstrip().startswith(":")
            region = "structure" if key else "string"
            for i in range(m.start() + 1, m.end() - 1):
                out[i] = region
            out[m.start()] = out[m.end() - 1] = "structure"
        else:
            if tok[0] in "-0123456789":
                region = "number"
            depth += tok in "{[" and 1 or (-1 if tok in "}]" else 0)
            for i in range(m.start(), m.end()):
                out[i] = region
        pos = m.end()
    return out


def _recount(events, structured: set[str]) -> dict[str, dict[str, int]]:
    pieces: dict[str, list] = {}
    for e in events:
        if e.type == "spec_step" and e.request_id in structured:
            pieces.setdefault(e.request_id, []).extend(e.tokens)
    counts: dict[str, dict[str, int]] = {}
    for tokens in pieces.values():
        chars = _char_regions("".join(t.text for t in tokens))
        pos = 0
        for tok in tokens:
            span = chars[pos : pos + len(tok.text)]
            pos += len(tok.text)
            region = next((r for r in span if r != "structure"), "structure")
            region = "forced" if tok.forced else region
            counts.setdefault(region, {}).setdefault(tok.verdict, 0)
            counts[region][tok.verdict] += 1
    return counts


@pytest.mark.parametrize("name", STRUCTURED)
def test_region_counts_match_a_direct_recount_and_cover_every_token_once(name):
    events = read_session(SAMPLES / f"{name}.jsonl").events
    structured = {e.request_id for e in events if e.type == "request_started" and e.params.get("json_schema")}
    assert structured
    summary = summarize(events)
    where = summary.session.where
    assert where.by_region == _recount(events, structured)
    # every emitted token of a structured request lands in exactly one region; no other token does
    tokens = sum(summary.requests[r].stats.tokens for r in structured)
    assert sum(sum(c.values()) for c in where.by_region.values()) == tokens
    for rid, req in summary.requests.items():
        assert bool(req.stats.where.by_region) == (rid in structured and req.stats.tokens > 0)


def test_the_tool_call_regions_are_what_the_tokens_spell():
    s = summarize(read_session(SAMPLES / "toolcall_high_acceptance.jsonl").events).session
    # {"tool":"query_sql","arguments":{"sql":"SELECT id, … LIMIT 19"}}: the SQL is one string value
    assert {r: sum(c.values()) for r, c in s.where.by_region.items()} == {"structure": 11, "string": 39, "forced": 4}
    assert s.where.by_region["string"] == {"accepted": 28, "bonus": 8, "correction": 3}
    assert s.where.region_acceptance() == {"structure": 1.0, "string": pytest.approx(28 / 31), "forced": 1.0}


def test_region_counts_are_the_rows_of_the_region_line():
    """``region_counts`` (the acceptance panel's rows) counts from ``by_region``; the rate is
    ``region_acceptance``'s and the replay's line says the same figures."""
    where = summarize(read_session(SAMPLES / "attach_vllm_serve.jsonl").events).session.where
    rows = where.region_counts()
    assert [r for r, *_ in rows] == [r for r in REGIONS if r in where.by_region]
    for region, rate, verified, tokens in rows:
        counts = where.by_region[region]
        assert verified == counts.get("accepted", 0) + counts.get("correction", 0)
        assert tokens == sum(counts.values())
        assert rate == where.region_acceptance()[region]
        shown = "–" if rate is None else f"{rate:.0%}"
        assert f"{REGIONS[region]} {shown} of {verified} ({tokens} tokens)" in where.region_line()
    assert any(rate is None for _, rate, _, _ in rows)  # free text and forced: tokens, no verified draft
    assert SHORT.keys() == REGIONS.keys()


def test_the_lexer_regions():
    lex = JsonRegions()
    pieces = ["<tool", ">\n", '{"', "k", '":', ' "', "v\\", '"', 'al",', ' "n":', " -1", "2.5e3", ",", ' "b":', " true"]
    pieces += ["}", "\n", "done"]
    got = [lex.feed(p) for p in pieces]
    assert got[:8] == ["free", "free", "structure", "structure", "structure", "structure", "string", "string"]
    assert got[8:] == ["string", "structure", "number", "number", "structure", "structure", "structure"] + [
        "structure",
        "free",
        "free",
    ]
    lex = JsonRegions()
    assert [lex.feed(p) for p in ['[{"a":[1', ",", '"x"', "]}]"]] == ["number", "structure", "string", "structure"]


def test_word_classes():
    assert [word_class(t) for t in ["6", "2026-12-01", " ,", " Tokyo", " orders", "  ", ""]] == [
        "numbers and dates",
        "numbers and dates",
        "punctuation",
        "capitalised words",
        "words",
        "whitespace",
        "where the output ends",
    ]


def test_corrections_cluster_on_the_tool_calls_numbers():
    s = summarize(read_session(SAMPLES / "toolcall_high_acceptance.jsonl").events).session
    top = s.where.top_corrections()
    assert [(t["context"], t["count"]) for t in top] == [
        ("numbers and dates in string values", 2),
        ("words in string values", 1),
    ]
    # ' > 653': the draft guessed 2 then 3 where the target wrote 6 then 5
    assert top[0]["examples"][0] == {"request_id": "ef359d5b", "before": " ", "draft": "2", "target": "6"}
    assert sum(s.where.corrections.values()) == s.by_verdict["correction"]


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*.jsonl")), ids=lambda p: p.stem)
def test_the_fast_summary_counts_the_same_regions_and_contexts(path):
    _, fast = summarize_file(path)
    slow = summarize(read_session(path).events)
    for key in ("by_region", "region_acceptance", "correction_contexts"):
        assert fast.session.as_dict()[key] == slow.session.as_dict()[key]
    assert fast.as_dict() == slow.as_dict()


def test_replay_summary_shows_regions_and_where_the_draft_loses(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # one table row per line
    path = str(SAMPLES / "toolcall_high_acceptance.jsonl")
    assert main(["replay", path, "--summary"]) == 0
    out = capsys.readouterr().out
    assert "acceptance by region" in out and "string values 90% of 31 (39 tokens)" in out
    assert "the draft gets numbers and dates in string values wrong: 2 of 3 corrections" in out
    assert main(["replay", path, "--summary", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)["session"]
    assert s["by_region"]["forced"] == {"accepted": 3, "bonus": 1}
    assert s["correction_contexts"][0]["context"] == "numbers and dates in string values"


def test_compare_table_has_acceptance_by_region_per_side():
    from specterm.bench.compare_tally import CompareTally

    data = read_session(SAMPLES / "compare_agent.jsonl")
    rows = CompareTally(data.header).add_all(data.events).region_rows()
    assert rows == [
        ("acceptance: keys & punctuation", "100.0 %", "0.0 %"),
        ("acceptance: string values", "88.9 %", "92.9 %"),
        ("acceptance: grammar-forced", "100.0 %", "–"),
    ]
