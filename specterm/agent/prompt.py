"""The agent's conversation, its trained text format, and its constrained output shape.

The agent loop sends a conversation (``build_chat``: system, user, assistant calls, tool results,
``tools=``, ``documents=``) that the target's own chat template renders. The embedded pair was
trained on the plain text below; its tokenizer ships ``chat_template.jinja`` (``AGENT_CHAT_TEMPLATE``),
which renders a ``build_chat`` conversation to exactly the bytes of ``render_prompt`` (tested), so
the embedded pair and hub models take one code path. Deterministic: same inputs → same bytes::

    <|system|>
    {agent.system}
    Tools:
    - {name}({arg}: {type}, {optional arg}?: {type}): {description}
    Reply with one JSON object: {"tool": NAME, "arguments": {...}} or {"answer": TEXT}.
    <|context|>                      (only when passages were retrieved)
    [{doc}] {passage text}
    <|user|>
    {the user's request}
    <|call|>
    {the model's JSON, exactly as generated}
    <|result|>
    {the tool's result, or "error: ..."}
    <|call|>                         (the prompt always ends here: the model writes the next call)

Argument types are the schema's ``type`` (``string``, ``integer`` ...), ``a|b|c`` for an enum, and
``lo..hi`` ranges for bounded numbers. Sections are separated by single newlines; there is no
trailing newline after the final ``<|call|>`` line's newline.

The *call shape* (``call_schema``) is a JSON Schema ``anyOf`` with one branch per tool —
``{"tool": {"const": NAME}, "arguments": <the tool's parameters schema>}`` — plus the final-answer
branch ``{"answer": string}``; with ``answer_only=True`` (the last allowed step) only the answer
branch remains, so every request ends with an answer.

The *call key* is ``"tool"`` in the agent format above (the embedded and tiny pairs were trained on
it; their template writes ``<|call|>``). Every other model gets ``"name"`` — ``{"name": NAME,
"arguments": {...}}``, the OpenAI/Hermes function-call object that hub instruct models are tuned to
write (Qwen's template asks for exactly that object inside ``<tool_call>`` tags). Under the
grammar, a key the model never learned is what breaks it: asked for ``"tool"``, Qwen2.5-Coder-1.5B
answered ``"}"`` to its first question; with ``"name"`` it writes the query (``call_key_for``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from specterm.engine.chat import ChatPrompt, Message, tool_spec
from specterm.events import Passage

if TYPE_CHECKING:
    from specterm.agent.definition import AgentDef, ToolDef

Role = Literal["user", "call", "result"]
CallKey = Literal["tool", "name"]


def instruction(key: CallKey = "tool") -> str:
    return f'Reply with one JSON object: {{"{key}": NAME, "arguments": {{...}}}} or {{"answer": TEXT}}.'


INSTRUCTION = instruction("tool")
AGENT_FORMAT_MARK = "<|call|>"


def call_key_for(template: str | None) -> CallKey:
    """``"tool"`` for the agent format (or no template: raw agent text), ``"name"`` otherwise."""
    return "tool" if template is None or AGENT_FORMAT_MARK in template else "name"


def _arg_type(schema: dict[str, Any]) -> str:
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return "|".join(str(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    kind = "|".join(kind) if isinstance(kind, list) else str(kind)
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if lo is not None or hi is not None:
        kind += f" {'' if lo is None else lo}..{'' if hi is None else hi}"
    return kind


def tool_line(tool: ToolDef) -> str:
    props = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", []))
    args = ", ".join(f"{name}{'' if name in required else '?'}: {_arg_type(s)}" for name, s in props.items())
    return f"- {tool.name}({args}): {tool.description}"


def render_prompt(agent: AgentDef, history: Sequence[tuple[Role, str]], passages: Sequence[Passage]) -> str:
    """The full prompt for the next generation. ``history`` is the request so far as
    (role, text) pairs: one ``user`` turn, then ``call``/``result`` pairs."""
    lines = ["<|system|>", agent.system.strip(), "Tools:", *(tool_line(t) for t in agent.tools), INSTRUCTION]
    if passages:
        lines.append("<|context|>")
        lines += [f"[{p.doc}] {p.text}" for p in passages]
    for role, text in history:
        lines += [f"<|{role}|>", text]
    lines.append("<|call|>")
    return "\n".join(lines) + "\n"


def build_chat(
    agent: AgentDef, history: Sequence[tuple[Role, str]], passages: Sequence[Passage], *, key: CallKey = "tool"
) -> ChatPrompt:
    """The conversation for the next generation (what ``render_prompt`` writes as text): the
    instruction is the system message's last line; calls are assistant turns, results tool turns."""
    roles = {"user": "user", "call": "assistant", "result": "tool"}
    messages = [Message(role="system", content=agent.system.strip() + "\n" + instruction(key))]
    messages += [Message(role=roles[role], content=text) for role, text in history]
    return ChatPrompt(
        messages=messages,
        tools=[tool_spec(t.name, t.description, t.parameters) for t in agent.tools],
        documents=[{"title": p.doc, "text": p.text} for p in passages] or None,
    )


def agent_chat_template() -> str:
    """The Jinja chat template of the agent format (shipped with the embedded and tiny pairs).

    This file is the template's one source. A model directory built from it (``models/training/train.py``)
    gets its own copy, ``chat_template.jinja`` next to the tokenizer, because a model directory must
    carry its tokenizer files; ``tests/test_chat_templates.py`` checks the shipped pair's copies."""
    from pathlib import Path

    return (Path(__file__).with_name("chat_template.jinja")).read_text(encoding="utf-8")


def answer_branch(agent: AgentDef) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "minLength": 1, "maxLength": agent.answer_chars}},
        "required": ["answer"],
        "additionalProperties": False,
    }


def call_schema(
    agent: AgentDef, *, answer_only: bool = False, key: CallKey = "tool", call_only: bool = False
) -> dict[str, Any]:
    """The JSON Schema every generation is constrained to (see the module doc); ``call_only``: no
    answer branch (``AgentDef.tool_first``, the first generation)."""
    branches = (
        []
        if answer_only
        else [
            {
                "type": "object",
                "properties": {key: {"const": t.name}, "arguments": t.parameters},
                "required": [key, "arguments"],
                "additionalProperties": False,
            }
            for t in agent.tools
        ]
    )
    if not call_only or answer_only:
        branches.append(answer_branch(agent))
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


@dataclass(frozen=True)
class Call:
    """A parsed generation: a tool call (``tool`` set) or a final answer (``answer`` set)."""

    raw: str
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    answer: str | None = None


def parse_call(
    agent: AgentDef, text: str, *, answer_only: bool = False, key: CallKey = "tool", call_only: bool = False
) -> Call:
    """Parse and check one generation; raises ``ValueError`` with a one-line reason."""
    import jsonschema

    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not valid JSON ({err.msg} at char {err.pos})") from None
    try:
        jsonschema.validate(data, call_schema(agent, answer_only=answer_only, key=key, call_only=call_only))
    except jsonschema.ValidationError as err:
        raise ValueError(f"not a valid tool call or answer: {err.message[:200]}") from None
    if "answer" in data:
        return Call(raw=text, answer=data["answer"])
    return Call(raw=text, tool=data[key], arguments=data["arguments"])
