"""The replayer: a recorded session as an event source.

It honours the same contract as the live engine: it calls ``sink(event)`` for each event, in file
order, from its own thread (the dashboard's sink is the event bridge's ``push``). The UI drives it through
a narrow command surface: pause, resume, step, jump, speed.

Timing: event ``i`` is emitted ``wait_i / speed`` seconds after event ``i - 1``, where ``wait_i`` is
the gap between their timestamps, clamped so that

* a timestamp going backwards (or a non-finite one) waits 0 — never a negative sleep — and the
  clock does not "re-climb" the lost time afterwards (gaps are measured from the latest time seen);
* an idle gap longer than ``max_gap_s`` (a user thinking for two minutes between prompts) waits
  ``max_gap_s``; pass ``max_gap_s=None`` for the recorded gaps verbatim.

``speed=float("inf")`` or ``0`` means as fast as possible. Instant emissions (step, jumps) ignore
timing altogether. Waiting uses a ``threading.Condition`` with timeouts: no busy-waiting, and any
command wakes the thread at once.

Commands are queued and run by the replayer thread in order, so each one is relative to the
position *when it runs*: pressing "step" twice steps twice, and a jump is never computed from a
stale position.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from specterm.events import Event

MAX_GAP_S = 5.0
"""Longest wait between two events at speed 1, in recorded seconds (see module docstring)."""

_END = -1
"""A jump's target meaning "the last event", resolved when the jump runs (the file may be loading)."""

_CATCH_UP_S = 1.0
# If the thread falls behind schedule by more than this (a slow sink, a suspended laptop), it
# re-anchors on "now" instead of bursting to catch up.


def _normalise_speed(speed: float) -> float:
    if speed != speed or speed < 0:  # NaN or negative
        raise ValueError(f"speed must be a positive number, inf or 0 (as fast as possible), not {speed!r}")
    return math.inf if speed == 0 else float(speed)


def _waits(events: Sequence[Event], max_gap_s: float | None) -> list[float]:
    """Recorded seconds to wait before each event (0 for the first), clamped as documented."""
    return _waits_from(events, max_gap_s, None)[0]


def _waits_from(
    events: Sequence[Event], max_gap_s: float | None, latest: float | None
) -> tuple[list[float], float | None]:
    """``_waits`` continuing after the events before (``latest``: the latest finite time they
    had), and the latest time now: a file still loading arrives in pieces."""
    cap = math.inf if max_gap_s is None else max_gap_s
    waits: list[float] = []
    for event in events:
        t = event.t
        if not math.isfinite(t):
            waits.append(0.0)
            continue
        if latest is None:
            waits.append(0.0)
            latest = t
            continue
        waits.append(min(max(t - latest, 0.0), cap))
        if t > latest:
            latest = t
    return waits, latest


