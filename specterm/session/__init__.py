"""Sessions: recording events to a JSONL file, reading files back (damaged ones too), migrating
older formats, and replaying a file as an event source. No Textual here: the UI consumes these.

* :mod:`~specterm.session.recorder` — ``Recorder``, ``default_session_path`` (its flags are ``cli.common``'s).
* :mod:`~specterm.session.reader` — ``read_session`` → ``SessionData``.
* :mod:`~specterm.session.migrate` — format versions and the migration table.
* :mod:`~specterm.session.replay` — ``Replayer``, the event source for replays.
"""

from specterm.session.reader import MAX_LINE_BYTES, SessionData, read_session
from specterm.session.recorder import Recorder, data_dir, default_session_path
from specterm.session.replay import Replayer

__all__ = [
    "MAX_LINE_BYTES",
    "Recorder",
    "Replayer",
    "SessionData",
    "data_dir",
    "default_session_path",
    "read_session",
]
