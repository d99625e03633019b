"""``specterm agents new NAME``: a working agent folder with one user tool, to edit into your own.

The folder it writes loads (``load_agent``) and runs as it is: ``agent.toml`` (one tool whose
handler is ``tools:word_stats``, its argument schema derived from the function's signature),
``tools.py`` (that function) and a ``README.md`` saying how to run and grow it.
"""

from __future__ import annotations

from pathlib import Path

from specterm.errors import ConfigError

AGENT_TOML = '''\
# The {name} agent, scaffolded by `specterm agents new {name}`. Edit freely; the keys are listed in
# specterm's agents/README.md ("agent.toml") and README ("Your own agent and tools").
description = "Measures texts (an example agent: edit tools.py and this file)."
examples = ["How many words are in 'the quick brown fox'?"]
system = """You measure texts for the user. Call a tool for any number, then answer briefly."""
max_steps = 3
# The first generation must call a tool: a general model would otherwise answer from memory.
tool_first = true
max_tokens = 128
answer_chars = 120

[[tools]]
name = "word_stats"
# word_stats() in tools.py beside this file. Without `parameters` its JSON Schema is derived from the
# function's signature (pydantic); without `description`, it is the docstring's first paragraph.
handler = "tools:word_stats"
timeout_s = 5
# retrieve_after = true   # re-run retrieval with the result as query (needs [retrieval] top_k / examples)
# An explicit schema instead of the derived one:
# [tools.parameters]
# type = "object"
# required = ["text"]
# additionalProperties = false
# properties.text = {{ type = "string", minLength = 1, maxLength = 200 }}
'''

TOOLS_PY = '''\
"""Tools of the {name} agent: plain Python functions named in agent.toml (handler = "tools:NAME").

Each function's signature is its tool's argument schema (give strings a max_length: generation is
constrained to the schema, and a bound keeps a small model's call short). Return the result text
(a dict or list is sent as JSON). An exception or a run past the tool's timeout_s becomes an error
result the model sees; it never stops the agent.
"""

from typing import Annotated

from pydantic import Field


def word_stats(text: Annotated[str, Field(min_length=1, max_length=200, description="the text to measure")]) -> str:
    """Count the words and characters in a text."""
    return f"{{len(text.split())}} words, {{len(text)}} characters"
'''

README = """\
# {name}

A specterm agent with its own Python tool (`word_stats` in `tools.py`).

    specterm run --agent ./{name} "How many words are in 'the quick brown fox'?"
    specterm chat --agent ./{name}

(or put this folder's parent in `$SPECTERM_AGENTS_DIR` and use `--agent {name}`).

Add a tool: write a function in `tools.py`, add a `[[tools]]` table with `handler = "tools:FUNCTION"`
to `agent.toml`. Add documents to retrieve from: `docs/*.md` and `[retrieval] top_k = 2`.
"""


def scaffold(name: str, parent: Path) -> Path:
    """Write a new agent folder ``parent/name``; refuses a folder that exists (nothing is touched)."""
    from specterm.agent.definition import TOOL_NAME

    if not TOOL_NAME.match(name):
        raise ConfigError(f"bad agent name {name!r}: lowercase letters, digits and _, starting with a letter")
    folder = Path(parent) / name
    if folder.exists():
        raise ConfigError(f"{folder} already exists; choose another name or --dir (nothing was written)")
    if not Path(parent).is_dir():
        raise ConfigError(f"--dir {parent}: not a directory")
    folder.mkdir()
    for file, text in (("agent.toml", AGENT_TOML), ("tools.py", TOOLS_PY), ("README.md", README)):
        (folder / file).write_text(text.format(name=name), encoding="utf-8")
    return folder
