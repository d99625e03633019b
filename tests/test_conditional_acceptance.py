"""Conditional acceptance per position (``SpecStats.conditional_per_position``): P(position i
accepted | every earlier position accepted), checked against a direct count over the steps of real
recorded sessions (a schema-constrained request and an agent turn), and through ``--summary``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specterm.cli import main
from specterm.events import SpecStep
from specterm.session import read_session
from specterm.stats import summarize

SAMPLES = Path(__file__).resolve().parent.parent / "sample_sessions"


def _direct(steps: list[SpecStep]) -> list[float | None]:
    """The definition, counted the slow way: of the drafts that verified a token at i with all
    before it accepted, the share whose i-th was accepted."""
    k_max = max((len(s.drafted) for s in steps), default=0)
    out: list[float | None] = []
    for i in range(k_max):
        reached = [s for s in steps if len(s.drafted) > i and s.accepted >= i]
        out.append(sum(s.accepted > i for s in reached) / len(reached) if reached else None)
    return out


@pytest.mark.parametrize("name", ["toolcall_high_acceptance", "sql_agent_multistep", "prose_low_acceptance"])
def test_conditional_matches_a_direct_count(name):
    events = read_session(SAMPLES / f"{name}.jsonl").events
    steps = [e for e in events if isinstance(e, SpecStep) and e.drafted]
    got = summarize(events).session.conditional_per_position
    assert got == pytest.approx(_direct(steps))
    # never below the unconditional rate: the denominator only shrinks
    unconditional = summarize(events).session.per_position
    assert all(c is None or c >= u - 1e-12 for c, u in zip(got, unconditional, strict=True))


def test_summary_shows_it(capsys):
    path = SAMPLES / "toolcall_high_acceptance.jsonl"
    assert main(["replay", str(path), "--summary", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["session"]["conditional_per_position"] == pytest.approx(
        summarize(read_session(path).events).session.conditional_per_position
    )
    assert main(["replay", str(path), "--summary"]) == 0
    assert "conditional" in capsys.readouterr().out


def test_acceptance_panel_shows_it_when_wide():
    from collections import defaultdict

    from rich.style import Style

    from specterm.ui.state import ViewState
    from specterm.ui.widgets.acceptance_panel import CONDITIONAL_WIDTH as WIDE
    from specterm.ui.widgets.acceptance_panel import AcceptancePanel

    state = ViewState("replay")
    for event in read_session(SAMPLES / "toolcall_high_acceptance.jsonl").events:
        state.add(event)
    panel = AcceptancePanel(state)
    styles = defaultdict(Style)
    wide, narrow = panel.body(styles, WIDE).plain, panel.body(styles, WIDE - 1).plain
    assert "given all before" in wide and "given all before" not in narrow
    row = next(line for line in wide.splitlines() if line.startswith(" 2 "))
    assert row.endswith("0.77 1.00")  # position 2: unconditional, then given position 1 accepted
