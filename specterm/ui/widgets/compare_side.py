"""One side of the compare split view: its configuration, its verdict-styled transcript and its
figures (from the side's ``SessionSummary``, via ``CompareTally.rows``)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from specterm.render import inert
from specterm.ui.widgets.transcript import Transcript


class CompareSide(Vertical):
    DEFAULT_CSS = """
    CompareSide { width: 1fr; height: 1fr; border: round $foreground 30%; }
    CompareSide .side-title { height: 1; text-style: bold; padding: 0 1; }
    CompareSide Transcript { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    CompareSide .side-stats { height: auto; padding: 0 1; color: $foreground 80%; }
    """

    def __init__(self, lane: str, label: str) -> None:
        super().__init__(id=f"side-{lane}")
        self.lane, self.label = lane, label

    def compose(self) -> ComposeResult:
        yield Static(f"{self.lane.upper()} · {inert(self.label)}", classes="side-title", markup=False)
        yield Transcript(id=f"transcript-{self.lane}")
        yield Static("", classes="side-stats", markup=False)

    @property
    def transcript(self) -> Transcript:
        return self.query_one(Transcript)

    def show_stats(self, rows: list[tuple[str, str]]) -> None:
        """``rows``: (figure, this side's value); the configuration row is the title already."""
        width = max((len(name) for name, _ in rows), default=0)
        self.query_one(".side-stats", Static).update("\n".join(f"{name:<{width}}  {value}" for name, value in rows))
