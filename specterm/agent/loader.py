"""Finding and loading agents: ``agents/<name>/agent.toml`` into ``definition.AgentDef``.

Agents are found in ``$SPECTERM_AGENTS_DIR`` (``os.pathsep``-separated, searched first, so a user's
folder shadows a shipped one of the same name) and in the repository's ``agents/``. Adding an agent
= adding a folder. Every problem in a definition is one ``ConfigError`` line naming the file and the
field (``tools[1].parameters``).

Apart from ``definition.py`` because loading reaches up (user tools through ``plugins``, worked
examples through ``examples``, which import definition's types): the models stay at the bottom of
``specterm.agent`` and nothing there imports back up (no import circle).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from specterm.agent.definition import TOOL_NAME, AgentDef
from specterm.errors import ConfigError, first_error
from specterm.paths import agent_dirs, shipped_agents_dir

REPO_AGENTS = shipped_agents_dir()


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
    raise ConfigError(
        f"no agent named {name!r} (known: {known}; add agents/{name}/agent.toml or a folder in $SPECTERM_AGENTS_DIR)"
    )


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
            raise ConfigError(
                f"{path}: tools[{i}].retrieve_after: the agent retrieves nothing to re-run "
                "(set [retrieval] top_k or examples)"
            )
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
            raise ConfigError(
                f"{path}: tools[{i}].parameters: cannot derive a JSON Schema from "
                f"{handler}: {type(err).__name__}: {str(err).splitlines()[0]}"
            ) from None


def load_agent(name_or_path: str | Path) -> AgentDef:
    """An agent by name (searched in ``agent_dirs()``) or by folder / ``agent.toml`` path."""
    p = Path(name_or_path)
    if p.name == "agent.toml":
        return load_agent_file(p)
    if isinstance(name_or_path, Path) or os.sep in str(name_or_path):
        return load_agent_file(p / "agent.toml")
    return load_agent_file(find_agent(str(name_or_path)) / "agent.toml")