class Replayer:
    """Emits ``events`` to ``sink`` from its own thread, with the recorded timing scaled by
    ``1 / speed``. ``on_reset`` (called from the replayer thread) tells the consumer to forget
    everything it was shown, before a backwards jump re-emits from the start; without it, a
    backwards jump is ignored (re-emitting would show the consumer every event twice).

    Public state, safe to read from any thread: ``paused``, ``finished`` (every event emitted),
    ``position`` (events emitted so far), ``total``, ``loading`` (more events are still being
    read), ``error`` (an exception the sink raised, which stops the replay).

    A long file need not be read before the replay starts: pass ``loading=True`` with the events
    read so far, then ``extend`` from the reading thread and ``done_loading`` at the end. Until
    then the replay waits at the last loaded event instead of finishing, and a jump to the end
    (or past the loaded agent steps) waits for the file's real end.
    """

    def __init__(
        self,
        events: list[Event],
        sink: Callable[[Event], None],
        *,
        speed: float = 1.0,
        on_reset: Callable[[], None] | None = None,
        max_gap_s: float | None = MAX_GAP_S,
        loading: bool = False,
    ) -> None:
        self._sink = sink
        self._on_reset = on_reset
        self._speed = _normalise_speed(speed)
        self._max_gap_s = max_gap_s
        self._events: list[Event] = []
        self._waits: list[float] = []
        self._latest: float | None = None
        self._spec_steps: list[int] = []
        self._agent_starts: list[int] = []
        self.loading = loading
        self.total = 0
        self._add(events)
        self._cond = threading.Condition()
        self._commands: deque[tuple[str, int]] = deque()
        self._thread: threading.Thread | None = None
        self._running = False  # a thread is alive (or about to be)
        self._busy = False  # emitting outside the lock
        self._started = False
        self._stopped = False
        self._due: float | None = None  # monotonic time the next event is due
        self._left: float | None = None  # recorded seconds still to wait, kept across a pause
        self._anchor: float | None = None  # when the previous event was due, to avoid drift
        self.paused = False
        self.finished = False
        self.position = 0
        self.error: BaseException | None = None

    def _add(self, events: Sequence[Event]) -> None:
        base = len(self._events)
        waits, self._latest = _waits_from(events, self._max_gap_s, self._latest)
        self._events.extend(events)
        self._waits.extend(waits)
        self._spec_steps.extend(base + i for i, e in enumerate(events) if e.type == "spec_step")
        self._agent_starts.extend(base + i for i, e in enumerate(events) if e.type == "agent_step_started")
        self.total = len(self._events)

    def extend(self, events: Sequence[Event]) -> None:
        """More events of a file still loading (any thread), in file order."""
        with self._cond:
            self._add(events)
            self._cond.notify_all()

    def done_loading(self) -> None:
        """The file is read: the replay may finish, and jumps to the end go to the real end."""
        with self._cond:
            self.loading = False
            self._cond.notify_all()

    # -- information ------------------------------------------------------------------------------

    @property
    def speed(self) -> float:
        return self._speed

    @property
    def agent_steps(self) -> int:
        """How many agent steps (``agent_step_started`` events) the session has."""
        return len(self._agent_starts)

    @property
    def agent_step(self) -> int:
        """The agent step now showing (0-based), or -1 before the first one started."""
        return bisect.bisect_left(self._agent_starts, self.position) - 1

    # -- commands (any thread) --------------------------------------------------------------------

    def start(self) -> None:
        """Start the replay thread (once)."""
        with self._cond:
            if self._started:
                return
            self._started = True
            self._spawn()

    def pause(self) -> None:
        with self._cond:
            if self.paused:
                return
            self.paused = True
            if self._due is not None:  # keep the unfinished part of the current wait
                self._left = self._to_recorded(self._due - time.monotonic())
                self._due = None
            self._anchor = None
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            if not self.paused:
                return
            self.paused = False
            self._cond.notify_all()

    def toggle_pause(self) -> bool:
        """Pause if running, resume if paused; returns ``paused`` afterwards."""
        with self._cond:
            if self.paused:
                self.resume()
            else:
                self.pause()
            return self.paused

    def step(self) -> None:
        """Emit, instantly, every event up to and including the next ``spec_step`` (or just the next
        event when no ``spec_step`` is left). Pauses the replay first if it was running: stepping
        is a paused-mode action."""
        self.pause()
        self._command("step")

    def jump_to_agent_step(self, n: int) -> None:
        """Emit instantly through the start of agent step ``n`` (0-based: the ``n``-th
        ``agent_step_started`` event, inclusive). Behind the current position: ``on_reset()`` and
        re-emit from the start. ``n`` past the last step jumps to the end; ``n < 0`` to step 0."""
        self._command("step_n", n)

    def jump_to_end(self) -> None:
        """Emit everything left, instantly (once the file is read, if it is still loading)."""
        self._command("to", _END)

    def set_speed(self, speed: float) -> None:
        """Change the speed; the wait in progress is rescaled, not restarted."""
        new = _normalise_speed(speed)
        with self._cond:
            if self._due is not None:
                left = self._to_recorded(self._due - time.monotonic())
                self._due = time.monotonic() + self._to_wall(left, new)
            self._speed = new
            self._anchor = None
            self._cond.notify_all()

    def stop(self) -> None:
        """Stop for good: the thread emits nothing more and ends."""
        with self._cond:
            self._stopped = True
            self._commands.clear()
            self._cond.notify_all()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the replay thread to end: every event emitted (and no command pending), or
        ``stop()``."""
        with self._cond:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every queued command has run and the replay is paused, finished or stopped.
        Returns ``False`` on timeout. (For tests and the headless printer; the UI need not wait.)"""
        with self._cond:
            return self._cond.wait_for(
                lambda: (
                    not self._commands
                    and not self._busy
                    and (self.paused or self.finished or self._stopped or self.error is not None)
                ),
                timeout,
            )

    # -- internals --------------------------------------------------------------------------------

    def _to_wall(self, recorded: float, speed: float | None = None) -> float:
        speed = self._speed if speed is None else speed
        return 0.0 if math.isinf(speed) else recorded / speed

    def _to_recorded(self, wall: float) -> float:
        return 0.0 if math.isinf(self._speed) else max(wall, 0.0) * self._speed

    def _command(self, kind: str, arg: int = 0) -> None:
        with self._cond:
            if self._stopped:
                return
            self._commands.append((kind, arg))
            if self._started and not self._running:  # finished earlier: seeking back revives it
                self._spawn()
            self._cond.notify_all()

    def _spawn(self) -> None:
        self._running = True
        self.finished = False
        self._thread = threading.Thread(target=self._run, name="specterm-replay", daemon=True)
        self._thread.start()

    def _plan(self) -> tuple[bool, int, int] | None:
        """Under the lock: wait for work and return ``(reset, start, end)``, the events to emit now;
        ``None`` when the thread should end."""
        cond = self._cond
        while True:
            if self._stopped or self.error is not None:
                return None
            if self._commands:
                kind, arg = self._commands[0]
                if self.loading and (
                    arg == _END if kind == "to" else kind == "step_n" and arg >= len(self._agent_starts)
                ):
                    cond.wait()  # the target is not read yet: wait for the loader
                    continue
                self._commands.popleft()
                self._due = self._left = self._anchor = None
                if kind == "step_n":  # jump to agent step ``arg`` (past the last one: the end)
                    starts = self._agent_starts
                    kind, arg = "to", (starts[max(arg, 0)] + 1 if starts and arg < len(starts) else self.total)
                elif arg == _END:
                    arg = self.total
                if kind == "step":
                    i = bisect.bisect_left(self._spec_steps, self.position)
                    end = self._spec_steps[i] + 1 if i < len(self._spec_steps) else self.position + 1
                    return False, self.position, min(end, self.total)
                if arg < self.position:
                    if self._on_reset is None:
                        continue  # cannot un-show events: ignore (see class docstring)
                    return True, 0, arg
                return False, self.position, arg
            if self.position >= self.total and self.loading:
                cond.wait()  # caught up with the loader: wait for more events
                continue
            if self.position >= self.total:
                self.finished = True
                cond.notify_all()
                return None
            if self.paused:
                cond.wait()
                continue
            now = time.monotonic()
            if self._due is None:
                if self._left is not None:
                    self._due, self._left = now + self._to_wall(self._left), None
                else:
                    base = self._anchor if self._anchor is not None and now - self._anchor < _CATCH_UP_S else now
                    self._due = base + self._to_wall(self._waits[self.position])
            if self._due > now:
                cond.wait(self._due - now)
                continue
            self._anchor, self._due = self._due, None
            return False, self.position, self.position + 1

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                plan = self._plan()
                if plan is None:
                    self._running = False
                    cond.notify_all()
                    return
                self._busy = True
            reset, start, end = plan
            try:
                # Emit outside the lock: a sink that calls pause() or a UI thread sending commands
                # must never wait on a long jump.
                if reset:
                    self.position = 0
                    self.finished = False
                    self._on_reset()  # type: ignore[misc]
                for i in range(start, end):
                    if self._stopped:
                        break
                    self._sink(self._events[i])
                    self.position = i + 1
            except BaseException as err:  # noqa: BLE001 - reported via .error, thread ends cleanly
                with cond:
                    self.error = err
            finally:
                with cond:
                    self._busy = False
                    cond.notify_all()
