"""The multi-step agent loop: validate → retrieve → (generate a call → run the tool)* → answer.

One user request runs as numbered *agent steps* (``AgentStepStarted``/``AgentStepFinished``, kinds
``validate``, ``retrieve``, ``tool_call``, ``tool``, ``answer``) around the engine's own events:

1. ``UserMessage``, then ``validate``: the text must be non-empty UTF-8, at most 8 KB, with no
   control characters other than tab and newline (``agent.request``).
2. ``retrieve``: the agent's nearest worked examples (``agent.examples``, ``doc="example"``) and
   top-k passages for the request (``Retrieval``), if it has either.
3. A generation step (``tool_call``; ``answer`` on the last allowed step): the prompt
   (``prompt.build_chat``, rendered by the model's chat template) is generated under the call shape (``prompt.call_schema``: one branch
   per tool plus the final answer) through ``GenerationParams(json_schema=...)``, parsed, and either
   ends the request with an answer or emits ``ToolCall``.
4. ``tool``: the tool runs (``ToolBox.call``: never raises, times out) and emits ``ToolResult``;
   the call and its result are appended to the history, and step 3 repeats. A tool with
   ``retrieve_after = true`` is followed by another ``retrieve`` step whose query is its result:
   what it finds joins the context (passages already there are not repeated).

An answer is checked against what the turn's tools returned (``grounding``): an invented figure
goes back to the model once; after a failed call it is withheld (kept as ``withheld`` on the step),
and so is any answer after every call of the turn failed, in favour of a note of what failed.

``AgentRunner.run`` is only the order of the steps; each step, and the state they share (the step
counter, the conversation, the passages, the loop's flags), is a method of ``_Turn``, and each
generation says what comes next (``Next``).

The last of ``max_steps`` generations may only answer, so a request always ends; so may the one after
a call that repeats the previous call exactly (a loop: the call is not run again). Invalid output (cut
at ``max_tokens``) is fed back as an error result. A step that fails or is cancelled finishes with
``ok=False``; every started step is finished, so the stream is consistent whatever happens.
The loop runs in the engine's thread, takes any ``SpecEngine`` and a sink, and never imports textual.
"""

from __future__ import annotations

import enum
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specterm.agent.definition import AgentDef
from specterm.agent.grounding import ungrounded
from specterm.agent.prompt import Call, build_chat, call_key_for, call_schema, parse_call
from specterm.agent.request import MAX_INPUT_BYTES, validate_request
from specterm.agent.tools import ToolBox, ToolOutcome
from specterm.engine.base import GenerationParams, SessionClock, SpecEngine
from specterm.engine.chat import ChatPrompt
from specterm.errors import ConfigError
from specterm.events import (
    AgentStepFinished,
    AgentStepStarted,
    Error,
    Passage,
    Retrieval,
    Sink,
    ToolCall,
    ToolResult,
    UserMessage,
)

MAX_RETRIEVE_QUERY = 1000
"""A tool result used as a retrieval query is cut here (the embedder reads 256 tokens anyway)."""


def sent_back_note(invented: list[str], result: AgentResult) -> str:
    """What the model reads after an ungrounded answer: which figures, and the failed call if any."""
    failed = result.last_failure()
    said = f"the answer states {', '.join(invented)}, which no tool result of this request contains"
    if failed is not None:
        return f"{said}; {failed[0]} failed ({failed[1]}): call it again fixed, or answer saying what failed"
    return f"{said}: answer with the figures the tools returned, or call a tool to find them"


def withheld_note(failed: tuple[str, str], *, all_failed: bool) -> str:
    """What the agent answers instead of the model's unsupported answer: the last failure, and, when
    no call of the turn worked, that the question may be beyond its tools."""
    note = f"I could not answer that: {failed[0]} failed ({failed[1]})."
    if all_failed:
        note += " The question may be outside what my tools can answer."
    return note


@dataclass
class AgentResult:
    request_id: str
    ok: bool
    answer: str | None = None
    error: str | None = None
    cancelled: bool = False
    calls: list[Call] = field(default_factory=list)
    """Every parsed tool call, in order (answers excluded)."""
    outcomes: list[ToolOutcome] = field(default_factory=list)
    generations: int = 0

    def last_failure(self) -> tuple[str, str] | None:
        """(tool, error) of the turn's last failed tool call, if any."""
        for call, outcome in zip(reversed(self.calls), reversed(self.outcomes)):
            if not outcome.ok:
                return call.tool, outcome.error or "failed"
        return None


