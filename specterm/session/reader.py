"""Reading session files, including damaged and hostile ones.

``read_session(path)`` returns a ``SessionData`` or raises ``SessionFileError`` (one line, naming
the file) — never anything else, and it never writes. The policy, problem by problem:

* **unreadable file** (missing, a directory, no permission), **empty file**, a **first line** that
  is not a ``session_started`` header, a **format version** it cannot read: ``SessionFileError``.
* **truncated last line** (the recorder was killed mid-write): dropped, with a warning; everything
  before it is replayed.
* a later line that is **not JSON**, **invalid UTF-8**, or **JSON of the wrong shape**: skipped with a
  warning naming the line. After ``problems.MAX_DETAILED_WARNINGS`` such warnings the rest are counted, so a
  file of a million bad lines cannot fill memory with messages.
* **unknown event types** (a newer writer's additions): skipped and counted in ``skipped_unknown``,
  with one warning naming a few of the types.
* a line longer than ``MAX_LINE_BYTES`` (e.g. 10 MB): skipped with a warning, read in bounded
  chunks and discarded, so memory stays bounded by the limit, not by the line.
* **timestamps going backwards** or not finite: kept as written, with one warning; the replayer
  clamps its waits so it never sleeps a negative time.
* **gzip**: supported transparently, recognised by its magic bytes whatever the file is called.
  xz, bzip2 and zstd are recognised and refused by name (decompress first).
* untrusted text (tokens with ANSI/OSC escapes or Rich markup) is kept verbatim: making it inert is
  the renderer's job (``specterm.render.inert``); warnings quote file content with ``repr``, which
  escapes control characters.
"""

from __future__ import annotations

import gc
import gzip
import json
import math
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from specterm.errors import SessionFileError
from specterm.events import EVENT_ADAPTER, FORMAT_VERSION, Event, SessionStarted
from specterm.session import migrate
from specterm.session.problems import (
    _check_times,
    _classify,
    _first_error,
    _Lines,
    _Problems,
    _show,
    _size,
)

MAX_LINE_BYTES = 4 * 1024 * 1024
"""Longest line read (4 MiB). The largest real events (a long answer's full text, a tool result)
are well under it; a longer line is skipped rather than held in memory."""


_GZIP_MAGIC = b"\x1f\x8b"
_REFUSED_MAGIC = {b"\xfd7zXZ\x00": "xz", b"BZh": "bzip2", b"\x28\xb5\x2f\xfd": "zstd"}
_DECOMPRESS_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


@dataclass
class SessionData:
    """One session file, read. ``events`` is everything after the header, in file order."""

    path: Path
    header: SessionStarted
    events: list[Event] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped_unknown: int = 0
    """Events of a type this specterm does not know (skipped)."""
    format_version: int = FORMAT_VERSION
    """The version the file was written in (events were migrated if it is older)."""
    compressed: bool = False


def _open(path: Path) -> tuple[IO[bytes], IO[bytes]]:
    """Open ``path`` for binary reading, transparently gunzipping. Returns (stream, raw file):
    the same object for a plain file; closing a GzipFile does not close the file under it."""
    try:
        raw = open(path, "rb")  # closed by read_session
    except FileNotFoundError:
        raise SessionFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SessionFileError(f"{path}: is a directory, not a session file") from None
    except OSError as err:
        raise SessionFileError(f"{path}: cannot open: {err.strerror or err}") from None
    try:
        # peek, not read + seek: a pipe (`specterm replay <(zcat old.gz)`) cannot seek.
        magic = raw.peek(6)[:6]
    except OSError as err:
        raw.close()
        raise SessionFileError(f"{path}: cannot read: {err.strerror or err}") from None
    if magic.startswith(_GZIP_MAGIC):
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    for prefix, kind in _REFUSED_MAGIC.items():
        if magic.startswith(prefix):
            raw.close()
            raise SessionFileError(f"{path}: is {kind}-compressed; decompress it first (gzip is read directly)")
    return raw, raw


