"""Opening a session file for the dashboard without reading all of it first.

``open_replay`` reads the header and the first ``HEAD_LINES`` lines (a few ms; a bad file fails
here, before any UI starts) and returns them with the reader, or ``None`` when that was the whole
file. ``load_rest`` then runs on a worker thread while the replay plays: it reads ``LOAD_CHUNK`` lines
at a time into the ``Replayer`` and returns the file's warnings, complete once it is read. No Textual.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from specterm.session.reader import SessionData, SessionReader

HEAD_LINES = 2_000
"""Lines read before the dashboard opens: the replay starts on them, so a 100,000-step file opens at once."""
LOAD_CHUNK = 5_000


def open_replay(path: str | Path) -> tuple[SessionData, SessionReader | None]:
    reader = SessionReader(path)
    try:
        reader.read(HEAD_LINES)
    except BaseException:
        reader.close()
        raise
    if reader.done:
        reader.close()
        return reader.data, None
    return reader.data, reader


def load_rest(reader: SessionReader, replayer: Any, stop: Callable[[], bool]) -> list[str]:
    """Read the rest into ``replayer`` (until ``stop()``); returns the file's warnings."""
    error = None
    try:
        while not reader.done and not stop():
            replayer.extend(reader.read(LOAD_CHUNK))
    except Exception as err:  # noqa: BLE001 - a file that fails mid-way: replay what was read
        error = str(err) or type(err).__name__
    finally:
        reader.close()
        replayer.done_loading()
    return list(reader.data.warnings) + ([error] if error else [])
