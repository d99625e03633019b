"""Your traffic as a workload: ``bench --requests FILE.jsonl``, one OpenAI chat-completions request
body per line (what a client sends to ``vllm serve``'s ``/v1/chat/completions``).

Each line becomes one request through the same engine path as every other prompt: ``messages`` and
``tools`` rendered by the target's chat template (``tools=``, HF's convention); ``max_tokens`` (or
``max_completion_tokens``), ``temperature``, ``seed`` and ``stop`` as sampling parameters; and the
constrained output vLLM's server would apply, built the way it builds it
(``vllm/entrypoints/openai/protocol.py``): a named ``tool_choice`` constrains the output to that
function's ``parameters`` schema (the arguments object), ``"required"`` to a JSON array of one or
more ``{"name", "parameters"}`` calls, and a ``json_schema`` ``response_format`` to its schema. Every
schema is compiled by xgrammar (the engine's grammar backend) before any engine starts.

A line that cannot be honoured (not JSON, an unknown field, a message the template cannot take, a
schema xgrammar rejects, ``n`` > 1) is reported with its line number and left out; the rest run.
Fields a benchmark has no use for (``model``, ``stream``, ``user``, ...) are accepted and ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specterm.engine.base import GenerationParams
from specterm.engine.chat import ChatPrompt, Message
from specterm.errors import ConfigError, first_error

IGNORED = (
    "model",
    "stream",
    "stream_options",
    "user",
    "metadata",
    "store",
    "logprobs",
    "top_logprobs",
    "parallel_tool_calls",
    "service_tier",
)
"""Fields a client sends that do not change what the engine computes for one request here."""
DEFAULT_MAX_TOKENS = 256


class _Function(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class _Tool(BaseModel):
    type: Literal["function"]
    function: _Function


class _ResponseFormat(BaseModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None


class ChatRequest(BaseModel):
    """The fields of an OpenAI chat-completions body that specterm honours."""

    model_config = ConfigDict(extra="forbid")

    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[_Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    response_format: _ResponseFormat | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=5.0)
    seed: int | None = None
    stop: str | list[str] | None = None
    n: int = Field(1, ge=1, le=1)
    # sampling knobs specterm does not apply: accepted only at their no-op values (checked below)
    top_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None


NO_OP = {"top_p": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
"""Fields honoured only at these values (what the engine does anyway); any other value is reported."""


@dataclass(frozen=True)
class FileRequest:
    line: int
    prompt: ChatPrompt
    params: GenerationParams
    constraint: str
    """What constrains the output: ``none``, ``tool <name>``, ``tools (required)``, ``json_schema``."""


def _message(m: dict[str, Any]) -> Message:
    """An OpenAI message as the template takes it: text parts joined; an assistant's ``tool_calls``
    with their arguments as objects (HF templates' convention; OpenAI sends a JSON string)."""
    content = m.get("content")
    if isinstance(content, list):
        if any(p.get("type") != "text" for p in content if isinstance(p, dict)):
            raise ValueError("only text content parts are supported")
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    calls = m.get("tool_calls")
    if calls:
        calls = [
            {
                "type": "function",
                "function": {
                    "name": c["function"]["name"],
                    "arguments": json.loads(c["function"]["arguments"])
                    if isinstance(c["function"].get("arguments"), str)
                    else c["function"].get("arguments", {}),
                },
            }
            for c in calls
        ]
    unknown = set(m) - {"role", "content", "name", "tool_calls", "tool_call_id"}
    if unknown:
        raise ValueError(f"unknown message field {sorted(unknown)[0]!r}")
    return Message(role=m.get("role"), content=content or "", tool_calls=calls or None)


def _required_schema(tools: list[_Tool]) -> dict[str, Any]:
    """vLLM's schema for ``tool_choice: "required"``: an array of calls, each one of the tools."""
    return {
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "anyOf": [
                {
                    "properties": {
                        "name": {"type": "string", "enum": [t.function.name]},
                        "parameters": t.function.parameters,
                    },
                    "required": ["name", "parameters"],
                }
                for t in tools
            ],
        },
    }


def _constraint(req: ChatRequest) -> tuple[dict[str, Any] | None, str]:
    tools = req.tools or []
    choice = req.tool_choice
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        match = next((t for t in tools if t.function.name == name), None)
        if match is None:
            raise ValueError(f"tool_choice names {name!r}, which is not in tools")
        return match.function.parameters, f"tool {name}"
    if choice == "required":
        if not tools:
            raise ValueError('tool_choice "required" with no tools')
        return _required_schema(tools), "tools (required)"
    fmt = req.response_format
    if fmt is not None and fmt.type == "json_schema":
        schema = (fmt.json_schema or {}).get("schema")
        if not isinstance(schema, dict):
            raise ValueError("response_format json_schema has no schema object")
        return schema, "json_schema"
    if fmt is not None and fmt.type == "json_object":
        return {"type": "object"}, "json_object"
    return None, "none"


def _compiles(schema: dict[str, Any]) -> None:
    """Raise ValueError unless the engine's grammar backend (xgrammar) compiles ``schema``."""
    try:
        import xgrammar
    except ImportError:  # no engine here: the engine reports it when it loads
        return
    try:
        xgrammar.Grammar.from_json_schema(json.dumps(schema))
    except Exception as err:  # noqa: BLE001 - xgrammar raises RuntimeError with its C++ message
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"the grammar backend cannot compile its schema: {text.split(': ', 1)[-1]}") from None


def parse_line(line_no: int, text: str) -> FileRequest:
    """One request body; ``ValueError`` says why a line cannot be honoured."""
    try:
        body = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err.msg})") from None
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    body = {k: v for k, v in body.items() if k not in IGNORED}
    try:
        req = ChatRequest(**body)
    except ValidationError as err:
        loc, msg = first_error(err)
        where = ".".join(str(p) for p in loc)
        if msg.startswith("Extra inputs"):
            raise ValueError(f"unknown or unsupported field {where!r}") from None
        raise ValueError(f"bad {where}: {msg}") from None
    for name, value in NO_OP.items():
        if (got := getattr(req, name)) is not None and got != value:
            raise ValueError(f"{name} {got:g} cannot be honoured (specterm applies no {name}; {value:g} is accepted)")
    messages = [_message(m) for m in req.messages]
    schema, constraint = _constraint(req)
    if req.tool_choice == "none":
        tools = None
    else:
        tools = [t.model_dump() for t in req.tools] if req.tools else None
    if schema is not None:
        _compiles(schema)
    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    params = GenerationParams(
        max_tokens=req.max_completion_tokens or req.max_tokens or DEFAULT_MAX_TOKENS,
        temperature=req.temperature if req.temperature is not None else 0.0,
        json_schema=schema,
        stop=stop,
        seed=req.seed,
    )
    return FileRequest(line_no, ChatPrompt(messages=messages, tools=tools), params, constraint)


def read_requests(path: str | Path) -> tuple[list[FileRequest], list[str]]:
    """(the requests that can run, one ``line N: why`` per line that cannot); blank lines skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read --requests file {path}: {getattr(err, 'strerror', None) or err}") from None
    ok, bad = [], []
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            ok.append(parse_line(n, text))
        except (ValueError, ConfigError, KeyError, TypeError) as err:
            bad.append(f"line {n}: {err}")
    if not ok:
        raise ConfigError(f"--requests file {path}: no request can run" + (f" ({bad[0]})" if bad else " (it is empty)"))
    return ok, bad
