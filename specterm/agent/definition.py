"""Agent definitions: the pydantic models an ``agents/<name>/agent.toml`` is loaded into
(``specterm.agent.loader`` finds and loads them).

An *agent* is a folder: ``agent.toml`` (system prompt, tools, limits), ``docs/*.md`` (the passages
the vector store retrieves from) and any data its tools use (``data/shop.sql``).

A *tool* names a ``handler`` — a built-in (``specterm.agent.handlers.HANDLERS``), a function in a
module beside ``agent.toml`` (``tools:lookup``) or an installed ``specterm.tools`` entry point
(``entry:NAME``; see ``specterm.agent.plugins``) — and the JSON Schema of its arguments (for a user
tool it may come from the function); the loop constrains generation to exactly these schemas. Every problem in a
definition is one ``ConfigError`` line naming the file and the field (``tools[1].parameters``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specterm.errors import ConfigError

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
        from specterm.agent.handlers import HANDLERS
        from specterm.agent.plugins import check_user_handler, is_user_handler

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
    def _consistent(self) -> AgentDef:
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
