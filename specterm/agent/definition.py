"""Agent definitions: ``agents/<name>/agent.toml`` loaded into pydantic models.

An *agent* is a folder: ``agent.toml`` (system prompt, tools, limits), ``docs/*.md`` (the passages
the vector store retrieves from) and any data its tools use (``data/shop.sql``). Agents are found in
``$SPECTERM_AGENTS_DIR`` (``os.pathsep``-separated, searched first, so a user's folder shadows a
shipped one of the same name) and in the repository's ``agents/``. Adding an agent = adding a folder.

A *tool* names a ``handler`` — a built-in (``specterm.agent.tools.HANDLERS``), a function in a
module beside ``agent.toml`` (``tools:lookup``) or an installed ``specterm.tools`` entry point
(``entry:NAME``; see ``specterm.agent.plugins``) — and the JSON Schema of its arguments (for a user
tool it may come from the function); the loop constrains generation to exactly these schemas. Every problem in a
definition is one ``ConfigError`` line naming the file and the field (``tools[1].parameters``).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from specterm.errors import ConfigError, first_error
from specterm.paths import agent_dirs, shipped_agents_dir

REPO_AGENTS = shipped_agents_dir()
TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


class ToolDef(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = Field(min_length=1, max_length=300)
    handler: str
    """A built-in (``sql.query``), ``MODULE:FUNCTION`` (``MODULE.py`` beside agent.toml) or
    ``entry:NAME`` (a ``specterm.tools`` entry point): ``specterm.agent.plugins``."""
    parameters: dict[str, Any]
    """JSON Schema (an object schema) of the tool's ``arguments``."""
    timeout_s: float = Field(5.0, gt=0, le=120)
    retrieve_after: bool = False
    """Run retrieval again with this tool's result as the query and add what it finds to the context."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not TOOL_NAME.match(v) or v == "answer":
            raise ValueError("must be lowercase letters, digits and _ (not 'answer'), at most 40 chars")
        return v

    @field_validator("handler")
    @classmethod
    def _handler(cls, v: str) -> str:
        from specterm.agent.plugins import check_user_handler, is_user_handler
        from specterm.agent.tools import HANDLERS

        if is_user_handler(v):
            check_user_handler(v)  # resolved by the loader, which knows the agent's folder
        elif v not in HANDLERS:
            raise ValueError(f"unknown handler {v!r}; known: {', '.join(sorted(HANDLERS))}")
        return v

    @field_validator("parameters")
    @classmethod
    def _parameters(cls, v: dict[str, Any]) -> dict[str, Any]:
        from specterm.engine.schema import check_json_schema

        try:
            check_json_schema(v)
        except ConfigError as err:  # pydantic reports ValueErrors with their location
            raise ValueError(str(err)) from None
        if v.get("type") != "object":
            raise ValueError('must be an object schema (type = "object")')
        return v


class Retrieval(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    top_k: int = Field(0, ge=0, le=10)
    """Passages retrieved for each user request (0, the default: no retrieval step)."""
    docs: str = "docs"
    """Folder of ``*.md`` documents, relative to the agent folder."""
    passage_chars: int = Field(400, ge=50, le=4000)
    """Passages longer than this are cut, so a prompt stays within small models' context."""
    examples: str | None = None
    """Worked examples (``examples.toml``, relative to the agent folder; see ``agent.examples``)."""
    example_k: int = Field(2, ge=0, le=10)
    """Worked examples retrieved for each request, nearest question first (0: none)."""


