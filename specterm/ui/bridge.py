"""The pump that carries events from source threads (engine, replayer, NVML sampler) to the UI.

Sources call ``push`` from any thread at any rate. Events go into a ``deque`` (appends and
``popleft`` are thread-safe); a flag records whether a wake-up message is already on its way to the
UI. Only the producer that flips the flag posts one ``EventsReady``; the UI clears the flag *before*
draining, so an event appended during a drain either gets drained now or causes the next wake-up —
never lost, and never one message per event. At thousands of events per second the UI sees one
message per frame or so, and updates its widgets once per batch.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

RESET = object()
"""Marker pushed in-band when a replay rewinds: everything before it is discarded by the UI."""


class EventBridge:
    def __init__(self, wake: Callable[[], None]) -> None:
        """``wake`` posts the wake-up message (thread-safe: Textual's ``post_message``)."""
        self._wake = wake
        self._queue: deque[Any] = deque()
        self._lock = threading.Lock()
        self._wake_pending = False
        self.wakeups = 0
        """Wake-up messages posted so far (the throughput test checks it stays far below events)."""

    def push(self, event: Any) -> None:
        self._queue.append(event)
        self._maybe_wake()

    def push_many(self, events: Iterable[Any]) -> None:
        self._queue.extend(events)
        self._maybe_wake()

    def reset(self) -> None:
        """Called (from any thread) when a replay rewinds; ordered with the events around it."""
        self.push(RESET)

    def _maybe_wake(self) -> None:
        with self._lock:
            if self._wake_pending:
                return
            self._wake_pending = True
            self.wakeups += 1
        self._wake()

    def drain(self, limit: int | None = None) -> list[Any]:
        """Take queued events (UI thread). With ``limit``, leaves the rest and re-arms the wake-up
        so a flood cannot starve key handling: the UI yields between batches."""
        with self._lock:
            self._wake_pending = False
        out: list[Any] = []
        queue = self._queue
        try:
            while limit is None or len(out) < limit:
                out.append(queue.popleft())
        except IndexError:
            pass
        if queue:
            self._maybe_wake()
        return out

    def __len__(self) -> int:
        return len(self._queue)
