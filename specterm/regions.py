"""Where the draft loses: acceptance by region of a structured output, and where corrections cluster.

**Regions.** Each emitted token of a request that ran under a JSON schema is given one region by
where it falls in the JSON text: ``structure`` (keys, quotes, punctuation, the literals true / false
/ null, whitespace between them), ``string`` (inside a string value), ``number``, ``free`` (outside
the JSON document: a ``<tool_call>`` wrapper, text after the closing brace) and ``forced`` (a token
the grammar forced, whatever it spells: the draft cannot lose there, so it would flatter the others).
A token that spans regions (``'"`` closing a value, ``":"``) takes the region of its first
character that is not structure, else structure: what the draft had to guess is the content, the
punctuation around it comes free. ``JsonRegions`` is a small incremental lexer over the
concatenated token texts: a state, a string-is-a-key flag and a stack of open containers, so a
token costs its characters and nothing else.

**Region acceptance** is accepted ÷ (accepted + corrections) among a region's tokens: of the output
positions where a draft token was verified, the share the target kept. Drafts rejected after a
correction have no output position, so this is not the session's acceptance rate.

**Correction contexts.** Every correction (any request) is keyed by the word class of the target's
token (numbers and dates, punctuation, capitalised words, words, whitespace, the end) and, under a schema,
its region; ``WhereLost.top_corrections`` gives the most frequent keys with their first examples
(the token before, the draft's token, the target's), chosen by stream position so that counting a
session per request and merging (``replay --summary``'s fast path) picks the same ones.

``WhereLost`` holds the counts; it is a field of ``SpecStats`` (``stats.py``), which owns every
number, and merges like the rest of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

REGIONS: dict[str, str] = {
    "structure": "keys & punctuation",
    "string": "string values",
    "number": "numbers",
    "free": "free text",
    "forced": "grammar-forced",
}
"""Region → its label in tables, in display order."""
SHORT: dict[str, str] = {
    "structure": "keys",
    "string": "strings",
    "number": "numbers",
    "free": "free",
    "forced": "forced",
}
"""Region → its label where a line has a few cells (the acceptance panel at 80×24)."""
_WHERE: dict[str, str] = {
    "structure": "in keys and punctuation",
    "string": "in string values",
    "number": "in numbers",
    "free": "outside the JSON",
    "forced": "where the grammar forced",
}
"""Region → how a correction context names it (``context_key``)."""

_EXAMPLES = 2
"""Examples kept per correction context (the first by stream position)."""
_NUMBER = frozenset("0123456789+-.eE")
_NUMBER_START = frozenset("-0123456789")
_FREE, _STRUCT, _STRING, _NUMBER_STATE, _LITERAL = range(5)


class JsonRegions:
    """An incremental JSON lexer: ``feed(text)`` → the region of that piece of the output."""

    __slots__ = ("state", "key", "escape", "stack", "expect_key")

    def __init__(self) -> None:
        self.state = _FREE
        self.key = self.escape = self.expect_key = False
        self.stack: list[str] = []

    def feed(self, text: str) -> str:
        found: str | None = None
        for c in text:
            region = self._char(c)
            if found is None and region != "structure":
                found = region
        if found is not None:
            return found
        return "free" if not text and self.state == _FREE else "structure"  # "": where the lexer is

    def _char(self, c: str) -> str:
        state = self.state
        if state == _STRING:
            region = "structure" if self.key else "string"
            if self.escape:
                self.escape = False
            elif c == "\\":
                self.escape = True
            elif c == '"':
                self.state = _STRUCT
                return "structure"
            return region
        if state == _NUMBER_STATE:
            if c in _NUMBER:
                return "number"
            self.state = _STRUCT  # the number ended: this character is read as structure's
        elif state == _LITERAL:
            if c.isalpha():
                return "structure"
            self.state = _STRUCT
        elif state == _FREE:
            if c not in "{[":
                return "free"  # only an object or an array starts a document: prose may hold quotes
        if c in "{[":
            self.stack.append(c)
            self.expect_key = c == "{"
            self.state = _STRUCT
        elif c in "}]":
            if self.stack:
                self.stack.pop()
            self.expect_key = False
            if not self.stack:
                self.state = _FREE  # the document is closed: what follows is free text
        elif c == ",":
            self.expect_key = bool(self.stack) and self.stack[-1] == "{"
        elif c == ":":
            self.expect_key = False
        elif c == '"':
            self.state, self.key = _STRING, self.expect_key
        elif c in _NUMBER_START:
            self.state = _NUMBER_STATE
            return "number"
        elif c.isalpha():
            self.state = _LITERAL
        return "structure"


def word_class(text: str) -> str:
    """The kind of token a correction replaced the draft's with."""
    s = text.strip()
    if not text:
        return "where the output ends"  # the target stopped (EOS) where the draft went on
    if not s:
        return "whitespace"
    if any(c.isdigit() for c in s) and all(c.isdigit() or c in ".,:/-" for c in s):
        return "numbers and dates"
    if not any(c.isalnum() for c in s):
        return "punctuation"
    if s[0].isupper():
        return "capitalised words"
    return "words"


