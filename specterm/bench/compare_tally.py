"""What a ``specterm compare`` session says, from its events alone: one ``SessionSummary`` per side,
each side's runs (one per round), whether greedy outputs agree, and who won.

The live command, its headless table, the split view and ``specterm replay`` of a compare session
all feed the same lane-tagged events (``BaseEvent.lane``) through a ``CompareTally``, so every
number agrees everywhere and a replay shows exactly what the live run showed. No textual here.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from specterm.events import BaseEvent, SessionEnded, SessionStarted, SpecStep, UserMessage
from specterm.regions import REGIONS
from specterm.stats import SessionSummary, fmt_opt

LANES = ("a", "b")


def is_compare(header: SessionStarted | None) -> bool:
    """A ``specterm compare`` recording (its header carries both sides' configurations)."""
    return header is not None and isinstance(header.config.get("compare"), dict)


def side_labels(header: SessionStarted) -> dict[str, str]:
    labels = header.config.get("compare", {}).get("labels", {})
    return {lane: str(labels.get(lane, lane.upper())) for lane in LANES}


@dataclass
class Run:
    """One side's answer to the request in one round: from its ``user_message`` to its last event."""

    start_t: float
    end_t: float
    token_ids: list[int] = field(default_factory=list)
    done: bool = False
    """The run can no longer grow: a later run (either side) started or the session ended. Only done
    runs are compared, so a side still streaming its answer is never reported as differing."""

    @property
    def wall_s(self) -> float:
        return max(self.end_t - self.start_t, 0.0)


@dataclass
class Side:
    lane: str
    label: str
    summary: SessionSummary = field(default_factory=SessionSummary)
    runs: list[Run] = field(default_factory=list)

    @property
    def wall_s(self) -> float | None:
        return sum(r.wall_s for r in self.runs) if self.runs else None

    @property
    def median_step_s(self) -> float | None:
        steps = self.summary.step_wall_s
        return statistics.median(steps) if steps else None


@dataclass(frozen=True)
class Mismatch:
    round: int
    position: int
    """Index of the first differing output token (a shorter output counts as differing at its end)."""
    a: int | None
    b: int | None

    def message(self, labels: dict[str, str]) -> str:
        return (
            f"GREEDY OUTPUTS DIFFER in round {self.round + 1} at output token {self.position}: "
            f"{labels['a']} gave {self.a}, {labels['b']} gave {self.b}; both sides are lossless at "
            "temperature 0, so this is a bug somewhere (or bf16 rounding: rerun with --dtype float32)"
        )


class CompareTally:
    """Feed it the session's events (``add``); read ``sides``, ``mismatch`` and ``verdict``."""

    def __init__(self, header: SessionStarted) -> None:
        self.header = header
        spec = header.config.get("compare", {})
        self.greedy = float(spec.get("temperature", 0.0) or 0.0) == 0.0
        labels = side_labels(header)
        self.sides = {lane: Side(lane, labels[lane]) for lane in LANES}
        self.labels = labels

    def add(self, event: BaseEvent) -> None:
        if isinstance(event, SessionEnded):
            self.close()
        side = self.sides.get(event.lane or "")
        if side is None:  # untagged events (session_ended, GPU samples) belong to neither side
            return
        side.summary.add(event)
        if isinstance(event, UserMessage):
            self.close()  # the sides run one after the other: a new run means every earlier one ended
            side.runs.append(Run(event.t, event.t))
            return
        if not side.runs:
            return
        run = side.runs[-1]
        run.end_t = max(run.end_t, event.t)
        if isinstance(event, SpecStep):
            run.token_ids.extend(tok.id for tok in event.tokens)

    def add_all(self, events) -> CompareTally:
        for event in events:
            self.add(event)
        return self

    def close(self) -> None:
        """Every run so far has ended (the compare run returned, or its session ended)."""
        for side in self.sides.values():
            for run in side.runs:
                run.done = True

    @property
    def rounds_done(self) -> int:
        return min(sum(r.done for r in s.runs) for s in self.sides.values())

    @property
    def mismatch(self) -> Mismatch | None:
        """The first greedy divergence between the sides' finished rounds (``None`` at T > 0)."""
        if not self.greedy:
            return None
        a, b = self.sides["a"].runs, self.sides["b"].runs
        for rnd in range(self.rounds_done):
            ta, tb = a[rnd].token_ids, b[rnd].token_ids
            if ta == tb:
                continue
            pos = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
            return Mismatch(rnd, pos, ta[pos] if pos < len(ta) else None, tb[pos] if pos < len(tb) else None)
        return None

    def verdict(self) -> str:
        """The winner line: by total wall time over the rounds both sides finished."""
        n = self.rounds_done
        if n == 0:
            return "no finished round yet"
        walls = {lane: sum(r.wall_s for r in s.runs[:n]) for lane, s in self.sides.items()}
        if min(walls.values()) <= 0:
            return "no timing recorded"
        fast, slow = sorted(LANES, key=lambda lane: walls[lane])
        ratio = walls[slow] / walls[fast]
        if ratio < 1.02:
            return f"a tie: {self.labels['a']} and {self.labels['b']} within 2 % ({n} round{'s' * (n > 1)})"
        return (
            f"{fast.upper()} ({self.labels[fast]}) wins: {ratio:.2f}× faster, wall "
            f"{walls[fast]:.2f} s vs {walls[slow]:.2f} s over {n} round{'s' * (n > 1)}"
        )

    def rows(self) -> list[tuple[str, str, str]]:
        """(figure, side A, side B) for the side-by-side table; every figure from ``stats``."""
        a, b = self.sides["a"], self.sides["b"]

        def both(fn) -> tuple[str, str]:
            return fn(a), fn(b)

        def pct(s: Side) -> str:
            rate = s.summary.session.acceptance_rate
            return fmt_opt(None if rate is None else 100 * rate, ".1f") + (" %" if rate is not None else "")

        def ms(value: float | None) -> str:
            return fmt_opt(None if value is None else 1000 * value, ".1f") + (" ms" if value is not None else "")

        def secs(value: float | None) -> str:
            return fmt_opt(value, ".2f") + (" s" if value is not None else "")

        return [
            ("configuration", a.label, b.label),
            ("rounds", *both(lambda s: str(len(s.runs)))),
            ("tokens", *both(lambda s: str(s.summary.session.tokens))),
            ("acceptance", *both(pct)),
            ("mean acceptance length", *both(lambda s: fmt_opt(s.summary.session.mean_acceptance_length))),
            ("per-step latency (median)", *both(lambda s: ms(s.median_step_s))),
            ("decode tok/s", *both(lambda s: fmt_opt(s.summary.decode_tokens_per_s(), ".1f"))),
            ("wall", *both(lambda s: secs(s.wall_s))),
        ]

    def region_rows(self) -> list[tuple[str, str, str]]:
        """(acceptance in a region, A, B) for the regions either side's structured output reached
        (``regions.py``): the CLI table's, after ``rows``; the split view keeps its compact rows."""
        wheres = {lane: s.summary.session.where for lane, s in self.sides.items()}
        rates = {lane: w.region_acceptance() for lane, w in wheres.items()}

        def cell(lane: str, region: str) -> str:
            rate = rates[lane].get(region)
            return "–" if rate is None else f"{100 * rate:.1f} %"

        return [
            (f"acceptance: {label}", cell("a", region), cell("b", region))
            for region, label in REGIONS.items()
            if any(region in w.by_region for w in wheres.values())
        ]

    def as_dict(self) -> dict[str, Any]:
        mismatch = self.mismatch
        return {
            "sides": {
                lane: {
                    "label": s.label,
                    "runs": [r.wall_s for r in s.runs],
                    "wall_s": s.wall_s,
                    "median_step_s": s.median_step_s,
                    "decode_tokens_per_s": s.summary.decode_tokens_per_s(),
                    **s.summary.session.as_dict(),
                }
                for lane, s in self.sides.items()
            },
            "verdict": self.verdict(),
            "greedy_identical": None if not self.greedy else mismatch is None,
            "mismatch": None if mismatch is None else mismatch.message(self.labels),
        }
