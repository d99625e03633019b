"""What the panels and header read: the shared ``SessionSummary`` plus the latest GPU readings.

Updated on the UI thread by the app for every drained event (cheap: counters only). Reset in place
when a replay rewinds, so widgets can hold a reference to it.
"""

from __future__ import annotations

from collections import deque

from specterm.events import BaseEvent, GpuSample, GpuStatus, RequestStarted, SessionStarted, SpecStep
from specterm.stats import SessionSummary

GPU_HISTORY = 120


class ViewState:
    def __init__(self, mode: str = "live") -> None:
        self.mode = mode
        """``live``, ``replay`` or ``attach``: the header badge."""
        self.pinned_request: str | None = None
        """The request the panels follow when the user picked one (``attach``); else the latest."""
        self.replica_filter: str | None = None
        """A fleet's replica whose requests alone the requests list shows (``FleetList``); None: all."""
        self.reset()

    def reset(self) -> None:
        self.summary = SessionSummary()
        self.session: SessionStarted | None = None
        self.current_request: str | None = None
        self.gpu_status: GpuStatus | None = None
        self.gpu: dict[int, GpuSample] = {}
        self.gpu_history: dict[int, deque[float]] = {}
        self.events = 0

    def add(self, ev: BaseEvent) -> None:
        self.events += 1
        self.summary.add(ev)
        if isinstance(ev, (SpecStep, RequestStarted)):
            self.current_request = self.pinned_request or ev.request_id
        elif isinstance(ev, GpuSample):
            self.gpu[ev.device] = ev
            hist = self.gpu_history.setdefault(ev.device, deque(maxlen=GPU_HISTORY))
            if ev.bw_util_pct is not None:
                hist.append(ev.bw_util_pct)
        elif isinstance(ev, GpuStatus):
            self.gpu_status = ev
        elif isinstance(ev, SessionStarted):
            self.session = ev
