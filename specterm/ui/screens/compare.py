"""The compare split view: the request, a banner when greedy outputs differ, the two sides next to
each other, the winner line and the verdict legend."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Static

from specterm.bench.compare_tally import LANES, CompareTally
from specterm.render import inert
from specterm.ui.widgets.compare_side import CompareSide
from specterm.ui.widgets.legend import Legend


class CompareScreen(Screen):
    DEFAULT_CSS = """
    #compare-title { height: auto; padding: 0 1; text-style: bold; }
    #compare-status { height: 1; padding: 0 1; color: $foreground 60%; }
    #compare-banner { display: none; height: auto; padding: 0 1; background: $error; color: $text; text-style: bold; }
    #compare-banner.-shown { display: block; }
    #compare-sides { height: 1fr; }
    #compare-verdict { height: auto; padding: 0 1; text-style: bold; }
    #legend { height: 1; padding: 0 1; }
    """
    BINDINGS = [Binding("q", "app.quit", "quit")]

    def __init__(self, tally: CompareTally) -> None:
        super().__init__()
        self.tally = tally

    def compose(self) -> ComposeResult:
        spec = self.tally.header.config.get("compare", {})
        who = f"agent {spec['agent']}: " if spec.get("agent") else ""
        yield Static(f"compare · {who}{inert(str(spec.get('prompt', '')))}", id="compare-title", markup=False)
        yield Static("", id="compare-status", markup=False)
        yield Static("", id="compare-banner", markup=False)
        with Horizontal(id="compare-sides"):
            for lane in LANES:
                yield CompareSide(lane, self.tally.labels[lane])
        yield Static("", id="compare-verdict", markup=False)
        yield Legend(id="legend")
        yield Footer()

    def on_mount(self) -> None:
        self.set_status("")
        self.refresh_figures()
        start = getattr(self.app, "start_sources", None)  # the live run or the replayer
        if start is not None:
            start()

    def set_status(self, text: str) -> None:
        spec = self.tally.header.config.get("compare", {})
        fair = f"order {spec.get('order', '')} · fair: {spec.get('fairness', '')}"
        self.query_one("#compare-status", Static).update(f"{text} · {fair}" if text else fair)

    def side(self, lane: str) -> CompareSide:
        return self.query_one(f"#side-{lane}", CompareSide)

    def refresh_figures(self) -> None:
        """Per-side figures, the winner line and the mismatch banner, from the tally."""
        rows = self.tally.rows()[1:]
        for i, lane in enumerate(LANES):
            self.side(lane).show_stats([(row[0], row[1 + i]) for row in rows])
        self.query_one("#compare-verdict", Static).update(self.tally.verdict())
        mismatch = self.tally.mismatch
        banner = self.query_one("#compare-banner", Static)
        banner.set_class(mismatch is not None, "-shown")
        banner.update("" if mismatch is None else mismatch.message(self.tally.labels))