def _read_header(lines: _Lines, name: str) -> tuple[SessionStarted, int]:
    try:
        line, length = lines.next()
    except _DECOMPRESS_ERRORS as err:
        raise SessionFileError(f"{name}: not a readable gzip file ({err})") from None
    if line == b"" and length == 0:
        raise SessionFileError(f"{name}: empty file, not a specterm session")
    if line is None:
        raise SessionFileError(f"{name}: first line is {length} bytes, not a specterm session header")
    try:
        # Explicit UTF-8 (json.loads would guess UTF-16 from bytes); tolerate an editor's BOM.
        obj = json.loads(line.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        if not line.endswith(b"\n"):
            raise SessionFileError(f"{name}: file ends inside its first line; not a complete session") from None
        raise SessionFileError(f"{name}: not a specterm session file (line 1 is not JSON)") from None
    kind = obj.get("type") if isinstance(obj, dict) else None
    if not isinstance(kind, str) or kind not in migrate.HEADER_TYPES:  # str first: [1] is unhashable
        raise SessionFileError(f"{name}: not a specterm session file (line 1 is not a session_started header)")
    version = migrate.header_version(obj, name)
    migrate.check_version(version, name)
    upgrade = migrate.migrator(version)
    try:
        header = SessionStarted.model_validate(upgrade(obj) if upgrade is not None else obj)
    except ValidationError as err:
        raise SessionFileError(f"{name}: invalid session header: {_first_error(err, tagged=False)}") from None
    return header, version


def read_session(
    path: str | os.PathLike[str], *, max_line_bytes: int = MAX_LINE_BYTES, freeze_gc: bool = False
) -> SessionData:
    """Read a session file; see the module docstring for how each kind of damage is handled.

    ``freeze_gc=True`` is for a process that keeps the events for its whole life (``specterm
    replay``): it calls ``gc.freeze()`` after parsing, so the cyclic GC never rescans the million
    or so objects of a big session (each full rescan costs about as much as the parse itself).
    The cost: cyclic garbage among objects alive at that moment is never collected, so a library
    caller in a long-running process should leave it off."""
    with SessionReader(path, max_line_bytes=max_line_bytes) as reader:
        reader.read()
    if freeze_gc:
        gc.freeze()
    return reader.data


class SessionReader:
    """A session file read in pieces: the header when opened, then ``read(limit)`` events at a
    time, so a dashboard can show the first events of a 100,000-step file at once and read the rest
    on a worker thread. ``data`` holds what was read so far; its warnings are complete once the
    reader is closed (``close`` or the end of a ``with`` block). Same policy as ``read_session``
    (which is this, read to the end)."""

    def __init__(self, path: str | os.PathLike[str], *, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.path = path = Path(path)
        self.name = name = str(path)
        stream, self._raw = _open(path)
        self._stream = stream
        self.done = False
        try:
            self._lines = _Lines(stream, max_line_bytes)
            header, version = self._parsing(lambda: _read_header(self._lines, name))
        except BaseException:
            self._close_files()
            raise
        self.data = SessionData(path=path, header=header, format_version=version, compressed=stream is not self._raw)
        self._upgrade = migrate.migrator(version)
        self._problems = _Problems(name)
        self._unknown: dict[str | None, int] = {}

    def __enter__(self) -> SessionReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _parsing(self, work):
        # Parsing allocates ~10 objects per token step and frees none, so the cyclic GC would rescan
        # the growing list over and over (≈ 2× the parse time for a 100k-step file). Events hold no
        # reference cycles; pausing collection while parsing is safe, and it is restored after.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return work()
        except OSError as err:  # e.g. EIO from a failing disk, mid-file
            raise SessionFileError(f"{self.name}: read failed: {err.strerror or err}") from None
        finally:
            if gc_was_enabled:
                gc.enable()

    def read(self, limit: int | None = None) -> list[Event]:
        """Read up to ``limit`` more lines (all, with ``None``); returns the events among them."""
        if self.done:
            return []
        try:
            return self._parsing(lambda: self._read_events(limit))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop reading; the warnings about the whole file (or what was read of it) are added."""
        if self._stream is None:
            return
        self._close_files()
        if not self.done:
            return  # abandoned early: no end-of-file verdicts about a file not read to the end
        data, unknown = self.data, self._unknown
        data.warnings.extend(self._problems.lines())
        if unknown:
            data.skipped_unknown = sum(unknown.values())
            names = sorted(k for k in unknown if k is not None)
            kinds = ", ".join(_show(k) for k in names[:5]) + (", …" if len(unknown) > 5 else "")
            data.warnings.append(
                f"{self.name}: skipped {data.skipped_unknown} events of unknown type ({kinds}); "
                "written by a newer specterm?"
            )
        _check_times(self._times(), data.warnings, self.name)
        if self._last_type() != "session_ended":
            data.warnings.append(
                f"{self.name}: no session_ended event at the end; the session may be incomplete "
                "(recording interrupted?)"
            )

    def _times(self) -> list[float]:
        """Every event's ``t``, in file order (for the timestamp warnings)."""
        return list(map(attrgetter("t"), self.data.events))

    def _last_type(self) -> str | None:
        return self.data.events[-1].type if self.data.events else None

    def _taker(self, new: list[Event]) -> Callable[[bytes, int], None]:
        """What the hot loop does with each line that fits: validate it into ``new``, or explain why
        not. A closure over locals, as it runs 100k+ times (no exception on the happy path)."""
        problems, unknown, upgrade = self._problems, self._unknown, self._upgrade
        append = new.append
        validate_json = EVENT_ADAPTER.validator.validate_json
        validate_python = EVENT_ADAPTER.validator.validate_python
        if upgrade is None:

            def take(line: bytes, number: int) -> None:
                try:
                    append(validate_json(line))
                except ValidationError:
                    _classify(line, number, problems, unknown)

        else:

            def take(line: bytes, number: int) -> None:
                try:
                    obj = json.loads(line.decode("utf-8"))
                    # A migration sees only objects; whatever it trips over makes the line bad, not the file.
                    append(validate_python(upgrade(obj) if isinstance(obj, dict) else obj))
                except Exception:  # noqa: BLE001
                    _classify(line, number, problems, unknown)

        return take

    def _close_files(self) -> None:
        stream, raw = self._stream, self._raw
        self._stream = None
        try:
            if stream is not None and stream is not raw:
                stream.close()
        finally:
            raw.close()

    def _read_events(self, limit: int | None) -> list[Event]:
        lines, data, name, problems = self._lines, self.data, self.name, self._problems
        new: list[Event] = []
        take = self._taker(new)
        readline, max_bytes = lines.readline, lines.limit
        cap = max_bytes + 1
        number = lines.number
        stop = math.inf if limit is None else number + limit
        while number < stop:
            try:
                line = readline(cap)
                if not line:
                    self.done = True
                    break
                number += 1
                if len(line) > max_bytes and not line.endswith(b"\n"):
                    length = lines.discard_rest(line)
                    problems.add(number, f"{length} bytes, over the {_size(max_bytes)} line limit; skipped")
                    continue
            except _DECOMPRESS_ERRORS as err:
                data.warnings.append(
                    f"{name}: compressed data is damaged after line {number} ({err}); replaying what came before"
                )
                self.done = True
                break
            take(line, number)
        lines.number = number
        data.events.extend(new)
        return new
