"""Errors inside the agent loop that become results, not crashes."""

from __future__ import annotations


class ToolError(Exception):
    """A tool refused or failed; ``str(err)`` is the one line the model sees as the tool result."""
