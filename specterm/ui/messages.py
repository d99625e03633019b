"""Messages the UI posts to itself.

Only ``EventsReady`` crosses threads, and at most one is in flight at a time (see ``bridge``): the
UI never receives one message per token.
"""

from __future__ import annotations

from textual.message import Message


class EventsReady(Message):
    """Wake-up call: the bridge holds events to drain. Carries no events itself."""

    # A second wake-up queued behind an unprocessed one is redundant: the first drain takes all.
    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EventsReady)


class RequestDone(Message):
    """The worker that ran a live prompt has returned (normally, cancelled, or with an error)."""

    def __init__(self, error: str | None = None) -> None:
        super().__init__()
        self.error = error


class EngineLoaded(Message):
    def __init__(self, error: str | None = None) -> None:
        super().__init__()
        self.error = error


class SessionLoaded(Message):
    """The worker that read the rest of a long session file is done; its warnings are complete."""

    def __init__(self, warnings: list[str]) -> None:
        super().__init__()
        self.warnings = warnings
