"""The engine in a process of its own, as vLLM's own ``EngineCore`` runs when multiprocessing is on.

Why: in one process the engine's Python (vLLM's scheduler, the verdict hook, the agent loop) and the
dashboard's Python (layout, rendering) take turns on one GIL, so every millisecond the UI spends
drawing is a millisecond the engine waits. In a child process the engine has its own interpreter;
the two only share cores (``benchmarks/ui_overhead.py``: a long answer ran at 0.77 of headless speed
with the engine in the app's process, 0.91 with it here).

``EngineProcess.start`` spawns the child, which builds the engine and the runner (the same
``engine_factory`` / ``runner_factory`` a ``LiveSession`` takes; picklable: module-level functions or
``functools.partial`` of them) and answers ``ready`` with the engine's config and capabilities. The
proxy is what the session holds as its engine; ``proxy.runner`` is its runner. A run sends the
prompt; the child runs it and sends back every event as it is emitted, then the runner's result (or
its exception), over one ``multiprocessing`` pipe: one receiver per direction and sends serialised
(the child's main thread; the parent's run and ``close`` under one lock), in order, so nothing is
lost or reordered. Events carry the session clock's time from the child, which
holds a copy of the parent's ``SessionClock`` (``time.monotonic`` is machine-wide), so timestamps
mean the same as in-process. The parent's session records and forwards each event as it arrives, so
the recording holds the same events as an in-process one.

Cancellation: the parent's run polls its cancel event between receives and sends ``cancel``; a
thread in the child sets the runner's cancel event. Closing sends ``close`` (the child closes its
engine and exits); a child that does not exit in time is terminated. The child ignores SIGINT (the
parent decides when to stop) and writes its stdout/stderr (vLLM's start-up logging) to a log file
instead of the terminal the dashboard is drawing on. A parent that dies closes the pipe: the child's
next send or receive fails and it exits.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue
import signal
import threading
from collections.abc import Callable
from typing import Any

POLL_S = 0.05
"""How often a run waiting for events looks at its cancel event (a cancel reaches the child within it)."""
CLOSE_S = 10.0


class EngineProcessError(RuntimeError):
    """The child process ended or could not send what it raised."""


def _portable(err: BaseException) -> BaseException:
    """``err`` if it survives pickling, else a RuntimeError with its message."""
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:  # noqa: BLE001 - any pickling failure
        return RuntimeError(str(err) or type(err).__name__)


def _child(conn, engine_factory: Callable[[], Any], runner_factory: Callable[[Any], Any], log_path: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # private, like session files
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    try:
        engine = engine_factory()
        runner = runner_factory(engine)
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which shows it
        conn.send(("load_error", _portable(err)))
        return
    conn.send(("ready", getattr(engine, "config", None), getattr(engine, "capabilities", None)))
    jobs: queue.Queue = queue.Queue()
    cancel = threading.Event()

    def control() -> None:  # the only receiver: prompts to the main thread, cancels at once
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = ("close",)
            if msg[0] in ("cancel", "close"):
                cancel.set()  # a close during a run ends the run first
            if msg[0] != "cancel":
                jobs.put(msg)
                if msg[0] == "close":
                    return

    threading.Thread(target=control, name="specterm-engine-control", daemon=True).start()
    try:
        while True:
            msg = jobs.get()
            if msg[0] == "close":
                break
            cancel.clear()
            try:
                result = runner(msg[1], lambda event: conn.send(("event", event)), cancel)
                conn.send(("done", result))
            except (BrokenPipeError, EOFError):
                break  # the parent is gone
            except Exception as err:  # noqa: BLE001 - the parent's run raises it
                conn.send(("error", _portable(err)))
    finally:
        if hasattr(engine, "close"):
            engine.close()


class EngineProcess:
    """The parent's handle on the child: the ``engine`` a ``LiveSession`` holds (``config``,
    ``capabilities``, ``close``) and its ``runner``. Built by ``start`` (blocking until the child's
    engine is loaded: call it where a session builds its engine, on a worker thread)."""

    def __init__(self, process, conn, config: Any, capabilities: Any) -> None:
        self._process, self._conn = process, conn
        self.config, self.capabilities = config, capabilities
        self._lock = threading.Lock()  # one run at a time, as in-process
        self._send_lock = threading.Lock()  # a run's sends (worker thread) and close's (main thread)
        self._closed = False

    @staticmethod
    def prepare() -> None:
        """Start multiprocessing's resource tracker now, while ``sys.stderr`` is the real one: a
        process started later from under a UI that replaced it (Textual does) would otherwise pass
        the replacement's invalid file descriptor to the tracker ("bad value(s) in fds_to_keep")."""
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()

    @classmethod
    def start(
        cls,
        engine_factory: Callable[[], Any],
        runner_factory: Callable[[Any], Any],
        log_path: str | os.PathLike = os.devnull,
    ) -> EngineProcess:
        ctx = mp.get_context("spawn")  # never fork a process that may hold threads and a terminal
        parent, child = ctx.Pipe()
        process = ctx.Process(
            target=_child,
            args=(child, engine_factory, runner_factory, str(log_path)),
            name="specterm-engine",
            daemon=True,
        )
        process.start()
        child.close()
        try:
            msg = parent.recv()
        except (EOFError, OSError):
            process.join(1)
            raise EngineProcessError(
                f"the engine process exited while loading (exit code {process.exitcode}; its log: {log_path})"
            ) from None
        if msg[0] == "load_error":
            process.join(CLOSE_S)
            raise msg[1]
        return cls(process, parent, msg[1], msg[2])

    def runner(self, text: str, sink: Callable[[Any], None], cancel: threading.Event) -> Any:
        """Run one prompt in the child; its events go to ``sink`` here, in order, as they come."""
        with self._lock:
            conn = self._conn
            self._send(("run", text))
            cancel_sent = False
            while True:
                if not cancel_sent and cancel.is_set():
                    self._send(("cancel",))
                    cancel_sent = True
                if not conn.poll(POLL_S):
                    if not self._process.is_alive() and not conn.poll():
                        raise EngineProcessError(f"the engine process exited (exit code {self._process.exitcode})")
                    continue
                try:
                    kind, *rest = conn.recv()
                except (EOFError, OSError):
                    raise EngineProcessError("the engine process closed its pipe") from None
                if kind == "event":
                    sink(rest[0])
                elif kind == "done":
                    return rest[0]
                elif kind == "error":
                    raise rest[0]

    def _send(self, msg: tuple) -> None:
        with self._send_lock:
            self._conn.send(msg)

    def close(self) -> None:
        """Close the child's engine and wait for it to exit (terminate it past ``CLOSE_S``). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._send(("close",))
        except (BrokenPipeError, OSError):
            pass
        self._process.join(CLOSE_S)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(2)
        self._conn.close()


def process_factories(engine_factory: Callable[[], Any], runner_factory: Callable[[Any], Any]):
    """A ``LiveSession``'s ``(engine_factory, runner_factory)`` for the same engine and runner built in
    a child process: the session's engine is the ``EngineProcess``, its runner the handle's ``runner``.
    Call it before a UI starts (``EngineProcess.prepare``); the child logs to ``paths.engine_log_file``."""
    from functools import partial

    from specterm.paths import engine_log_file

    log = engine_log_file()
    log.parent.mkdir(parents=True, exist_ok=True)
    EngineProcess.prepare()
    return partial(EngineProcess.start, engine_factory, runner_factory, log), proxy_runner


def proxy_runner(proxy: EngineProcess):
    """The ``runner_factory`` of a session whose engine is an ``EngineProcess``: its ``runner``."""
    return proxy.runner
