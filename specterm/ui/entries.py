"""The transcript's content model: one ``Entry`` per block (a user message, an agent step, a tool
result, an error ...), built from events and rendered to ``rich.text.Text``.

No widgets here. Every piece of untrusted text (tokens, tool output, passages, error messages) goes
through ``inert`` and ``Text.append``, which never parses markup, so a model that emits ``[red]``
or an escape sequence prints it literally.

Token text is built incrementally: a ``TokensPart`` renders only the steps added since the last
render, and rebuilds from scratch only when the styles or the show-rejected / show-forced toggles
change. A 2,000-token answer therefore costs the new tokens per batch, not all of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rich.style import Style
from rich.text import Span, Text

from specterm.events import SpecStep
from specterm.render import inert, step_pieces
from specterm.stats import fmt_opt

MAX_TEXT_CHARS = 2000
"""Tool results and passages are cut here in the transcript (the session file keeps everything)."""

KIND_TITLES = {
    "user": "you",
    "validate": "validate",
    "retrieve": "retrieve",
    "tool_call": "tool call",
    "tool": "tool",
    "answer": "answer",
    "generation": "generation",
    "tool_result": "tool result",
    "retrieval": "retrieval",
    "error": "error",
    "warning": "warning",
    "end": "session",
}


@dataclass(frozen=True)
class ViewOptions:
    show_rejected: bool = False
    show_forced: bool = True


def _cut(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"… (+{len(text) - limit} chars)"


class TokensPart:
    """The tokens of one request, in engine-step order."""

    def __init__(self) -> None:
        self.steps: list[SpecStep] = []
        self._text = Text()
        self._rendered = 0
        self._key: Any = None

    def add(self, step: SpecStep) -> None:
        self.steps.append(step)

    def plain(self) -> str:
        return "".join(tok.text for step in self.steps for tok in step.tokens)

    def render(self, styles: dict[str, Style], opts: ViewOptions) -> Text:
        key = (id(styles), opts)
        if key != self._key:
            self._text, self._rendered, self._key = Text(), 0, key
        for step in self.steps[self._rendered :]:
            self._append_step(self._text, step, styles, opts)
        self._rendered = len(self.steps)
        return self._text

    @staticmethod
    def _append_step(out: Text, step: SpecStep, styles: dict[str, Style], opts: ViewOptions) -> None:
        forced = styles["forced-layer"]

        def put(text: str, style: Style) -> None:
            # Runs of one style become one span: a 500-token answer of mostly accepted tokens
            # renders (and converts to Textual Content) far cheaper than one span per token.
            spans = out.spans
            end = len(out)
            if spans and spans[-1].end == end and spans[-1].style == style:
                out.append(text)
                spans[-1] = Span(spans[-1].start, len(out), style)
            else:
                out.append(text, style)

        for text, verdict, is_forced in step_pieces(step, show_rejected=opts.show_rejected):
            style = styles[verdict]
            put(text, style + forced if opts.show_forced and is_forced else style)


@dataclass
class Line:
    text: str
    style: str = "body"
    prefix: str = ""


@dataclass
class Entry:
    """One transcript block."""

    kind: str
    title: str = ""
    request_id: str | None = None
    step: int | None = None
    parts: list[TokensPart | Line] = field(default_factory=list)
    footer: str = ""
    footer_style: str = "meta"
    open: bool = True
    version: int = 0
    final_text: str = ""
    """The request's own final text (``request_finished.text``), preferred for "copy answer"."""

    @property
    def label(self) -> str:
        return self.title or KIND_TITLES.get(self.kind, self.kind)

    def touch(self) -> None:
        self.version += 1

    def tokens(self) -> TokensPart:
        if not self.parts or not isinstance(self.parts[-1], TokensPart):
            self.parts.append(TokensPart())
        part = self.parts[-1]
        assert isinstance(part, TokensPart)
        return part

    def add_line(self, text: str, style: str = "body", prefix: str = "") -> None:
        self.parts.append(Line(text, style, prefix))
        self.touch()

    def plain_output(self) -> str:
        return "".join(p.plain() for p in self.parts if isinstance(p, TokensPart))

    def render(self, styles: dict[str, Style], opts: ViewOptions) -> Text:
        out = Text(no_wrap=False, overflow="fold")
        out.append(self.label, styles["title"])
        for part in self.parts:
            out.append("\n")
            if isinstance(part, TokensPart):
                out.append_text(part.render(styles, opts))
            else:
                if part.prefix:
                    out.append(part.prefix, styles["meta"])
                out.append(inert(part.text), styles.get(part.style, styles["body"]))
        if self.footer:
            out.append("\n")
            out.append(inert(self.footer), styles[self.footer_style])
        return out


def json_compact(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        return repr(value)


def step_footer(latency_s: float, ttft_s: float | None, tokens: int, ok: bool) -> str:
    rate = tokens / latency_s if latency_s and tokens else None
    bits = [f"{latency_s:.2f} s"]
    if ttft_s is not None:
        bits.append(f"TTFT {ttft_s * 1000:.0f} ms")
    if tokens:
        bits.append(f"{tokens} tok")
        bits.append(f"{fmt_opt(rate, '.1f')} tok/s")
    if not ok:
        bits.append("FAILED")
    return " · ".join(bits)
