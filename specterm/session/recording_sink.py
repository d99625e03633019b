"""The sink of an attach session (one server or a fleet): record, show, and run the detectors."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from specterm.events import BaseEvent, SessionStarted, Sink


class RecordingSink:
    """The attach session's sink: ``record`` (a ``Recorder`` made on the server's ``session_started``,
    by ``make_recorder(header)``) and then ``show``. Events before the header (connection lines) wait
    for it, so the recording opens with its header as every session file does."""

    def __init__(self, show: Sink, make_recorder: Callable[[SessionStarted], Any], diagnoser: Any = None) -> None:
        from specterm.diagnose import Diagnoser

        self.show, self._make = show, make_recorder
        self._feed = (diagnoser if diagnoser is not None else Diagnoser()).feed
        self.recorder: Any = None
        self._early: list[BaseEvent] = []
        self._header_seen = False
        self._lock = threading.Lock()

    def __call__(self, event: BaseEvent) -> None:
        with self._lock:
            if isinstance(event, SessionStarted):
                if self._header_seen:
                    return
                self._header_seen = True
                self.recorder = self._make(event)
                early, self._early = self._early, []
                for e in [event, *early]:
                    self._emit(e, record=e is not event)
                return
            if not self._header_seen:
                self._early.append(event)
                return
            self._emit(event)

    def _emit(self, event: BaseEvent, record: bool = True) -> None:
        if record and self.recorder is not None:
            self.recorder.write(event)
        self.show(event)
        for finding in self._feed(event):  # what the detectors found: recorded and shown too
            self._emit(finding)

    def close(self) -> None:
        with self._lock:
            for e in self._early:  # a server that never said who it is: still show what happened
                self.show(e)
            self._early = []
            if self.recorder is not None:
                self.recorder.close()
