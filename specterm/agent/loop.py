"""The multi-step agent loop: validate → retrieve → (generate a call → run the tool)* → answer.

One user request runs as numbered *agent steps* (``AgentStepStarted``/``AgentStepFinished``, kinds
``validate``, ``retrieve``, ``tool_call``, ``tool``, ``answer``) around the engine's own events:

1. ``UserMessage``, then ``validate``: the text must be non-empty UTF-8, at most 8 KB, with no
   control characters other than tab and newline (``UserRequest``).
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

The last of ``max_steps`` generations may only answer, so a request always ends; so may the one after
a call that repeats the previous call exactly (a loop: the call is not run again). Invalid output (cut
at ``max_tokens``) is fed back as an error result. A step that fails or is cancelled finishes with
``ok=False``; every started step is finished, so the stream is consistent whatever happens.
The loop runs in the engine's thread, takes any ``SpecEngine`` and a sink, and never imports textual.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError, field_validator

from specterm.agent.definition import AgentDef
from specterm.agent.grounding import ungrounded
from specterm.agent.prompt import Call, build_chat, call_key_for, call_schema, parse_call
from specterm.agent.tools import ToolBox, ToolOutcome
from specterm.engine.base import GenerationParams, SessionClock, SpecEngine
from specterm.engine.chat import ChatPrompt
from specterm.errors import ConfigError, first_error
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

MAX_INPUT_BYTES = 8192
MAX_RETRIEVE_QUERY = 1000
"""A tool result used as a retrieval query is cut here (the embedder reads 256 tokens anyway)."""
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class UserRequest(BaseModel):
    """A user's request as the loop accepts it (see the module doc for the rules)."""

    text: str

    @field_validator("text")
    @classmethod
    def _check(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("empty request")
        try:
            size = len(v.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError("request is not valid UTF-8 text (binary input is refused)") from None
        if size > MAX_INPUT_BYTES:
            raise ValueError(f"request too large: {size} bytes (limit {MAX_INPUT_BYTES})")
        bad = _CONTROL.search(v)
        if bad:
            raise ValueError(
                f"request contains control character U+{ord(bad.group()):04X} at "
                f"position {bad.start()} (binary input is refused)"
            )
        return v


def validate_request(text: str) -> str | None:
    """None when ``text`` is acceptable, else the one-line reason."""
    try:
        UserRequest(text=text)
    except ValidationError as err:
        return first_error(err)[1]
    return None


def sent_back_note(invented: list[str], result: AgentResult) -> str:
    """What the model reads after an ungrounded answer: which figures, and the failed call if any."""
    failed = result.last_failure()
    said = f"the answer states {', '.join(invented)}, which no tool result of this request contains"
    if failed is not None:
        return f"{said}; {failed[0]} failed ({failed[1]}): call it again fixed, or answer saying what failed"
    return f"{said}: answer with the figures the tools returned, or call a tool to find them"


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
        rid = request_id or "a" + uuid.uuid4().hex[:8]
        clock, agent = self.clock, self.agent
        cancel = cancel or threading.Event()
        result = AgentResult(request_id=rid, ok=False)
        step = 0

        def start(kind: str) -> float:
            sink(AgentStepStarted(t=clock(), request_id=rid, step=step, kind=kind))
            return time.perf_counter()

        def finish(kind: str, t0: float, ok: bool = True, **kw: Any) -> None:
            sink(
                AgentStepFinished(
                    t=clock(), request_id=rid, step=step, kind=kind, latency_s=time.perf_counter() - t0, ok=ok, **kw
                )
            )

        def fail(message: str, level: str = "error") -> None:
            sink(Error(t=clock(), level=level, where="agent", request_id=rid, message=message))

        sink(UserMessage(t=clock(), request_id=rid, text=text[:MAX_INPUT_BYTES]))
        if self.notice:
            fail(self.notice, "warning")
            self.notice = None
        t0 = start("validate")
        problem = validate_request(text)
        finish("validate", t0, ok=problem is None)
        if problem:
            fail(problem)
            result.error = problem
            return result
        step += 1

        passages: list[Passage] = []

        def retrieve(query: str) -> None:
            nonlocal step
            t0 = start("retrieve")
            try:
                seen = {(p.doc, p.text) for p in passages}  # a passage's score differs per query
                found = [p for p in self.tools.retrieve(query) if (p.doc, p.text) not in seen]
                passages.extend(found)
                sink(Retrieval(t=clock(), request_id=rid, step=step, query=query, passages=found))
                finish("retrieve", t0)
            except Exception as err:  # noqa: BLE001 - retrieval is optional; the request goes on
                finish("retrieve", t0, ok=False)
                fail(f"retrieval failed: {type(err).__name__}: {err}", "warning")
            step += 1

        if self.tools.retrieves and not cancel.is_set():
            retrieve(text)

        history: list[tuple[str, str]] = [("user", text)]
        must_answer = False  # set when the model repeated its previous call: it is looping
        sent_back = False  # an ungrounded answer was returned to the model once (never invent)
        for gen in range(agent.max_steps):
            if cancel.is_set():
                break
            answer_only = must_answer or gen == agent.max_steps - 1
            kind = "answer" if answer_only else "tool_call"
            t0 = start(kind)
            try:
                prompt, why = self.fit_prompt(history, passages)
            except ConfigError as err:  # the model's chat template refused: nothing was generated
                prompt, why = None, str(err)
            if prompt is None:
                finish(kind, t0, ok=False)
                fail(why)
                result.error = why
                return result
            call_only = agent.tool_first and not result.calls and not answer_only
            params = GenerationParams(
                max_tokens=agent.max_tokens,
                temperature=self.temperature,
                json_schema=call_schema(agent, answer_only=answer_only, key=self.call_key, call_only=call_only),
            )
            try:
                done = self.engine.generate(prompt, params, sink, request_id=f"{rid}-{step}", cancel=cancel)
            except Exception as err:  # noqa: BLE001 - an engine failure ends this request, not the app
                finish(kind, t0, ok=False)
                result.error = f"generation failed: {type(err).__name__}: {err}"
                fail(result.error)
                return result
            result.generations += 1
            stats = dict(ttft_s=done.ttft_s, tokens=done.output_tokens)
            if done.cancelled:
                finish(kind, t0, ok=False, **stats)
                break
            try:
                call = parse_call(agent, done.text, answer_only=answer_only, key=self.call_key, call_only=call_only)
            except ValueError as err:
                finish(kind, t0, ok=False, **stats)
                reason = f"step {step}: invalid output ({done.finish_reason}): {err}"
                fail(reason, "warning")
                history += [("call", done.text), ("result", f"error: {err}")]
                step += 1
                continue
            if call.answer is not None:
                evidence = [text, *(o.content or o.error or "" for o in result.outcomes)]
                invented = ungrounded(call.answer, evidence)
                if invented and not answer_only and not sent_back:
                    # Once per request: the answer goes back to the model as an error result, so it can
                    # call again (fix the query) or say what failed; the prompt grows by one pair.
                    finish(kind, t0, ok=False, ungrounded=invented, **stats)
                    fail(
                        f"step {step}: the answer states {', '.join(invented)}, which no tool result "
                        "contains: sent back to the model",
                        "warning",
                    )
                    history += [("call", done.text), ("result", f"error: {sent_back_note(invented, result)}")]
                    sent_back = True
                    step += 1
                    continue
                failed = result.last_failure()
                if invented and failed is not None:
                    # Still invented, after a failed call: the agent says what failed instead of
                    # giving a figure nobody returned; the model's answer stays on the record.
                    honest = f"I could not answer that: {failed[0]} failed ({failed[1]})."
                    finish(kind, t0, answer=honest, ungrounded=invented, withheld=call.answer, **stats)
                    result.ok, result.answer = True, honest
                    return result
                finish(kind, t0, answer=call.answer, ungrounded=invented, **stats)
                result.ok, result.answer = True, call.answer
                return result
            if result.calls and (call.tool, call.arguments) == (result.calls[-1].tool, result.calls[-1].arguments):
                # The same tool with the same arguments as the step before: its result is already in
                # the conversation, and a model that asks again is looping (seen on the Qwen pair: one
                # query three times until the last step forced an answer). It is not run again, the
                # prompt stays as it was (so its prefix is cached) and the next generation may only answer.
                finish(kind, t0, **stats)
                fail(
                    f"step {step} repeats the previous call ({call.tool} with the same arguments): not run "
                    "again; the next step may only answer",
                    "warning",
                )
                step += 1
                must_answer = True
                continue
            result.calls.append(call)
            sink(ToolCall(t=clock(), request_id=rid, step=step, name=call.tool, arguments=call.arguments, raw=call.raw))
            finish(kind, t0, **stats)
            step += 1
            if cancel.is_set():
                break
            t0 = start("tool")
            outcome = self.tools.call(call.tool, call.arguments)
            result.outcomes.append(outcome)
            sink(
                ToolResult(
                    t=clock(),
                    request_id=rid,
                    step=step,
                    name=call.tool,
                    ok=outcome.ok,
                    content=outcome.content,
                    error=outcome.error,
                    truncated=outcome.truncated,
                    latency_s=outcome.latency_s,
                )
            )
            finish("tool", t0, ok=outcome.ok)
            step += 1
            history += [("call", call.raw), ("result", outcome.for_prompt(agent.result_chars))]
            tool = agent.tool(call.tool)
            if (
                tool is not None
                and tool.retrieve_after
                and outcome.ok
                and outcome.content.strip()
                and not cancel.is_set()
            ):
                retrieve(outcome.content[:MAX_RETRIEVE_QUERY])
        if cancel.is_set():
            result.cancelled, result.error = True, "cancelled"
        else:
            result.error = f"no valid answer within {agent.max_steps} generations"
            fail(result.error)
        return result
