"""Benchmark workloads: named prompt sets, or one prompt per line from a file.

A *workload* is an ordered list of prompts; every configuration runs the same list. The built-in
sets follow the shapes the default tiny pair was trained on (``specterm.engine.tiny_models``), so
acceptance there is realistic rather than zero:

* ``toolcalls`` — prompts that open an agent tool call (``{"tool": ...``): schema boilerplate the
  draft knows, entity values (SQL, queries) it sometimes misses;
* ``prose`` — free text (runbook steps, order descriptions);
* ``code`` — SQL statements.

``agent`` runs whole agent turns (``specterm.agent.AgentRunner``: tool calls, tool results,
retrieval, answer) for short user requests to one agent (``--agent``, default ``sql_analyst``); a
turn makes several engine requests, and its decode figures sum over them (``runner``). Tool time is
identical in both configurations and is not part of the decode rate.
"""

from __future__ import annotations

from pathlib import Path

from specterm.errors import ConfigError

BUILTIN: dict[str, tuple[str, ...]] = {
    "toolcalls": (
        '{"tool": "query_sql", "arguments": {"sql": "SELECT',
        '{"tool": "search_docs", "arguments": {"query": "',
        '{"tool": "query_sql", "arguments": {"sql": "SELECT price FROM products',
        '{"tool": "search_docs", "arguments": {"query": "restart the auth service", "top_k": ',
        '{"tool": "query_sql", "arguments": {"sql": "SELECT status, amount FROM payments WHERE',
        '{"tool": "',
    ),
    "prose": (
        "Runbook: if the payments queue backs up,",
        "The customer alice placed",
        "Runbook: if the",
        "The customer judy",
        "Speculative decoding pairs a small draft model",
        "The target model verifies all draft tokens",
    ),
    "code": (
        "SELECT name, total FROM orders WHERE",
        "SELECT id, status FROM refunds WHERE amount >",
        "SELECT country, price FROM customers JOIN",
        "SELECT created_at FROM invoices ORDER BY",
        "SELECT count(*) FROM payments WHERE",
        "SELECT",
    ),
}
AGENT_REQUESTS = (
    "How many orders are there?",
    "Which customer has the highest total order amount?",
    "What is the total amount of refunds?",
)
AGENT_UNAVAILABLE = "agent workload: not available (specterm.agent or its extra is not installed)"
WORKLOADS = (*BUILTIN, "agent")


def agent_loop_available() -> bool:
    """True when ``specterm.agent`` provides the loop the agent workload drives."""
    try:
        from specterm.agent import AgentRunner, load_agent  # noqa: F401
    except ImportError:
        return False
    return True


def builtin_prompts(name: str) -> list[str]:
    if name == "agent":
        if not agent_loop_available():
            raise ConfigError(AGENT_UNAVAILABLE)
        return list(AGENT_REQUESTS)
    try:
        return list(BUILTIN[name])
    except KeyError:
        raise ConfigError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}") from None


def prompts_from_file(path: str | Path) -> list[str]:
    """One prompt per line; blank lines are skipped; ``\\n`` in a line stays literal text."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"prompts file does not exist: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read prompts file {path}: {err}") from None
    prompts = [line for line in text.splitlines() if line.strip()]
    if not prompts:
        raise ConfigError(f"prompts file has no prompts (one per line): {path}")
    return prompts
