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
import re
from dataclasses import dataclass, field
from typing import Any

from rich.style import Style
from rich.text import Span, Text

from specterm.events import SpecStep
from specterm.render import inert, step_pieces
from specterm.stats import fmt_opt, tokens_per_s

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
    show_answer_tokens: bool = False
    """An answer step shows the answer as text; on, the call it was generated as, token by token."""


def _cut(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"… (+{len(text) - limit} chars)"


class TokensPart:
    """The tokens of one request, in engine-step order, as logical lines (split at ``\n``).

    Built incrementally: only steps added since the last call are styled, and they can only change
    the last line (the *tail*); the lines before it are finished and are handed out as the same
    objects every time, so the widget measures and wraps each of them once. Everything is rebuilt
    only when the styles or the show-rejected / show-forced toggles change."""

    def __init__(self) -> None:
        self.steps: list[SpecStep] = []
        self._done: list[Text] = []
        self._tail = Text()
        self._rendered = 0
        self._key: Any = None

    def add(self, step: SpecStep) -> None:
        self.steps.append(step)

    def plain(self) -> str:
        return "".join(tok.text for step in self.steps for tok in step.tokens)

    def lines(self, styles: dict[str, Style], opts: ViewOptions) -> list[Text]:
        """The logical lines; finished ones are the same objects as last time, and the tail only
        ever grows in place (so ``(id, len)`` identifies a line's content)."""
        key = (id(styles), opts)
        if key != self._key:
            self._done, self._tail, self._rendered, self._key = [], Text(), 0, key
        for step in self.steps[self._rendered :]:
            self._append_step(step, styles, opts)
        self._rendered = len(self.steps)
        return [*self._done, self._tail]

    def render(self, styles: dict[str, Style], opts: ViewOptions) -> Text:
        """All the tokens as one ``Text`` (tests, text selection); the widget draws ``lines``."""
        return Text("\n").join(self.lines(styles, opts))

    def _append_step(self, step: SpecStep, styles: dict[str, Style], opts: ViewOptions) -> None:
        forced = styles["forced-layer"]
        for text, verdict, is_forced in step_pieces(step, show_rejected=opts.show_rejected):
            style = styles[verdict]
            style = style + forced if opts.show_forced and is_forced else style
            first, *rest = text.split("\n")
            self._put(first, style)
            for chunk in rest:  # a newline finishes the tail: it never changes again
                self._done.append(self._tail)
                self._tail = Text()
                self._put(chunk, style)

    def _put(self, text: str, style: Style) -> None:
        # Runs of one style become one span: a 500-token answer of mostly accepted tokens renders
        # (and converts to Textual Content) far cheaper than one span per token.
        if not text:
            return
        out = self._tail
        spans = out.spans
        end = len(out)
        if spans and spans[-1].end == end and spans[-1].style == style:
            out.append(text)
            spans[-1] = Span(spans[-1].start, len(out), style)
        else:
            out.append(text, style)


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
    answer: str | None = None
    """The agent's answer, when this step produced it: shown as text in place of the generated call
    (``ViewOptions.show_answer_tokens`` brings the verdict-coloured tokens back)."""
    _key: Any = field(default=None, repr=False, compare=False)
    _static: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    """Styled lines of the title, ``Line`` parts and footer, for the styles and options in ``_key``."""

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

    def lines(self, styles: dict[str, Style], opts: ViewOptions) -> list[Text]:
        """The block as logical lines (title, parts, footer). A line that did not change since the
        last call is the same object, and only a request's last line grows in place, so the widget
        keys its wrapped strips on ``(id(line), len(line))`` and re-wraps only what changed."""
        key = (id(styles), opts)
        if key != self._key:
            self._key, self._static = key, {}
        static = self._static
        title = static.get("title")
        if title is None or title.plain != self.label:
            title = static["title"] = Text(self.label, styles["title"])
        out = [title]
        as_text = self.answer is not None and not opts.show_answer_tokens
        if as_text:
            answer = static.get("answer")
            if answer is None:
                answer = static["answer"] = answer_lines(self.answer, styles["body"])
            out.extend(answer)
        for i, part in enumerate(self.parts):
            if isinstance(part, TokensPart):
                if not as_text:
                    out.extend(part.lines(styles, opts))
                continue
            cached = static.get(i)
            if cached is None:  # Line parts never change once added: split and styled once
                text = Text()
                if part.prefix:
                    text.append(part.prefix, styles["meta"])
                text.append(inert(part.text), styles.get(part.style, styles["body"]))
                cached = static[i] = list(text.split("\n", allow_blank=True))
            out.extend(cached)
        if self.footer:
            footer = static.get("footer")
            if footer is None or footer.plain != inert(self.footer) or static.get("footer_style") != self.footer_style:
                footer = static["footer"] = Text(inert(self.footer), styles[self.footer_style])
                static["footer_style"] = self.footer_style
            out.append(footer)
        return out

    def render(self, styles: dict[str, Style], opts: ViewOptions) -> Text:
        """The whole block as one ``Text`` (tests); the transcript draws ``lines``."""
        out = Text("\n", no_wrap=False, overflow="fold").join(self.lines(styles, opts))
        out.no_wrap, out.overflow = False, "fold"
        return out


_MARKDOWN = re.compile(r"^\s*(?:[-*+] |\d+[.)] |#{1,6} |\||```|> )", re.MULTILINE)
"""Lines that make an answer structured: a list, a heading, a table, a code block, a quote."""
MARKDOWN_WIDTH = 200
"""Markdown is laid out once at this width (paragraphs are then wrapped by the transcript like any
text); a table keeps its natural width, which is its content's."""


def answer_lines(answer: str, body: Style) -> list[Text]:
    """The agent's answer as lines: plain text, or Markdown (rich's renderer) when it has structure.
    A one-line answer stays exactly its text: Markdown would eat a ``*`` or ``_`` it happens to hold."""
    text = inert(answer)
    if not _MARKDOWN.search(text):
        return list(Text(text, body).split("\n", allow_blank=True))
    from rich.console import Console
    from rich.markdown import Markdown

    console = Console(width=MARKDOWN_WIDTH, force_terminal=True, color_system="truecolor")
    rendered = console.render_lines(
        Markdown(text), console.options.update(width=MARKDOWN_WIDTH), style=body, pad=False, new_lines=False
    )
    out: list[Text] = []
    for segments in rendered:
        line = Text.assemble(*((seg.text, seg.style) for seg in segments if not seg.control))
        line.rstrip()
        if line.plain or (out and out[-1].plain):  # no blank line first, none doubled
            out.append(line)
    while out and not out[-1].plain:
        out.pop()
    return out


def json_compact(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        return repr(value)


def step_footer(latency_s: float, ttft_s: float | None, tokens: int, ok: bool) -> str:
    rate = tokens_per_s(tokens, latency_s)
    bits = [f"{latency_s:.2f} s"]
    if ttft_s is not None:
        bits.append(f"TTFT {ttft_s * 1000:.0f} ms")
    if tokens:
        bits.append(f"{tokens} tok")
        bits.append(f"{fmt_opt(rate, '.1f')} tok/s")
    if not ok:
        bits.append("FAILED")
    return " · ".join(bits)
