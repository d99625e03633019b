"""Session file format versions, and the migrations between them.

The *format version* is the integer ``format_version`` in a session file's first line (the
``session_started`` header). It changes only when a reader of the old version would misread the new
files: additive fields do not need a new version, because every event model ignores unknown
fields. ``FORMAT_VERSION`` in :mod:`specterm.events` is the version this specterm writes and reads
natively.

Reading an *older* file: each event's raw JSON object is passed through ``MIGRATIONS[v]``,
``MIGRATIONS[v + 1]``, … until it reaches the current version, then validated as usual. A version
with no migration path is refused with a message naming both versions. Reading a *newer* file is
always refused: guessing at fields we do not know would show the user wrong numbers.

The only entry today is a documented example, version 0: a hypothetical pre-release format whose
header type was ``session_start`` (not ``session_started``). It exists so the migration path is
exercised by tests before the first real format change needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specterm.errors import SessionFileError
from specterm.events import FORMAT_VERSION

EventDict = dict[str, Any]
Migration = Callable[[EventDict], EventDict]

HEADER_TYPES = frozenset({"session_started", "session_start"})
"""Header ``type`` names of every format version, current first; used to recognise the header."""


def _v0_to_v1(event: EventDict) -> EventDict:
    """Format 0 (example) → 1: the header type was renamed ``session_start`` → ``session_started``."""
    if event.get("type") == "session_start":
        event = {**event, "type": "session_started"}
    if event.get("type") == "session_started":
        event = {**event, "format_version": 1}
    return event


MIGRATIONS: dict[int, Migration] = {
    0: _v0_to_v1,
}
"""``MIGRATIONS[v]`` turns one event object of format ``v`` into format ``v + 1``. A new format
version adds one entry here (and a test reading a file of the old version)."""


def header_version(header: EventDict, name: str) -> int:
    """The format version a header object declares; ``SessionFileError`` if it has none usable.

    ``name`` is the file name, used in the message."""
    version = header.get("format_version")
    # bool is an int subclass in Python: `true` must not read as version 1.
    if not isinstance(version, int) or isinstance(version, bool):
        raise SessionFileError(f"{name}: session header has no valid format_version (got {version!r:.40})")
    return version


def check_version(version: int, name: str) -> None:
    """Refuse a version this specterm cannot read, naming both versions."""
    if version > FORMAT_VERSION:
        raise SessionFileError(
            f"{name}: written by a newer specterm: format {version}, this reads up to {FORMAT_VERSION}; "
            "upgrade specterm to replay it"
        )
    if version < FORMAT_VERSION and not has_path(version):
        raise SessionFileError(
            f"{name}: session format {version} is too old: this specterm reads format {FORMAT_VERSION} "
            f"and migrates from format {min(MIGRATIONS, default=FORMAT_VERSION)} onwards"
        )


def has_path(version: int) -> bool:
    """Whether every step from ``version`` up to the current version has a migration."""
    return all(v in MIGRATIONS for v in range(version, FORMAT_VERSION))


def migrator(version: int) -> Migration | None:
    """One function taking an event object of ``version`` to the current version; ``None`` when the
    file is already current (the fast path: no per-event work at all)."""
    if version == FORMAT_VERSION:
        return None
    steps = [MIGRATIONS[v] for v in range(version, FORMAT_VERSION)]

    def migrate(event: EventDict) -> EventDict:
        for step in steps:
            event = step(event)
        return event

    return migrate