class AgentRunner:
    """Runs requests for one agent on one engine. ``run`` blocks; call it from the engine thread."""

    def __init__(
        self,
        agent: AgentDef,
        engine: SpecEngine,
        *,
        temperature: float = 0.0,
        clock: Callable[[], float] | None = None,
        toolbox: ToolBox | None = None,
        notice: str | None = None,
    ) -> None:
        self.agent, self.engine, self.temperature = agent, engine, temperature
        self.notice = notice
        """A warning the first request carries (the model was not trained for this agent)."""
        self.clock = clock or getattr(engine, "clock", None) or SessionClock()
        self.tools = toolbox or ToolBox(agent)
        renderer = getattr(engine, "renderer", None)
        self.call_key = call_key_for(renderer.template if renderer is not None else None)

    # -- prompt fitting ---------------------------------------------------------------------------

    def _count_tokens(self, chat: ChatPrompt) -> int | None:
        """Tokens of ``chat`` as the engine will render it (its chat template), if it can say."""
        renderer = getattr(self.engine, "renderer", None)
        return len(renderer.ids(chat)) if renderer is not None else None

    def fit_prompt(self, history: list[tuple[str, str]], passages: list[Passage]) -> tuple[ChatPrompt | None, str]:
        """The longest conversation that leaves ``max_tokens`` of context: drop passages (last first),
        then the oldest call/result pairs, then halve the newest result. Returns (prompt, "") or
        (None, reason). Deterministic, so speculative and target-only runs see the same prompts.
        Raises ``ChatTemplateError`` when the model's template refuses the conversation."""
        context = getattr(self.engine, "max_model_len", None)
        limit = context - self.agent.max_tokens if context is not None else None
        if limit is not None and limit <= 0:
            return None, (
                f"max_tokens {self.agent.max_tokens} leaves no room for a prompt in the "
                f"model's context ({context} tokens)"
            )
        user, turns = history[:1], history[1:]
        passages = list(passages)
        while True:
            chat = build_chat(self.agent, user + turns, passages, key=self.call_key)
            n = self._count_tokens(chat) if limit is not None else None
            if n is None or n <= limit:
                return chat, ""
            if passages:
                passages.pop()
            elif len(turns) > 2:
                turns = turns[2:]
            elif turns and len(turns[-1][1]) > 64:  # last resort: keep the head of the newest result
                role, body = turns[-1]
                turns = turns[:-1] + [(role, body[: len(body) // 2] + " …(cut)")]
            else:
                return None, (
                    f"the request does not fit the model's context ({n} prompt tokens > {limit}; "
                    f"context {context} minus max_tokens {self.agent.max_tokens})"
                )

    # -- the loop ---------------------------------------------------------------------------------

    def run(
        self, text: str, sink: Sink, *, request_id: str | None = None, cancel: threading.Event | None = None
    ) -> AgentResult:
        """One request, validate → retrieve → (generate → tool)* → answer; see the module doc. Every
        branch of a step lives in ``_Turn``; this method is the order of the steps and nothing else."""
        turn = _Turn(self, text, sink, request_id or "a" + uuid.uuid4().hex[:8], cancel or threading.Event())
        if self.notice:
            turn.warn(self.notice)
            self.notice = None
        if not turn.validate():
            return turn.result
        if self.tools.retrieves and not turn.cancel.is_set():
            turn.retrieve(text)
        for gen in range(self.agent.max_steps):
            if turn.cancel.is_set():
                break
            outcome = turn.generate(answer_only=turn.must_answer or gen == self.agent.max_steps - 1)
            if outcome is Next.END:
                return turn.result
            if outcome is Next.STOP or turn.cancel.is_set():
                break
            if outcome is Next.TOOL:
                turn.run_tool()
        return turn.close()


class Next(enum.Enum):
    """What a generation step leads to."""

    TOOL = "tool"
    """a new tool call: run it, then generate again"""
    AGAIN = "again"
    """nothing to run (invalid output, an answer sent back, a repeated call): generate again"""
    STOP = "stop"
    """cancelled during the generation: the request ends cancelled"""
    END = "end"
    """the request ended (an answer, or a failure that ends it): ``result`` is final"""


class _Turn:
    """One request's state while ``AgentRunner.run`` advances it: the step counter, the conversation
    so far, the passages, and the two flags that change what the next generation may do. Each public
    method is one step of the loop and emits that step's events; every started step is finished."""

    def __init__(self, runner: AgentRunner, text: str, sink: Sink, rid: str, cancel: threading.Event) -> None:
        self.runner, self.agent, self.tools = runner, runner.agent, runner.tools
        self.text, self.sink, self.rid, self.cancel = text, sink, rid, cancel
        self.clock = runner.clock
        self.result = AgentResult(request_id=rid, ok=False)
        self.step = 0
        self.passages: list[Passage] = []
        self.history: list[tuple[str, str]] = [("user", text)]
        self.must_answer = False
        """set when the model repeated its previous call: it is looping, so the next step only answers"""
        self.sent_back = False
        """an ungrounded answer was returned to the model once (never invent, never twice)"""
        self.pending: Call | None = None
        """the call the last generation made, for ``run_tool``"""
        sink(UserMessage(t=self.clock(), request_id=rid, text=text[:MAX_INPUT_BYTES]))

    # -- events -----------------------------------------------------------------------------------

    def _start(self, kind: str) -> float:
        self.sink(AgentStepStarted(t=self.clock(), request_id=self.rid, step=self.step, kind=kind))
        return time.perf_counter()

    def _finish(self, kind: str, t0: float, ok: bool = True, **kw: Any) -> None:
        latency = time.perf_counter() - t0
        self.sink(
            AgentStepFinished(
                t=self.clock(), request_id=self.rid, step=self.step, kind=kind, latency_s=latency, ok=ok, **kw
            )
        )

    def _error(self, message: str, level: str = "error") -> None:
        self.sink(Error(t=self.clock(), level=level, where="agent", request_id=self.rid, message=message))

    def warn(self, message: str) -> None:
        self._error(message, "warning")

    def _end(self, error: str) -> Next:
        self._error(error)
        self.result.error = error
        return Next.END

    # -- steps ------------------------------------------------------------------------------------

    def validate(self) -> bool:
        t0 = self._start("validate")
        problem = validate_request(self.text)
        self._finish("validate", t0, ok=problem is None)
        if problem:
            self._end(problem)
            return False
        self.step += 1
        return True

    def retrieve(self, query: str) -> None:
        t0 = self._start("retrieve")
        try:
            seen = {(p.doc, p.text) for p in self.passages}  # a passage's score differs per query
            found = [p for p in self.tools.retrieve(query) if (p.doc, p.text) not in seen]
            self.passages.extend(found)
            self.sink(Retrieval(t=self.clock(), request_id=self.rid, step=self.step, query=query, passages=found))
            self._finish("retrieve", t0)
        except Exception as err:  # noqa: BLE001 - retrieval is optional; the request goes on
            self._finish("retrieve", t0, ok=False)
            self.warn(f"retrieval failed: {type(err).__name__}: {err}")
        self.step += 1

    def generate(self, *, answer_only: bool) -> Next:
        """One generation under the call shape; parses it and decides what comes next."""
        agent, result, kind = self.agent, self.result, "answer" if answer_only else "tool_call"
        t0 = self._start(kind)
        try:
            prompt, why = self.runner.fit_prompt(self.history, self.passages)
        except ConfigError as err:  # the model's chat template refused: nothing was generated
            prompt, why = None, str(err)
        if prompt is None:
            self._finish(kind, t0, ok=False)
            return self._end(why)
        key = self.runner.call_key
        call_only = agent.tool_first and not result.calls and not answer_only
        params = GenerationParams(
            max_tokens=agent.max_tokens,
            temperature=self.runner.temperature,
            json_schema=call_schema(agent, answer_only=answer_only, key=key, call_only=call_only),
        )
        try:
            done = self.runner.engine.generate(
                prompt, params, self.sink, request_id=f"{self.rid}-{self.step}", cancel=self.cancel
            )
        except Exception as err:  # noqa: BLE001 - an engine failure ends this request, not the app
            self._finish(kind, t0, ok=False)
            return self._end(f"generation failed: {type(err).__name__}: {err}")
        result.generations += 1
        stats = dict(ttft_s=done.ttft_s, tokens=done.output_tokens)
        if done.cancelled:
            self._finish(kind, t0, ok=False, **stats)
            return Next.STOP
        try:
            call = parse_call(agent, done.text, answer_only=answer_only, key=key, call_only=call_only)
        except ValueError as err:
            self._finish(kind, t0, ok=False, **stats)
            self.warn(f"step {self.step}: invalid output ({done.finish_reason}): {err}")
            self.history += [("call", done.text), ("result", f"error: {err}")]
            self.step += 1
            return Next.AGAIN
        if call.answer is not None:
            return self._answer(call, kind, t0, stats, answer_only=answer_only)
        if result.calls and (call.tool, call.arguments) == (result.calls[-1].tool, result.calls[-1].arguments):
            # The same tool with the same arguments as the step before: its result is already in
            # the conversation, and a model that asks again is looping (seen on the Qwen pair: one
            # query three times until the last step forced an answer). It is not run again, the
            # prompt stays as it was (so its prefix is cached) and the next generation may only answer.
            self._finish(kind, t0, **stats)
            self.warn(
                f"step {self.step} repeats the previous call ({call.tool} with the same arguments): not run "
                "again; the next step may only answer"
            )
            self.step += 1
            self.must_answer = True
            return Next.AGAIN
        result.calls.append(call)
        self.sink(
            ToolCall(
                t=self.clock(),
                request_id=self.rid,
                step=self.step,
                name=call.tool,
                arguments=call.arguments,
                raw=call.raw,
            )
        )
        self._finish(kind, t0, **stats)
        self.step += 1
        self.pending = call
        return Next.TOOL

    def _answer(self, call: Call, kind: str, t0: float, stats: dict[str, Any], *, answer_only: bool) -> Next:
        """An answer: kept, sent back once (an invented figure while a call is still allowed), or
        withheld behind what failed (an invented figure after a failed call, or any answer after every
        call of the turn failed: nothing the tools returned supports it)."""
        result = self.result
        evidence = [self.text, *(o.content or o.error or "" for o in result.outcomes)]
        invented = ungrounded(call.answer, evidence)
        if invented and not answer_only and not self.sent_back:
            # Once per request: the answer goes back to the model as an error result, so it can
            # call again (fix the query) or say what failed; the prompt grows by one pair.
            self._finish(kind, t0, ok=False, ungrounded=invented, **stats)
            self.warn(
                f"step {self.step}: the answer states {', '.join(invented)}, which no tool result "
                "contains: sent back to the model"
            )
            self.history += [("call", call.raw), ("result", f"error: {sent_back_note(invented, result)}")]
            self.sent_back = True
            self.step += 1
            return Next.AGAIN
        failed = result.last_failure()
        all_failed = bool(result.outcomes) and not any(o.ok for o in result.outcomes)
        if failed is not None and (invented or all_failed):
            # The agent says what failed instead of an answer nobody's tool supports; the model's
            # answer stays on the record (``withheld``).
            honest = withheld_note(failed, all_failed=all_failed)
            self._finish(kind, t0, answer=honest, ungrounded=invented, withheld=call.answer, **stats)
            result.ok, result.answer = True, honest
            return Next.END
        self._finish(kind, t0, answer=call.answer, ungrounded=invented, **stats)
        result.ok, result.answer = True, call.answer
        return Next.END

    def run_tool(self) -> None:
        """Runs the call the last generation made; its result joins the conversation."""
        call, agent = self.pending, self.agent
        assert call is not None
        self.pending = None
        t0 = self._start("tool")
        outcome = self.tools.call(call.tool, call.arguments)
        self.result.outcomes.append(outcome)
        self.sink(
            ToolResult(
                t=self.clock(),
                request_id=self.rid,
                step=self.step,
                name=call.tool,
                ok=outcome.ok,
                content=outcome.content,
                error=outcome.error,
                truncated=outcome.truncated,
                latency_s=outcome.latency_s,
            )
        )
        self._finish("tool", t0, ok=outcome.ok)
        self.step += 1
        self.history += [("call", call.raw), ("result", outcome.for_prompt(agent.result_chars))]
        tool = agent.tool(call.tool)
        if (
            tool is not None
            and tool.retrieve_after
            and outcome.ok
            and outcome.content.strip()
            and not self.cancel.is_set()
        ):
            self.retrieve(outcome.content[:MAX_RETRIEVE_QUERY])

    def close(self) -> AgentResult:
        """The loop ran out (cancelled, or no answer within ``max_steps``)."""
        if self.cancel.is_set():
            self.result.cancelled, self.result.error = True, "cancelled"
        else:
            self._end(f"no valid answer within {self.agent.max_steps} generations")
        return self.result
