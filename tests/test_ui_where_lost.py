"""Where the draft loses, in the dashboard's acceptance panel (issue 44 item 2): acceptance by region
of a structured output and where the target's corrections cluster, on recorded sessions fed to the app
as the snapshots feed them; the panel's lines read as drawn on screen (``panel_lines``)."""

from __future__ import annotations

import asyncio

import pytest
from test_ui_attach import apply, panel_lines
from test_ui_snapshots import NARROW, WIDE, attached, live, sample_session

from specterm.events import SpecStep
from specterm.regions import REGIONS, SHORT
from specterm.stats import fmt_opt
from specterm.ui.widgets.acceptance_panel import AcceptancePanel

STRUCTURED = ["toolcall_high_acceptance.jsonl", "sql_agent_multistep.jsonl", "attach_vllm_serve.jsonl"]
"""The samples with requests under a JSON schema (``params.json_schema``)."""


def shown(events, size, *, attach=False):
    """(the session's summary as the app counted it, the acceptance panel's lines on screen, its
    inner width, the request its request column shows) after ``events``."""

    async def main():
        app = attached(size) if attach else live()
        async with app.run_test(size=size) as pilot:
            await apply(pilot, events)
            panel = app.query_one(AcceptancePanel)
            return app.state.summary, panel_lines(panel), panel.inner_width, app.state.current_request

    return asyncio.run(main())


def recorded(name):
    data = sample_session(name)
    return [data.header, *data.events]


def region_rows(lines):
    """Region label → the cells after it, from the "by region" table."""
    start = next(i for i, line in enumerate(lines) if line.startswith("by region (session)"))
    rows = {}
    for line in lines[start + 1 :]:
        label = next((label for label in REGIONS.values() if line.startswith(label)), None)
        if label is None:
            break
        rows[label] = line[len(label) :].split()
    return rows


@pytest.mark.parametrize("name", STRUCTURED)
def test_wide_shows_each_regions_rate_and_where_corrections_cluster(name):
    summary, lines, inner, _ = shown(recorded(name), WIDE, attach=name.startswith("attach"))
    where = summary.session.where
    rates = where.region_acceptance()
    assert rates
    # one row per region with tokens: its rate, the verified drafts it is of, its tokens
    want = {}
    for region, rate in rates.items():
        counts = where.by_region[region]
        verified = counts.get("accepted", 0) + counts.get("correction", 0)
        want[REGIONS[region]] = [fmt_opt(rate), str(verified), str(sum(counts.values()))]
    assert region_rows(lines) == want
    # the most frequent correction context, whole, and its first example: the token before, the
    # draft's, the target's
    top = where.top_corrections(1)[0]
    at = lines.index(f"{top['count']} {top['context']}")
    ex = top["examples"][0]
    assert lines[at + 1].split("after ", 1)[1] == f"{ex['before']!r}: {ex['draft']!r} → {ex['target']!r}"
    assert lines[at - 1].startswith(f"corrections {sum(where.corrections.values())} ")
    for line in lines:
        assert len(line) <= inner and "…" not in line, line


@pytest.mark.parametrize("attach", [False, True], ids=["live", "attach"])
@pytest.mark.parametrize("name", STRUCTURED)
def test_80x24_keeps_every_row_whole_and_adds_the_worst_region_where_it_fits(name, attach):
    """The narrow row: the panel's rows are all there, uncut, and under them the region with the
    lowest acceptance, in the line the panel has left (16 cells inside in attach, 19 otherwise)."""
    summary, lines, inner, current = shown(recorded(name), NARROW, attach=attach)
    session, last = summary.session, summary.requests[current].stats
    for line in lines:
        assert len(line) <= inner and "…" not in line, line
    assert lines[0].split() == ["req", "sess"]
    assert {line.split()[0]: line.split()[1:] for line in lines[1:4]} == {
        "rate": [fmt_opt(last.acceptance_rate), fmt_opt(session.acceptance_rate)],
        "len": [fmt_opt(last.mean_acceptance_length), fmt_opt(session.mean_acceptance_length)],
        "tok": [str(last.tokens), str(session.tokens)],
    }
    assert lines[4].startswith("pos  ") and lines[5].startswith("step ")
    rated = {r: rate for r, rate in session.where.region_acceptance().items() if rate is not None}
    worst = min(rated, key=rated.get)
    assert lines[6].split() == ["min", SHORT[worst], fmt_opt(rated[worst])]
    assert len(lines) == 7


def test_80x24_leaves_the_worst_region_out_where_the_rows_fill_the_panel():
    """Grammar drafting adds the passes-per-token row: the seven lines are the panel's, no room."""
    events = [
        e.model_copy(update={"grammar_drafts": 1}) if isinstance(e, SpecStep) and e.drafted else e
        for e in recorded("toolcall_high_acceptance.jsonl")
    ]
    summary, lines, inner, _ = shown(events, NARROW, attach=True)
    assert summary.session.grammar_drafts and summary.session.where.region_acceptance()
    assert [line.split()[0] for line in lines] == ["req", "rate", "len", "tok", "pass", "pos", "step"]
    for line in lines:
        assert len(line) <= inner and "…" not in line, line


def test_plain_chat_shows_no_region_block():
    """An unstructured session: no region table wide, no region line narrow; its corrections' contexts
    (it has some) are still listed wide."""
    events = recorded("prose_low_acceptance.jsonl")
    summary, lines, _, _ = shown(events, WIDE)
    assert not summary.session.where.by_region and summary.session.where.corrections
    assert not any(line.startswith("by region") for line in lines)
    top = summary.session.where.top_corrections(1)[0]
    assert f"{top['count']} {top['context']}" in lines
    _, narrow, _, _ = shown(events, NARROW)
    assert not any(line.startswith("min") for line in narrow)


def test_nothing_at_all_before_a_structured_request_or_a_correction():
    """The same session up to its first correction: plain chat with every draft kept so far, so the
    panel ends at its per-step sparkline, with no heading under it."""
    events = recorded("prose_low_acceptance.jsonl")
    first = next(i for i, e in enumerate(events) if isinstance(e, SpecStep) and e.accepted < len(e.drafted))
    summary, lines, _, _ = shown(events[:first], WIDE)
    assert summary.session.steps and not summary.session.where.corrections
    assert [line for line in lines if line][-1].startswith("per step")


def test_the_models_text_in_an_example_is_inert():
    """A correction whose target token carries an escape sequence and Rich markup (as a hostile or
    broken model may write): the example shows both as text (whole where the panel is wide enough,
    cut at 36 cells), and no control character reaches the screen."""
    events = recorded("toolcall_high_acceptance.jsonl")
    first = next(i for i, e in enumerate(events) if isinstance(e, SpecStep) and e.accepted < len(e.drafted))
    step = events[first]
    hostile = "\x1b[2J[b]6"
    tokens = [t.model_copy(update={"text": hostile}) if t.verdict == "correction" else t for t in step.tokens]
    events[first] = step.model_copy(update={"tokens": tokens})

    async def main():
        app = live()
        async with app.run_test(size=WIDE) as pilot:
            await apply(pilot, events)
            panel = app.query_one(AcceptancePanel)
            return panel_lines(panel), panel.body(panel.text_styles, 60).plain.splitlines()

    lines, wider = asyncio.run(main())
    assert "  after ' FROM': ' orders' → '\\x1b[2J[b]6'" in wider  # markup not parsed, escape shown
    assert "  after ' FROM': ' order… → '\\x1b[2…" in lines  # the three tokens cut alike
    assert not any("\x1b" in line for line in lines + wider)