class Database(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sql: str
    """SQL script (relative to the agent folder) that builds the SQLite database."""
    max_rows: int = Field(50, ge=1, le=10_000)
    max_bytes: int = Field(4000, ge=100, le=1_000_000)


class AgentDef(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    examples: list[str] = Field(default_factory=list, max_length=10)
    """Questions it answers, shown to a newcomer in the chat console."""
    system: str = Field(min_length=1, max_length=4000)
    tools: list[ToolDef] = Field(min_length=1)
    max_steps: int = Field(4, ge=1, le=20)
    """Generations per request; the last one may only answer."""
    tool_first: bool = False
    """The first generation of a request must call a tool (OpenAI's ``tool_choice: "required"``): for
    a general model that would answer from memory instead of measuring."""
    max_tokens: int = Field(256, ge=16, le=8192)
    """Token limit of each generation (tool call or answer)."""
    answer_chars: int = Field(200, ge=1, le=8000)
    """Longest final answer (the answer schema's ``maxLength``)."""
    result_chars: int = Field(600, ge=50, le=100_000)
    """Longest tool result fed back into the prompt (the event keeps the whole result)."""
    retrieval: Retrieval = Retrieval()
    database: Database | None = None
    path: Path = Path(".")
    """The agent folder (set by the loader)."""

    @model_validator(mode="after")
    def _consistent(self) -> "AgentDef":
        names = [t.name for t in self.tools]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate tool names: {', '.join(sorted(dup))}")
        if any(t.handler.startswith("sql.") for t in self.tools) and self.database is None:
            raise ValueError("sql.* tools need a [database] table with sql = 'path/to/script.sql'")
        return self

    @property
    def docs_dir(self) -> Path:
        return self.path / self.retrieval.docs

    @property
    def examples_file(self) -> Path | None:
        return self.path / self.retrieval.examples if self.retrieval.examples else None

    @property
    def sql_script(self) -> Path | None:
        return self.path / self.database.sql if self.database else None

    def tool(self, name: str) -> ToolDef | None:
        return next((t for t in self.tools if t.name == name), None)


def list_agents() -> list[str]:
    names = set()
    for root in agent_dirs():
        if root.is_dir():
            names.update(p.name for p in root.iterdir() if (p / "agent.toml").is_file())
    return sorted(names)


def find_agent(name: str) -> Path:
    if not TOOL_NAME.match(name):
        raise ConfigError(f"bad agent name {name!r}: lowercase letters, digits and _ only")
    for root in agent_dirs():
        if (root / name / "agent.toml").is_file():
            return root / name
    known = ", ".join(list_agents()) or "none"
    raise ConfigError(f"no agent named {name!r} (known: {known}; add agents/{name}/agent.toml "
                      "or a folder in $SPECTERM_AGENTS_DIR)")


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def load_agent_file(path: Path) -> AgentDef:
    """Load ``path`` (an ``agent.toml``); raises ``ConfigError`` naming the file and the field."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    data.setdefault("name", path.parent.name)
    if data["name"] != path.parent.name:
        raise ConfigError(f"{path}: name: {data['name']!r} must match the folder name {path.parent.name!r}")
    if "path" in data:
        raise ConfigError(f"{path}: path: not a setting (the folder is the agent's path)")
    _resolve_user_tools(path, data)
    try:
        agent = AgentDef.model_validate({**data, "path": path.parent})
    except ValidationError as err:
        loc, msg = first_error(err)
        raise ConfigError(f"{path}: {_where(loc)}: {msg}") from None
    r = agent.retrieval
    for i, tool in enumerate(agent.tools):
        if tool.retrieve_after and not (r.top_k or (r.examples and r.example_k)):
            raise ConfigError(f"{path}: tools[{i}].retrieve_after: the agent retrieves nothing to re-run "
                              "(set [retrieval] top_k or examples)")
    if agent.retrieval.top_k or any(t.handler == "docs.search" for t in agent.tools):
        if not agent.docs_dir.is_dir() or not any(agent.docs_dir.glob("*.md")):
            raise ConfigError(f"{path}: retrieval.docs: no *.md documents in {agent.docs_dir}")
    if agent.examples_file is not None:
        from specterm.agent.examples import load_examples

        if not agent.examples_file.is_file():
            raise ConfigError(f"{path}: retrieval.examples: file not found: {agent.examples_file}")
        load_examples(agent.examples_file, agent)
    if agent.sql_script is not None and not agent.sql_script.is_file():
        raise ConfigError(f"{path}: database.sql: file not found: {agent.sql_script}")
    return agent


def _resolve_user_tools(path: Path, data: dict[str, Any]) -> None:
    """Import each user tool now, so a broken one fails the load (one line: file and field) and not
    the first call; fill a missing ``description`` / ``parameters`` from the function (in ``data``,
    before validation, so a schema the function declares is checked like a written one)."""
    from specterm.agent.plugins import PluginError, is_user_handler, resolve

    tools = data.get("tools")
    if not isinstance(tools, list):
        return
    for i, tool in enumerate(tools):
        handler = tool.get("handler") if isinstance(tool, dict) else None
        if not isinstance(handler, str) or not is_user_handler(handler):
            continue
        try:
            user = resolve(handler, path.parent)
            if "parameters" not in tool:
                tool["parameters"] = user.parameters()
            if "description" not in tool:
                tool["description"] = user.description() or f"{tool.get('name', handler)} (no docstring)"
        except PluginError as err:
            raise ConfigError(f"{path}: tools[{i}].handler: {err}") from None
        except Exception as err:  # noqa: BLE001 - pydantic cannot describe the function's signature
            raise ConfigError(f"{path}: tools[{i}].parameters: cannot derive a JSON Schema from "
                              f"{handler}: {type(err).__name__}: {str(err).splitlines()[0]}") from None


def load_agent(name_or_path: str | Path) -> AgentDef:
    """An agent by name (searched in ``agent_dirs()``) or by folder / ``agent.toml`` path."""
    p = Path(name_or_path)
    if p.name == "agent.toml":
        return load_agent_file(p)
    if isinstance(name_or_path, Path) or os.sep in str(name_or_path):
        return load_agent_file(p / "agent.toml")
    return load_agent_file(find_agent(str(name_or_path)) / "agent.toml")
