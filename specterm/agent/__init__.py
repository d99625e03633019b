"""The agent: definitions (``agents/<name>/agent.toml``), tools, vector store and the loop.

Nothing here imports textual. ``AgentRunner(load_agent(name), engine).run(text, sink)`` runs one
request and emits its events to ``sink`` (see ``specterm.agent.loop``).
"""

from __future__ import annotations

from specterm.agent.definition import AgentDef, ToolDef
from specterm.agent.loader import list_agents, load_agent
from specterm.agent.loop import AgentResult, AgentRunner, validate_request

__all__ = ["AgentDef", "AgentResult", "AgentRunner", "ToolDef", "list_agents", "load_agent", "validate_request"]
