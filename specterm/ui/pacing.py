"""When the next frame may be drawn: paced by the UI thread's own CPU use.

The engine runs in the dashboard's process: every millisecond the UI thread computes holds the GIL
(and, on a 2-core machine, a core the engine's OpenMP threads wait for), so the engine's speed with
the dashboard attached is about ``1 - UI share`` of its headless speed (``benchmarks/ui_overhead.py``).
After a frame that cost ``c`` CPU seconds (events applied + the repaint they caused), the next waits
``c / UI_CPU_SHARE``: cheap frames (a few tokens repainted in place) still come every ``FRAME_S``;
costly ones (a new block, the transcript scrolling: a relayout and full repaint) come less often,
with more tokens in each. Nothing is dropped: events wait in the bridge. No Textual here.
"""

from __future__ import annotations

import time

FRAME_S = 1 / 30
"""Frames are drawn at most this often: a fast engine's steps queue up in the bridge and are drawn
together, instead of the UI redrawing per engine step."""
UI_CPU_SHARE = 0.04
"""The share of one core the UI thread may use while events stream in."""
MAX_FRAME_S = 0.5
"""But never fewer than two frames a second while events arrive: the view must stay live."""


class FramePacer:
    """Call ``frame_started`` when a frame begins (on the UI thread); ``wait`` says how long until the
    next may begin. Ask again when that time comes: the frame's repaint usually runs after the wake-up
    that asked, and its CPU counts too."""

    def __init__(self) -> None:
        self._started = 0.0
        self._cpu = time.thread_time()

    def frame_started(self) -> None:
        self._started = time.monotonic()
        self._cpu = time.thread_time()

    def reset_cpu(self) -> None:
        """Forget CPU spent so far (startup's own work is not a frame's)."""
        self._cpu = time.thread_time()

    def wait(self) -> float:
        spent = time.thread_time() - self._cpu  # this thread's CPU since the last frame began
        return self._started + min(MAX_FRAME_S, max(FRAME_S, spent / UI_CPU_SHARE)) - time.monotonic()
