"""How the target spells text the grammar forces: learned from the target's own corrections.

A grammar's forced continuation is text (xgrammar's jump-forward string, e.g. ``":"`` after a key).
Tokenised on its own it is often not what the target emits there: Qwen2.5 writes ``":`` then ``"``
before a value, not the single token ``":"``, so the forced draft is rejected and the rest of the step
wasted (measured: 55 % of forced drafts accepted on the Qwen pair's tool calls). The spelling is
context-dependent (``":"`` after ``sql`` but ``":`` + ``"`` after ``name``) but the contexts repeat
(the same keys in every call), so ``Spelling`` remembers, for a forced text and the token before it,
the token the target emitted first when it rejected the proposed one, and spells that text with it
next time; the rest of the text is tokenised as before. Drafts only: the target still verifies every
token.
"""

from __future__ import annotations

from typing import Any

Key = tuple[int | None, str]
"""(the token before, the forced text from here on)."""
LIMIT = 4096
"""Learned texts kept (a schema's forced texts are few; a bound keeps a long session's memory flat)."""


class Spelling:
    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._learned: dict[Key, int] = {}
        self._pieces: dict[int, str] = {}
        self._encoded: dict[str, list[int]] = {}

    def piece(self, token: int) -> str:
        text = self._pieces.get(token)
        if text is None:
            text = self._pieces[token] = self._tokenizer.decode([token])
        return text

    def tokens(self, text: str, before: int | None, limit: int) -> tuple[list[int], list[Key | None]]:
        """The first ``limit`` tokens of ``text`` (forced after the token ``before``), and for each its
        ``Key``: the token before it and the forced text from it on (``None`` past a multi-byte
        character that tokens split, where pieces no longer spell the text)."""
        out: list[int] = []
        keys: list[Key | None] = []
        rest = text
        while rest and len(out) < limit:
            ids: list[int] = []
            token = self._learned.get((before, rest))
            if token is None:  # not learned here: the first token of the rest tokenised on its own
                ids = self._encode(rest)
                if not ids:
                    break
                token = ids[0]
            out.append(token)
            keys.append((before, rest))
            piece = self.piece(token)
            if not piece or not rest.startswith(piece):  # learned pieces always are prefixes
                tail = ids[1 : 1 + limit - len(out)]
                out.extend(tail)
                keys.extend([None] * len(tail))
                break
            rest, before = rest[len(piece) :], token
        return out, keys

    def _encode(self, text: str) -> list[int]:
        """``text`` tokenised on its own (cached: a schema's forced texts recur in every request)."""
        ids = self._encoded.get(text)
        if ids is None:
            ids = self._tokenizer.encode(text, add_special_tokens=False)
            if len(self._encoded) < LIMIT:
                self._encoded[text] = ids
        return ids

    def learn(self, key: Key, token: int) -> None:
        """The target emitted ``token`` where ``key``'s text was forced (another spelling proposed)."""
        piece = self.piece(token)
        if piece and key[1].startswith(piece) and (key in self._learned or len(self._learned) < LIMIT):
            self._learned[key] = token
