"""Header: engine, models, method, k, and a LIVE / REPLAY badge with the replay's state.

Everything comes from the ``session_started`` event's ``models`` (and config), so a replay shows
the models it was recorded with, not the local configuration.
"""

from __future__ import annotations

from pathlib import PurePath

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from specterm.render import inert
from specterm.ui.state import ViewState


def _short(name: object) -> str:
    """Local model paths are long: their last two components name the model (``tiny/target``; the
    last alone is often just "target"). Hub ids (``Qwen/Qwen2.5-7B``) are kept whole."""
    text = str(name)
    if text.startswith(("/", ".", "~")) or text.count("/") > 1:
        return "/".join(PurePath(text).parts[-2:]) or text
    return text


class SessionHeader(Widget):
    DEFAULT_CSS = """
    SessionHeader { height: 1; dock: top; background: $panel; color: $foreground; }
    """

    status: reactive[str] = reactive("")
    """Engine / replay status shown next to the badge (``starting engine…``, ``paused ×2``); setting
    it redraws the header (a reactive: no refresh calls to forget)."""

    findings: reactive[tuple[int, bool]] = reactive((0, False))
    """(how many findings, whether any is a mismatch): the ⚑ badge, red on a mismatch; none, no badge."""

    def __init__(self, state: ViewState, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state

    def describe(self) -> str:
        s = self.state.session
        if s is None:
            return "specterm"
        m = s.models
        parts = ["specterm"]
        backend = m.get("backend") or s.config.get("backend")
        if backend:
            parts.append(str(backend))
        if m.get("target"):
            parts.append(f"target {_short(m['target'])}")
        if m.get("draft"):
            parts.append(f"draft {_short(m['draft'])}")
        method = m.get("method")
        if method:
            k = m.get("num_speculative_tokens")
            parts.append(f"{method} k={k}" if k and method != "none" else f"{method}")
        if s.agent:
            parts.append(f"agent {s.agent}")
        return " · ".join(parts)

    def render(self) -> Text:
        badge = {"replay": " REPLAY ", "attach": " ATTACHED "}.get(self.state.mode, " LIVE ")
        count, mismatch = self.findings
        # Not hue alone (16-colour terminals, NO_COLOR): a mismatch also says so in words.
        flag = f" ⚑{count}{' mismatch' if mismatch else ''} F6 " if count else ""
        right = (self.status + " ") if self.status else ""
        width = self.size.width or 80
        left = inert(self.describe())
        room = max(0, width - len(badge) - len(right) - len(flag) - 1)
        if len(left) > room:
            left = left[: max(0, room - 1)] + "…"
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(" " + left)
        out.append(" " * max(0, width - 1 - len(left) - len(right) - len(flag) - len(badge)))
        out.append(right, "italic")
        if flag:
            out.append(flag, "bold white on red" if mismatch else "bold black on yellow")
        out.append(badge, "bold reverse")
        return out
