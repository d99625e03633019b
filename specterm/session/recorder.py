"""Crash-safe session recording.

A *session file* is JSONL: one event per line (``dump_event``), the first line the
``session_started`` header (format version, specterm version, engine config, models). The recorder
is an event *sink*: call it (or ``write``) with each event.

Crash safety: each event is encoded to one complete ``line + "\\n"`` first and handed to the kernel
in a single ``os.write`` on an unbuffered descriptor. There is no user-space buffer to lose, so a
``kill -9`` at any moment loses at most the event being written; the reader drops a partial last
line with a warning.

Durability: after each event that ends a piece of work (``SYNC_AFTER``: an engine request, an
agent step, an error) the file is fsynced, so a power cut loses at most the request in flight; not
per token step, where an fsync would cost more than the step. The fsync runs on a small background
thread on a duplicate descriptor: the recorder is fed from the UI's event loop too, which must never
wait for a disk. ``close`` fsyncs once more.

Privacy: prompts and tool results are user data, and specterm runs on shared machines. Session
files are created 0600 and the directories specterm creates for them 0700 (the umask can only make
them stricter); existing directories are left as they are.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from specterm.errors import SessionFileError
from specterm.events import BaseEvent, SessionEnded, SessionStarted, dump_event
from specterm.paths import data_dir

SYNC_AFTER = frozenset({"request_finished", "engine_counters", "agent_step_finished", "error"})
"""Event types after which the file is fsynced (the end of a request or of an agent step)."""


def default_session_path(now: datetime | None = None) -> Path:
    """``<data dir>/sessions/<UTC timestamp>-<short id>.jsonl``, e.g.
    ``sessions/20261202T135501Z-3fa9c1.jsonl``. The random suffix keeps two sessions started in
    the same second apart; the timestamp first makes ``ls`` list them in order."""
    now = now or datetime.now(UTC)
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return data_dir() / "sessions" / f"{stamp}-{secrets.token_hex(3)}.jsonl"


def _encode_line(event: BaseEvent) -> bytes:
    """``dump_event(event)`` plus newline, as UTF-8.

    Decoded model output can hold lone surrogates (half of a split emoji), which JSON cannot carry
    and pydantic refuses to serialise. Rather than lose the event, those become U+FFFD."""
    try:
        return (dump_event(event) + "\n").encode("utf-8")
    except (ValueError, UnicodeError):  # PydanticSerializationError is a ValueError
        clean = _replace_surrogates(event.model_dump(mode="json"))
        return (json.dumps(clean, ensure_ascii=False, default=str) + "\n").encode("utf-8", "replace")


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    return value


class Recorder:
    """Writes events to a new session file, one line each, starting with ``header``.

    Thread-safe: the engine thread, the agent and the UI may all write. The file must not exist
    yet (a second header in the middle of an old recording would corrupt both), its parent
    directories are created. Usable as a context manager; ``close`` writes a ``session_ended``
    event unless one was already written.

    A write that fails (disk full, file system gone) never raises into the event source: the
    recorder stops, keeps the first failure in ``error`` and reports it once to ``on_error``.
    The events already written stay readable.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        header: SessionStarted,
        *,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.error: str | None = None
        self.events_written = 0
        self._on_error = on_error
        self._lock = threading.Lock()
        self._ended = False
        self._closed = False
        self._last_t = header.t
        self._opened_at = time.monotonic()
        self.syncs = 0
        """fsyncs completed (the background ones; ``close`` adds its own)."""
        self._sync_fd: int | None = None
        self._sync_wanted = threading.Event()
        self._syncer: threading.Thread | None = None
        try:
            _make_private_dirs(self.path.parent)
            # O_EXCL: never append to (or truncate) an existing recording. O_APPEND: each write
            # lands at the end even if something else also holds the file.
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
            self._fd: int | None = os.open(self.path, flags, 0o600)
            self._sync_fd = os.dup(self._fd)
        except FileExistsError:
            raise SessionFileError(f"{self.path}: already exists; choose another --record path") from None
        except OSError as err:
            raise SessionFileError(f"{self.path}: cannot create session file: {err.strerror or err}") from None
        if not self._write_line(header):
            raise SessionFileError(f"{self.path}: cannot write session header: {self.error}")

    # -- the sink ---------------------------------------------------------------------------------

    def write(self, event: BaseEvent) -> bool:
        """Append one event. Returns ``False`` if it was not written (closed, or a failed disk)."""
        with self._lock:
            if self._fd is None:
                return False
            if event.type == "session_ended":  # type: ignore[attr-defined]
                self._ended = True
            ok = self._write_line(event)
        if ok and event.type in SYNC_AFTER:  # type: ignore[attr-defined]
            self._request_sync()
        return ok

    __call__ = write

    def _write_line(self, event: BaseEvent) -> bool:
        # One encode, one write: the whole line reaches the kernel at once or not at all.
        data = _encode_line(event)
        try:
            view = memoryview(data)
            while view:  # a regular file takes it in one go; the loop covers a short write
                n = os.write(self._fd, view)  # type: ignore[arg-type]
                view = view[n:]
        except OSError as err:
            self._fail(f"writing to {self.path} failed: {err.strerror or err}; recording stopped")
            return False
        self.events_written += 1
        if event.t > self._last_t:
            self._last_t = event.t
        return True

    def _request_sync(self) -> None:
        self._sync_wanted.set()
        if self._syncer is None:
            self._syncer = threading.Thread(target=self._sync_loop, name="specterm-session-fsync", daemon=True)
            self._syncer.start()

    def _sync_loop(self) -> None:
        while True:
            self._sync_wanted.wait()
            self._sync_wanted.clear()
            fd = self._sync_fd
            if fd is None or self._closed:
                return
            try:
                os.fsync(fd)
                self.syncs += 1
            except OSError:
                pass  # a file system that cannot fsync; the data is written

    def _stop_syncer(self) -> None:
        if self._syncer is not None:
            self._sync_wanted.set()
            self._syncer.join(timeout=30)
            self._syncer = None
        fd, self._sync_fd = self._sync_fd, None
        _close_quietly(fd)

    def _fail(self, message: str) -> None:
        """Stop recording after an I/O failure; report the first failure once."""
        first = self.error is None
        self.error = self.error or message
        fd, self._fd = self._fd, None
        _close_quietly(fd)
        if first and self._on_error is not None:
            self._on_error(message)

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, reason: str = "done") -> None:
        """Write ``session_ended`` (unless already written), fsync and close. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stop_syncer()
            if self._fd is None:  # a write failed earlier; nothing more to do
                return
            if not self._ended:
                # Events carry their own clock (seconds since session start); the monotonic time
                # since we opened the file approximates it, and never lands before the last event.
                t = max(self._last_t, time.monotonic() - self._opened_at)
                self._ended = self._write_line(SessionEnded(t=t, reason=reason))
            fd, self._fd = self._fd, None
            if fd is None:
                return
            try:
                os.fsync(fd)
            except OSError:
                pass  # some file systems (pipes, /dev/null) cannot fsync; the data is written
            os.close(fd)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close("done")
        elif issubclass(exc_type, KeyboardInterrupt):
            self.close("interrupted")
        else:
            self.close("error")

    def __repr__(self) -> str:
        return f"Recorder({str(self.path)!r}, events_written={self.events_written})"


def _make_private_dirs(path: Path) -> None:
    """Create ``path`` and any missing parents with mode 0700 (masked by the umask)."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            pass  # created meanwhile (another recorder); keep its mode


def _close_quietly(fd: int | None) -> None:
    """Close a descriptor whose file may already be gone (a failed disk): nothing left to report."""
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
