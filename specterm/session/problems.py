"""What can be wrong with a line of a session file, and how the reader reports it: bounded line
reading (``_Lines``), warnings with detail for the first few bad lines (``_Problems``), why a line
did not validate (``_classify``, the slow path, bad lines only) and timestamp checks. Split from
``reader`` (which applies the policy its docstring states) to keep each file short.
"""

from __future__ import annotations

import json
import math
import operator
from typing import IO, Any

from pydantic import ValidationError

from specterm.events import EVENT_ADAPTER, EVENT_TYPES

MAX_DETAILED_WARNINGS = 20
MAX_UNKNOWN_NAMES = 100


def _show(value: Any, width: int = 40) -> str:
    """Quote untrusted file content for a message: ``repr`` escapes control characters."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _clip(text: str, width: int) -> str:
    """``text`` shortened to ``width`` with non-printable characters escaped (pydantic's messages
    can quote file content)."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: width + 1])
    return text if len(text) <= width else text[: width - 1] + "…"


def _first_error(err: ValidationError, *, tagged: bool = True) -> str:
    """The first problem of a validation error as one short line, e.g. ``tokens.0.verdict: Input
    should be 'accepted', …``. ``tagged``: the error came from the event union, whose first
    location element is the ``type`` tag, not a field."""
    first = err.errors(include_url=False, include_input=False)[0]
    loc = ".".join(str(p) for p in (first["loc"][1:] if tagged else first["loc"]))
    msg = first["msg"].splitlines()[0]
    return _clip(f"{loc}: {msg}" if loc else msg, 100)


class _Lines:
    """Bounded line reading. ``next()`` returns ``(line, length)``: ``(b"", 0)`` at the end, and
    ``(None, length)`` for a line over the limit, which is read and discarded in ``limit``-sized
    pieces. (The event loop inlines the happy path of ``next`` for speed.)"""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self.readline = stream.readline
        self.limit = limit
        self.number = 0

    def next(self) -> tuple[bytes | None, int]:
        line = self.readline(self.limit + 1)
        if not line:
            return b"", 0
        self.number += 1
        # At most limit + 1 bytes came back: a newline at the end means the line fits.
        if len(line) <= self.limit or line.endswith(b"\n"):
            return line, len(line)
        return None, self.discard_rest(line)

    def discard_rest(self, head: bytes) -> int:
        """Skip the rest of an over-long line whose first piece is ``head``; returns its length."""
        length = len(head)
        line = head
        while not line.endswith(b"\n"):
            line = self.readline(self.limit)
            if not line:
                break
            length += len(line)
        return length


class _Problems:
    """Warnings about skipped lines, with detail for the first few and a count after that."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.detailed: list[str] = []
        self.more = 0

    def add(self, number: int, what: str) -> None:
        if len(self.detailed) < MAX_DETAILED_WARNINGS:
            self.detailed.append(f"{self.name}: line {number}: {what}")
        else:
            self.more += 1

    def lines(self) -> list[str]:
        tail = [f"{self.name}: {self.more} more bad lines skipped"] if self.more else []
        return self.detailed + tail


def _classify(line: bytes, number: int, problems: _Problems, unknown: dict[str | None, int]) -> None:
    """Explain why ``line`` did not validate (the slow path, only for bad lines)."""
    if not line.strip():
        return  # blank lines are harmless (a hand-edited file); skip them silently
    truncated = not line.endswith(b"\n")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        problems.add(number, f"not valid UTF-8 (byte {err.start}); skipped")
        return
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        if truncated:
            problems.add(number, "truncated last line (the recording was cut off mid-write); ignored")
        else:
            problems.add(number, "not JSON; skipped")
        return
    if not isinstance(obj, dict):
        problems.add(number, f"a JSON {type(obj).__name__}, not an event object; skipped")
        return
    kind = obj.get("type")
    if isinstance(kind, str) and kind not in EVENT_TYPES:
        # Count every one, but remember at most MAX_UNKNOWN_NAMES names: a hostile file could hold a
        # million distinct ones.
        key = kind if kind in unknown or len(unknown) < MAX_UNKNOWN_NAMES else None  # None: the rest
        unknown[key] = unknown.get(key, 0) + 1
        return
    try:
        EVENT_ADAPTER.validate_python(obj)
    except ValidationError as err:
        problems.add(number, f"invalid {_show(kind) if kind is not None else 'event'}: {_first_error(err)}; skipped")
        return
    # json accepted what pydantic's parser did not (e.g. a lone surrogate escape).
    problems.add(number, "JSON this reader cannot decode (bad string escape); skipped")


def _size(n: int) -> str:
    """A byte count in words, e.g. ``4 MiB``."""
    return f"{n // (1024 * 1024)} MiB" if n and n % (1024 * 1024) == 0 else f"{n} bytes"


def _check_times(times: list[float], warnings: list[str], name: str) -> None:
    """Warn (once each) about timestamps that go backwards or are not finite numbers."""
    # Fast path in C for the usual file: every time finite and never decreasing.
    if all(map(math.isfinite, times)) and all(map(operator.le, times, times[1:])):
        return
    backwards = bad = 0
    first_back: int | None = None
    last = -math.inf
    for i, t in enumerate(times):
        if not math.isfinite(t):
            bad += 1
            continue
        if t < last:
            backwards += 1
            if first_back is None:
                first_back = i
        last = t
    if backwards:
        warnings.append(
            f"{name}: timestamps go backwards {backwards} time(s) (first at event {first_back}); "
            "replay will not wait there"
        )
    if bad:
        warnings.append(f"{name}: {bad} event(s) have a non-finite timestamp; replay will not wait there")