@dataclass
class WhereLost:
    """Per-region verdict counts and correction contexts of one scope (a request or a session)."""

    by_region: dict[str, dict[str, int]] = field(default_factory=dict)
    corrections: dict[str, int] = field(default_factory=dict)
    """Correction context (``context_key``) → corrections."""
    examples: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    """Context → up to ``_EXAMPLES`` of (t, request id, step index, before, draft, target), the
    earliest by stream position."""

    def add_region(self, region: str, verdict: str) -> None:
        counts = self.by_region.get(region)
        if counts is None:
            counts = self.by_region[region] = {}
        counts[verdict] = counts.get(verdict, 0) + 1

    def add_correction(self, key: str, example: tuple[Any, ...]) -> None:
        self.corrections[key] = self.corrections.get(key, 0) + 1
        kept = self.examples.setdefault(key, [])
        if len(kept) < _EXAMPLES or example < kept[-1]:
            kept.append(example)
            kept.sort()
            del kept[_EXAMPLES:]

    def merge(self, other: WhereLost) -> None:
        for region, counts in other.by_region.items():
            for verdict, n in counts.items():
                mine = self.by_region.setdefault(region, {})
                mine[verdict] = mine.get(verdict, 0) + n
        for key, n in other.corrections.items():
            self.corrections[key] = self.corrections.get(key, 0) + n
        for key, theirs in other.examples.items():
            self.examples[key] = sorted(self.examples.get(key, []) + theirs)[:_EXAMPLES]

    def region_counts(self) -> list[tuple[str, float | None, int, int]]:
        """(region, acceptance, verified drafts, tokens) for each region with tokens, in display order:
        acceptance is accepted ÷ verified (accepted + corrections), ``None`` where no draft was verified."""
        rows = []
        for region in REGIONS:
            counts = self.by_region.get(region)
            if counts is None:
                continue
            accepted = counts.get("accepted", 0)
            verified = accepted + counts.get("correction", 0)
            rows.append((region, accepted / verified if verified else None, verified, sum(counts.values())))
        return rows

    def region_acceptance(self) -> dict[str, float | None]:
        """Region → accepted ÷ (accepted + corrections), ``None`` where no draft was verified."""
        return {region: rate for region, rate, _verified, _tokens in self.region_counts()}

    def top_corrections(self, n: int = 3) -> list[dict[str, Any]]:
        """The ``n`` most frequent correction contexts (ties: by name), with their examples."""
        ranked = sorted(self.corrections.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
        return [
            {
                "context": key,
                "count": count,
                "examples": [
                    {"request_id": rid, "before": before, "draft": draft, "target": target}
                    for _t, rid, _i, before, draft, target in self.examples.get(key, [])
                ],
            }
            for key, count in ranked
        ]

    def region_line(self) -> str:
        """``keys & punctuation 98% of 40 · string values 90% of 31 · …`` (of N: verified drafts);
        "" when no request ran under a schema."""
        parts = []
        for region, rate, verified, tokens in self.region_counts():
            shown = "–" if rate is None else f"{rate:.0%}"
            parts.append(f"{REGIONS[region]} {shown} of {verified} ({tokens} tokens)")
        return " · ".join(parts)

    def correction_lines(self, n: int = 3) -> list[str]:
        """ "the draft gets X wrong" for the ``n`` most frequent correction contexts, with an example."""
        total = sum(self.corrections.values())
        lines = []
        for top in self.top_corrections(n):
            line = f"the draft gets {top['context']} wrong: {top['count']} of {total} corrections"
            if top["examples"]:
                ex = top["examples"][0]
                drafted = f"the draft wrote {ex['draft']!r}, " if ex["draft"] else ""  # older sessions: no text
                line += f" (e.g. after {ex['before']!r} {drafted}the target wrote {ex['target']!r})"
            lines.append(line)
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "by_region": {r: dict(sorted(self.by_region[r].items())) for r in REGIONS if r in self.by_region},
            "region_acceptance": self.region_acceptance(),
            "correction_contexts": self.top_corrections(len(self.corrections)),
        }


def context_key(text: str, region: str | None) -> str:
    """A correction's context: its word class, and its region under a schema."""
    cls = word_class(text)
    return cls if region is None else f"{cls} {_WHERE[region]}"


class RequestTracker:
    """One request's running state for ``WhereLost``: its lexer (under a JSON schema) and its last
    token's text (the context of a correction that opens a step)."""

    __slots__ = ("lexer", "last")

    def __init__(self, structured: bool) -> None:
        self.lexer = JsonRegions() if structured else None
        self.last = ""

    def count(self, step: Any, scopes: tuple[WhereLost, ...]) -> None:
        """Count one step's tokens into ``scopes``. Unstructured: O(1) per step (a step has at most
        one correction, at index ``accepted``); structured: one lexer pass over the tokens' text."""
        tokens = step.tokens
        if not tokens:
            return
        lexer = self.lexer
        if lexer is None:
            i = step.accepted
            if i < len(tokens) and tokens[i].verdict == "correction":
                self._correction(step, i, None, scopes)
        else:
            for i, tok in enumerate(tokens):
                region = lexer.feed(tok.text)
                if tok.forced:
                    region = "forced"
                for scope in scopes:
                    scope.add_region(region, tok.verdict)
                if tok.verdict == "correction":
                    self._correction(step, i, region, scopes)
        self.last = tokens[-1].text

    def _correction(self, step: Any, i: int, region: str | None, scopes: tuple[WhereLost, ...]) -> None:
        tok = step.tokens[i]
        before = step.tokens[i - 1].text if i else self.last
        draft = step.rejected_text[0] if step.rejected_text else ""
        example = (step.t, step.request_id, step.index, before, draft, tok.text)
        key = context_key(tok.text, region)
        for scope in scopes:
            scope.add_correction(key, example)
