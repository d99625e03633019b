"""Benchmark workloads: named prompt sets, or one prompt per line from a file.

A *workload* is an ordered list of prompts; every configuration runs the same list. The built-in
sets follow the shapes the default tiny pair was trained on (``specterm.engine.tiny_models``), so
acceptance there is realistic rather than zero:

* ``toolcalls`` — prompts that open an agent tool call (``{"tool": ...``): schema boilerplate the
  draft knows, entity values (SQL, queries) it sometimes misses;
* ``prose`` — free text (runbook steps, order descriptions);
* ``code`` — SQL statements.

``agent`` (whole multi-step agent turns) needs ``specterm.agent``; until that provides a loop this
module says so instead of guessing.
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
AGENT_UNAVAILABLE = "agent workload: not available yet (specterm.agent provides no loop to call)"
WORKLOADS = (*BUILTIN, "agent")


def agent_loop_available() -> bool:
    """True once ``specterm.agent`` exposes a callable loop the bench could drive."""
    try:
        import specterm.agent as agent
    except ImportError:
        return False
    return callable(getattr(agent, "run_turn", None))


def builtin_prompts(name: str) -> list[str]:
    if name == "agent":
        # Even when the loop lands, its API must be wired here first: say so rather than guess.
        raise ConfigError(AGENT_UNAVAILABLE)
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
