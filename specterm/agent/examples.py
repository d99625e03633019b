"""Worked examples: questions an agent has answered, with the calls that answered them, retrieved
by meaning and shown to the model next to the user's question.

Retrieval-based text-to-SQL systems put the nearest solved questions into the prompt because a
model adapts an example far better than it composes SQL from nothing; a small model most of all,
and the copied spans are what a draft predicts best. An agent lists its examples in
``examples.toml`` beside ``agent.toml`` (``[retrieval] examples``, ``example_k``)::

    [[example]]
    question = "How many customers live in Japan?"
    calls = [{ tool = "query_sql", arguments = { sql = "SELECT count(*) FROM customers WHERE country = 'JP'" } }]

    [[example]]
    question = "hi"
    answer = "Hello! I answer questions about the shop's data."

The loop retrieves the ``example_k`` nearest (cosine similarity of all-MiniLM-L6-v2 embeddings of
the *questions*, the same model and SQLite cache as the document passages) and passes them before
the passages as ``Passage(doc="example", text=...)``; ``example_text`` is the one rendering of an
example, used by the loop and by the corpus the embedded pair is trained on.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from specterm.agent.vectors import VectorStore
from specterm.errors import ConfigError, first_error

if TYPE_CHECKING:
    from specterm.agent.definition import AgentDef

EXAMPLE_DOC = "example"


class ExampleCall(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class WorkedExample(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    question: str = Field(min_length=1, max_length=500)
    calls: list[ExampleCall] = Field(default_factory=list)
    answer: str | None = None
    """For a question answered without a tool (a greeting, something not in the data)."""


def example_text(ex: WorkedExample) -> str:
    """How an example reads in the prompt: ``question → tool {args} → tool {args}`` (compact JSON,
    as the grammar makes the model write its own arguments), or ``question → answer: text``."""
    steps = [f"{c.tool} {json.dumps(c.arguments, separators=(',', ':'), ensure_ascii=False)}" for c in ex.calls]
    if not steps:
        steps = [f"answer: {ex.answer or ''}"]
    return " → ".join([ex.question, *steps])


def load_examples(path: Path, agent: AgentDef | None = None) -> list[WorkedExample]:
    """The examples in ``path``; a problem is one ``ConfigError`` line naming the file and the entry."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: cannot read: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    out = []
    for i, raw in enumerate(data.get("example", [])):
        try:
            ex = WorkedExample.model_validate(raw)
        except ValidationError as err:
            loc, msg = first_error(err)
            raise ConfigError(f"{path}: example[{i}].{'.'.join(str(p) for p in loc)}: {msg}") from None
        if not ex.calls and ex.answer is None:
            raise ConfigError(f"{path}: example[{i}]: needs calls or an answer")
        unknown = [c.tool for c in ex.calls if agent is not None and agent.tool(c.tool) is None]
        if unknown:
            raise ConfigError(f"{path}: example[{i}].calls: unknown tool {unknown[0]!r}")
        out.append(ex)
    return out


class ExampleStore(VectorStore):
    """The worked examples of one agent, indexed by the embeddings of their questions."""

    CHUNK_VERSION = "examples-v1"

    def __init__(self, path: Path, db_path: Path, agent: AgentDef | None = None) -> None:
        self.examples_path, self.agent = Path(path), agent
        super().__init__(Path(path).parent, db_path)

    @classmethod
    def for_agent(cls, agent: AgentDef) -> ExampleStore:
        from specterm.paths import agent_cache_dir

        return cls(agent.examples_file, agent_cache_dir(agent.name) / "examples.sqlite", agent)

    def _documents(self) -> list[tuple[str, bytes]]:
        return [(self.examples_path.name, self.examples_path.read_bytes())]

    def _items(self, docs: list[tuple[str, bytes]]) -> list[tuple[str, str, str]]:
        return [(EXAMPLE_DOC, example_text(ex), ex.question) for ex in load_examples(self.examples_path, self.agent)]
