"""Client conversations, told apart by prompt prefix (``specterm attach``, one server or a fleet).

An agent on the client side sends request after request, each prompt the previous one plus its answer
and a tool result. A request whose prompt starts with an earlier request's whole prompt continues that
request's conversation (the longest such prefix wins); anything else starts one. A fleet shares one
``Conversations``: a router may send an agent's next step to another replica.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass


@dataclass
class _Conversation:
    name: str
    prompt: list[int]
    turns: int = 1
    key: tuple[int, int] = (0, 0)
    """Its place in ``Conversations``' index: (prompt length, prompt hash)."""


class Conversations:
    """Client conversations by prompt prefix (module doc), for one server or a whole fleet.

    Indexed, not scanned: a request's prompt is hashed once per prefix length (a polynomial rolling
    hash), and only the conversations whose prompt has one of those lengths and hashes are compared
    token by token. Scanning every conversation cost 0.4 ms per request at 1,000 conversations and
    4 ms at 5,000 (``benchmarks/attach_scale.py``, 40 s at 15,000 events/s: the viewer fell 32 s
    behind), and a fleet fills the list fast."""

    _BASE, _MOD = 1_000_003, (1 << 61) - 1

    def __init__(self) -> None:
        self.all: list[_Conversation] = []
        self._index: dict[tuple[int, int], _Conversation] = {}
        """(prompt length, prompt hash) → the conversation whose prompt that is now."""
        self._lengths: list[int] = []
        """The prompt lengths in ``_index``, ascending (with repeats: one per conversation)."""

    def place(self, prompt: list[int]) -> tuple[str, int]:
        """The conversation ``prompt`` continues (or a new one) and which step of it this is."""
        hashes = [0]
        h, base, mod = 0, self._BASE, self._MOD
        for tok in prompt:
            h = (h * base + tok + 1) % mod
            hashes.append(h)
        best = None
        stop = bisect.bisect_right(self._lengths, len(prompt))
        for length in dict.fromkeys(reversed(self._lengths[:stop])):  # the longest prefix first
            c = self._index.get((length, hashes[length]))
            if c is not None and c.prompt == prompt[:length]:
                best = c
                break
        if best is None:
            best = _Conversation(f"c{len(self.all) + 1}", list(prompt))
            self.all.append(best)
            self._add(best, hashes[-1])
            return best.name, 1
        self._remove(best)
        best.turns += 1
        best.prompt = list(prompt)
        self._add(best, hashes[-1])
        return best.name, best.turns

    def _add(self, c: _Conversation, h: int) -> None:
        c.key = (len(c.prompt), h)
        self._index.setdefault(c.key, c)
        bisect.insort(self._lengths, len(c.prompt))

    def _remove(self, c: _Conversation) -> None:
        if self._index.get(c.key) is c:
            del self._index[c.key]
        del self._lengths[bisect.bisect_left(self._lengths, c.key[0])]
