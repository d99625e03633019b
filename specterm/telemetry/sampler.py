"""The NVML sampler: a daemon thread that turns GPU counters into ``GpuSample`` events.

State machine (each change is announced once with a ``GpuStatus``; repeats are silent)::

    (start) ──init ok──► ok ──tick──► GpuSample per device ...
       │                  │
       │                  └─ GPU lost / unknown NVML error ─► device_lost / error ─► back-off, re-init
       └─ no driver / no GPU / no permission ─► that state, thread ends

``sample_once()`` is one step of that loop and returns how long to wait before the next step (the
period, or a back-off delay), or None once the sampler has stopped for good; the thread just calls it
in a loop. Unit tests call it directly, so nothing in them sleeps.

The sink is called from the sampler thread: a UI must hand events over to its own loop (the
dashboard passes the event bridge's ``push``, ``ui/bridge.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from specterm.events import BaseEvent, GpuSample, GpuStatus, Sink
from specterm.telemetry import devices
from specterm.telemetry.errors import OK, RETRY_STATES, classify

log = logging.getLogger(__name__)


class GpuSampler:
    """Samples every NVIDIA GPU every ``period_s`` seconds (clamped to at least 0.1 s, the GPM refresh
    interval) and sends ``GpuSample`` / ``GpuStatus`` events to ``sink``.

    ``nvml`` is the module to use (default: the real ``pynvml``, imported in the thread); ``clock``
    returns seconds since the session started and stamps every event's ``t``. Failures become
    ``GpuStatus`` events; nothing is ever raised out of the thread.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        period_s: float = 0.25,
        nvml: Any = None,
        clock: Callable[[], float] | None = None,
        first_backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
    ) -> None:
        if period_s <= 0:
            raise ValueError("period_s must be positive")
        self._sink = sink
        self.period_s = max(float(period_s), devices.GPM_MIN_INTERVAL_S)
        self._nvml = nvml
        if clock is None:
            start = time.monotonic()
            clock = lambda: time.monotonic() - start  # noqa: E731
        self._clock = clock
        self._first_backoff = first_backoff_s
        self._max_backoff = max_backoff_s
        self._backoff = first_backoff_s
        self._state: str | None = None
        self._initialised = False
        self._targets: list[devices.Target] = []
        self._finished = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # sample_once vs close from another thread; re-entrant because a sink may call stop().
        self._lock = threading.RLock()

    # -- public surface ----------------------------------------------------------------------------

    @property
    def state(self) -> str | None:
        """The last announced state (``ok``, ``no_gpu`` ...), None before the first step."""
        return self._state

    @property
    def finished(self) -> bool:
        """True once the sampler has stopped for good (terminal state, or stopped)."""
        return self._finished

    @property
    def sources(self) -> dict[str, str]:
        """What each sampled target's bandwidth figure is (label → source)."""
        return {t.label: t.source for t in self._targets}

    def start(self) -> None:
        """Start the thread and return at once; NVML is initialised inside the thread."""
        if self._thread is not None:
            raise RuntimeError("GpuSampler already started")
        self._thread = threading.Thread(target=self._run, name="specterm-gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to finish; it releases NVML on its way out. Does not wait (see ``join``)."""
        self._stop.set()
        if self._thread is None:
            self.close()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread; True when it has ended (or never started)."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        """Free GPM buffers and shut NVML down. For callers that drive ``sample_once`` themselves."""
        with self._lock:
            self._teardown()
            self._finished = True

    def sample_once(self) -> float | None:
        """One step: initialise NVML if needed, else read every target and emit its sample.

        Returns seconds to wait before the next step, or None when the sampler is done.
        """
        with self._lock:
            if self._finished:
                return None
            current: devices.Target | None = None
            samples = []
            try:
                if not self._initialised:
                    self._setup()
                    return self.period_s  # GPM needs a second sample before it can say anything
                for current in self._targets:
                    samples.append(GpuSample(t=self._now(), **devices.read_sample(self._nvml, current)))
            except Exception as err:  # noqa: BLE001 - every failure becomes a status, never a raise
                return self._fail(err, None if current is None else current.index)
            self._backoff = self._first_backoff
            for sample in samples:
                self._emit(sample)
            return self.period_s

    # -- internals ---------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                delay = self.sample_once()
                if delay is None:
                    break
                self._stop.wait(delay)
        except BaseException as err:  # last line of defence: the thread never raises
            log.exception("GPU sampler thread crashed")
            self._set_state("error", f"GPU telemetry stopped: {type(err).__name__}: {err}")
        finally:
            self.close()

    def _setup(self) -> None:
        if self._nvml is None:
            import pynvml  # imported in the thread; ImportError is classified

            self._nvml = pynvml
        self._nvml.nvmlInit()
        self._initialised = True
        self._targets = devices.discover(self._nvml)
        self._set_state(OK, devices.describe(self._targets))

    def _fail(self, err: BaseException, device: int | None) -> float | None:
        state, message = classify(err, self._nvml)
        log.debug("GPU sampler: %s (%s)", state, err)
        if device is not None:
            message = f"GPU {device}: {message}"
        self._teardown()
        self._set_state(state, message, device)
        if state in RETRY_STATES:
            delay = self._backoff
            self._backoff = min(self._backoff * 2, self._max_backoff)
            return delay
        self._finished = True
        return None

    def _teardown(self) -> None:
        nvml, targets = self._nvml, self._targets
        self._targets = []
        if nvml is not None:
            devices.release(nvml, targets)
        if self._initialised:
            self._initialised = False
            try:
                nvml.nvmlShutdown()
            except Exception as err:  # noqa: BLE001 - shutting down after a lost GPU may fail
                log.debug("nvmlShutdown failed: %s", err)

    def _set_state(self, state: str, message: str, device: int | None = None) -> None:
        if state == self._state:
            return
        self._state = state
        self._emit(GpuStatus(t=self._now(), state=state, message=message, device=device))

    def _now(self) -> float:
        try:
            return float(self._clock())
        except Exception:  # a broken clock must not take telemetry down
            log.exception("GPU sampler clock raised")
            return 0.0

    def _emit(self, event: BaseEvent) -> None:
        try:
            self._sink(event)
        except Exception:  # a broken sink must not kill telemetry or be blamed on NVML
            log.exception("GPU sampler sink raised")
