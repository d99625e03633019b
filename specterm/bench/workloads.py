"""Benchmark workloads: named request sets, or one request per line from a file.

A *workload* is an ordered list of requests; every configuration runs the same list. Requests are
conversations (``ChatPrompt``) rendered by the target's chat template, like every other prompt:

* ``toolcalls`` — an agent's first turn (system prompt, its tools, its retrieved worked examples and
  passages, a user question): the model's tool call, schema boilerplate plus entity values (SQL, queries);
* ``prose`` — user requests for free text (explanations, runbook steps);
* ``code`` — user requests for SQL and Python;
* ``extract`` — user texts to turn into JSON of ``EXTRACT_SCHEMA`` (JSON-schema extraction).

``toolcalls`` and ``extract`` are constrained as their senders constrain them (``output_schema``):
the agent's call schema, the extraction schema.

``agent`` runs whole agent turns (``specterm.agent.AgentRunner``: tool calls, tool results,
retrieval, answer) for short user requests to one agent (``--agent``, default ``sql_analyst``); a
turn makes several engine requests, and its decode figures sum over them (``runner``). Tool time is
identical in both configurations and is not part of the decode rate.

``--raw`` sends raw text prefixes instead (``RAW``: text to complete, in the shapes the embedded
pair was trained on). A target whose template only answers agent requests (the embedded pair) gets
the raw prefixes for ``prose`` and ``code``, with a note saying so (``resolve``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from specterm.engine.chat import ChatPrompt, ChatTemplateError, Prompt, PromptRenderer
from specterm.errors import ConfigError

RAW: dict[str, tuple[str, ...]] = {
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
ENGINE_CHECK: tuple[str, ...] = (*RAW["toolcalls"][:2], *RAW["prose"][:2], RAW["code"][0])
"""Two or one prefixes of each shape the embedded pair was trained on: the set the engine tests and
``benchmarks/tp_speed.py`` start from (each adds a few more of ``RAW``'s)."""
CHAT: dict[str, tuple[str, ...]] = {
    "prose": (
        "In two sentences, what should an on-call engineer do when the payments queue backs up?",
        "Describe a typical customer order in one short paragraph.",
        "Explain speculative decoding to a new engineer in three sentences.",
        "Write a short runbook step for restarting the auth service.",
        "Why does a small draft model make a large model faster? Answer briefly.",
        "Summarise what a refund is in one sentence.",
    ),
    "code": (
        "Write a SQL query that lists the name and total of every order over 100.",
        "Write a SQL query that counts the payments per status.",
        "Write a Python function is_prime(n) that returns True when n is prime.",
        "Write a Python function that reverses the words of a sentence.",
        "Write a SQL query that returns the 5 most expensive products.",
        "Write a Python function that parses an ISO date string into a datetime.",
    ),
    "extract": (
        "Extract the order as JSON: Maria Lopez (maria@example.com, Spain) ordered 2 webcams and 1 desk "
        "lamp on 2026-03-14; it has shipped.",
        "Extract the order as JSON: Tom Becker from Germany, tom.becker@example.de, bought 3 notebooks on "
        "2026-01-02. Status: placed.",
        "Extract the order as JSON: on 2026-02-20 Aiko Tanaka (Japan, aiko@example.jp) returned 1 keyboard; "
        "the order was refunded.",
        "Extract the order as JSON: 5 USB cables and 2 monitors for Liam O'Brien, Ireland, liam@example.ie, "
        "ordered 2026-04-01, delivered.",
        "Extract the order as JSON: Sofia Rossi (Italy; sofia.rossi@example.it) placed an order for 1 "
        "espresso machine on 2026-05-09, still pending.",
        "Extract the order as JSON: customer Noah Smith, United States, noah@example.com; 4 mugs, 1 "
        "kettle; 2026-06-30; cancelled.",
    ),
}
EXTRACT_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "customer": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 40},
                "email": {"type": "string", "maxLength": 40},
                "country": {"type": "string", "maxLength": 20},
            },
            "required": ["name", "email", "country"],
            "additionalProperties": False,
        },
        "items": {
            "type": "array",
            "maxItems": 4,
            "items": {
                "type": "object",
                "properties": {
                    "product": {"type": "string", "maxLength": 24},
                    "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
                },
                "required": ["product", "quantity"],
                "additionalProperties": False,
            },
        },
        "date": {"type": "string", "format": "date"},
        "status": {"enum": ["pending", "placed", "shipped", "delivered", "refunded", "cancelled"]},
    },
    "required": ["customer", "items", "date", "status"],
    "additionalProperties": False,
}
"""The ``extract`` workload's output schema: JSON-schema extraction, mostly keys the grammar spells."""
TOOLCALL_REQUESTS: dict[str, tuple[str, ...]] = {
    "sql_analyst": (
        "How many customers are there?",
        "What is the most expensive product?",
        "Which country has the most customers?",
        "What is the total amount of all payments?",
        "How many orders have status shipped?",
        "List the customers from Germany.",
    ),
    "ops_assistant": (
        "What should I do when the payments queue backs up?",
        "How do I rotate a TLS certificate?",
        "How does a database failover work?",
        "When are deploys allowed?",
        "What counts as a severity 1 incident?",
        "How much error budget do we have?",
    ),
}
AGENT_REQUESTS = (
    "How many orders are there?",
    "Which customer has the highest total order amount?",
    "What is the total amount of refunds?",
)
AGENT_UNAVAILABLE = "agent workload: not available (specterm.agent or its extra is not installed)"
WORKLOADS = (*RAW, "extract", "agent")


