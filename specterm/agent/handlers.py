"""The built-in tool handlers: ``handler = "sql.query"`` in ``agent.toml`` → the Python behind it.

A handler is ``(box, arguments, tool) -> text`` or ``(text, truncated)``, where ``box`` is the
agent's ``tools.ToolBox`` (its database and vector store) and ``tool`` the ``definition.ToolDef``
called. They live apart from ``tools.py`` (which runs them) so that ``definition.py`` can check a
handler name against ``HANDLERS`` without importing the tool machinery, which imports definition's
types: no import circle. Hence ``Any`` for ``box`` and ``tool`` here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


def _num(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _list_tables(box: Any, args: dict, tool: Any):
    return ", ".join(box.db().tables())


def _describe_table(box: Any, args: dict, tool: Any):
    return box.db().describe(args["table"])


def _query_sql(box: Any, args: dict, tool: Any):
    return box.db().query(args["sql"], timeout_s=tool.timeout_s)


def _search_docs(box: Any, args: dict, tool: Any):
    k = int(args.get("top_k", box.agent.retrieval.top_k or 3))
    hits = box.store().search(args["query"], k)
    return "\n".join(f"[{i}] {p.doc} ({p.score:.2f}): {p.text}" for i, p in enumerate(hits, 1)) or "no passages"


def _sla_budget(box: Any, args: dict, tool: Any):
    slo, days = float(args["slo_percent"]), int(args["window_days"])
    budget = (1 - slo / 100) * days * 24 * 60
    text = f"error budget for {_num(slo)}% over {days} days: {_num(budget)} minutes"
    if "consumed_minutes" in args:
        used = float(args["consumed_minutes"])
        left = budget - used
        spent = 100 * used / budget if budget else math.inf
        text += f"; consumed {_num(used)}, remaining {_num(left)} minutes ({_num(spent)}% spent)"
    return text


def _capacity(box: Any, args: dict, tool: Any):
    peak, per = float(args["peak_rps"]), float(args["rps_per_replica"])
    headroom = int(args.get("headroom_percent", 30))
    need = math.ceil(peak * (1 + headroom / 100) / per - 1e-9)
    replicas = max(2, need)  # policy: never fewer than 2 in production
    return (
        f"replicas needed: {replicas} (peak {_num(peak)} rps x {1 + headroom / 100:g} headroom "
        f"/ {_num(per)} rps per replica = {need}; minimum 2)"
    )


HANDLERS: dict[str, Callable[..., Any]] = {
    "sql.list_tables": _list_tables,
    "sql.describe_table": _describe_table,
    "sql.query": _query_sql,
    "docs.search": _search_docs,
    "ops.sla_budget": _sla_budget,
    "ops.capacity": _capacity,
}