def agent_loop_available() -> bool:
    """True when ``specterm.agent`` provides the loop the agent workload drives."""
    try:
        from specterm.agent import AgentRunner, load_agent  # noqa: F401
    except ImportError:
        return False
    return True


def builtin_prompts(name: str) -> list[str]:
    """The raw text prefixes of a workload (``--raw``), or the agent workload's user requests."""
    if name == "agent":
        if not agent_loop_available():
            raise ConfigError(AGENT_UNAVAILABLE)
        return list(AGENT_REQUESTS)
    if name in CHAT and name not in RAW:  # no prefix form: its requests as plain text
        return list(CHAT[name])
    try:
        return list(RAW[name])
    except KeyError:
        raise ConfigError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}") from None


def chat_requests(name: str, agent: str = "sql_analyst", key: str = "tool") -> list[Prompt]:
    """A built-in workload as conversations (``toolcalls``: the agent's first turn, with its tools)."""
    if name == "agent":
        return builtin_prompts(name)
    if name == "toolcalls":
        if not agent_loop_available():
            raise ConfigError(AGENT_UNAVAILABLE.replace("agent workload", "toolcalls workload"))
        from specterm.agent import load_agent
        from specterm.agent.prompt import build_chat
        from specterm.agent.tools import ToolBox

        agent_def = load_agent(agent)
        box = ToolBox(agent_def)
        questions = TOOLCALL_REQUESTS.get(agent_def.name, AGENT_REQUESTS)
        # The first turn exactly as the agent sends it: with its retrieved examples and passages.
        return [
            build_chat(agent_def, [("user", q)], box.retrieve(q) if box.retrieves else [], key=key)  # type: ignore[arg-type]
            for q in questions
        ]
    if name not in CHAT:
        builtin_prompts(name)  # raises the one-line "unknown workload"
    return [ChatPrompt.user(text) for text in CHAT[name]]


def output_schema(
    name: str, *, agent: str = "sql_analyst", renderer: PromptRenderer | None = None, raw: bool = False
) -> dict | None:
    """The JSON Schema a workload's requests are constrained to, as their real senders constrain them:
    ``toolcalls`` the agent's call schema (its first turn exactly as the agent sends it), ``extract``
    ``EXTRACT_SCHEMA``; ``None`` for free text and raw prefixes."""
    if raw:
        return None
    if name == "extract":
        return EXTRACT_SCHEMA
    if name == "toolcalls":
        from specterm.agent import load_agent
        from specterm.agent.prompt import call_schema

        return call_schema(load_agent(agent), key=_call_key(renderer))
    return None


def resolve(
    names: Sequence[str],
    *,
    renderer: PromptRenderer | None,
    agent: str = "sql_analyst",
    raw: bool = False,
    notes: Callable[[str], None] = lambda _m: None,
) -> dict[str, list[Prompt]]:
    """The requests of each named workload for this target.

    ``raw``: text prefixes. Otherwise conversations; with a ``renderer`` (the target's) each workload
    is rendered once here, so a template that refuses it is known before any engine loads: a model
    without a template is an error that says ``--raw``; a template that only answers agent requests
    gets the raw prefixes of that workload and a note."""
    out: dict[str, list[Prompt]] = {}
    for name in names:
        if raw and name != "agent":
            out[name] = builtin_prompts(name)
            continue
        requests = chat_requests(name, agent, _call_key(renderer) if name == "toolcalls" else "tool")
        if renderer is not None and name != "agent":
            if not renderer.can_chat:
                renderer.text(requests[0])  # raises: no chat template, use --raw or --chat-template
            try:
                for r in requests:
                    renderer.text(r)
            except ChatTemplateError:
                notes(
                    f"workload {name}: the target's chat template refuses plain requests (it only answers "
                    "agent requests); running its raw text prefixes instead, as --raw"
                )
                requests = builtin_prompts(name)
        out[name] = requests
    return out


def _call_key(renderer: PromptRenderer | None) -> str:
    """The agent's call key for this target (``agent.prompt.call_key_for``)."""
    from specterm.agent.prompt import call_key_for

    return call_key_for(renderer.template if renderer is not None else None)


def describe(prompt: Prompt) -> str:
    """A request as one line of text for reports: the raw text, or the last user message."""
    if isinstance(prompt, str):
        return prompt
    return next((m.content for m in reversed(prompt.messages) if m.role == "user"), "")


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
