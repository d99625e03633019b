"""Tool execution: handler lookup (built-ins in ``handlers.py``), argument checks, a worker thread
with a timeout.

A *handler* is the Python behind a tool name in ``agent.toml`` (``handler = "sql.query"``). The loop
calls ``ToolBox.call(name, arguments)``, which never raises: an unknown tool, arguments that fail the
tool's JSON Schema, a handler that raises, and a handler that runs past ``timeout_s`` all become an
error ``ToolOutcome`` whose one-line message the model sees as the tool result.

Handlers run in a fresh daemon thread joined with a timeout (``timeout_s`` plus a short grace), so
a stuck handler cannot stall the engine thread (SQL also interrupts itself at ``timeout_s``, so it
reports the slow query and does not keep running).

User tools (``tools:fn``, ``entry:NAME``: ``specterm.agent.plugins``) run the same way. A thread
cannot be killed, so a user function that hangs is *abandoned*: the model gets "timed out" and the
daemon thread runs on until the function returns or the process exits. A subprocess per call could
be killed, but it would re-import the user's module on every call (or fork a process that holds
vLLM's threads, which is unsafe), lose any state the module keeps (a client, an open file) and need
picklable arguments and results; a tool that hangs forever is a bug the timeout reports, and the
thread costs only its stack until exit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specterm.agent.errors import ToolError
from specterm.agent.handlers import HANDLERS

if TYPE_CHECKING:
    from specterm.agent.definition import AgentDef, ToolDef


GRACE_S = 0.5


@dataclass(frozen=True)
class ToolOutcome:
    ok: bool
    content: str = ""
    error: str | None = None
    truncated: bool = False
    latency_s: float = 0.0

    def for_prompt(self, limit: int) -> str:
        """The text fed back to the model: the content (cut at ``limit`` chars) or the error."""
        text = self.content if self.ok else f"error: {self.error}"
        return text if len(text) <= limit else text[: limit - 12] + " …(cut)"


class ToolBox:
    """An agent's tools with their resources (database, vector store), opened on first use."""

    def __init__(self, agent: AgentDef, *, store: Any = None) -> None:
        self.agent = agent
        self._db = None
        self._store = store
        self._examples = None
        self._lock = threading.Lock()

    def db(self):
        from specterm.agent.sqltool import ReadOnlyDB, database_path

        with self._lock:
            if self._db is None:
                if self.agent.database is None:
                    raise ToolError("this agent has no database")
                path = database_path(self.agent.name, self.agent.sql_script)
                self._db = ReadOnlyDB(
                    path, max_rows=self.agent.database.max_rows, max_bytes=self.agent.database.max_bytes
                )
            return self._db

    def store(self):
        from specterm.agent.vectors import VectorStore

        with self._lock:
            if self._store is None:
                self._store = VectorStore.for_agent(self.agent)
            return self._store

    def examples(self):
        """The agent's worked-example index (None when it has no ``retrieval.examples``)."""
        from specterm.agent.examples import ExampleStore

        if self.agent.examples_file is None:
            return None
        with self._lock:
            if self._examples is None:
                self._examples = ExampleStore.for_agent(self.agent)
            return self._examples

    @property
    def retrieves(self) -> bool:
        """Whether a request starts with retrieval (worked examples, document passages or both)."""
        r = self.agent.retrieval
        return r.top_k > 0 or (self.agent.examples_file is not None and r.example_k > 0)

    def retrieve(self, text: str) -> list:
        """What the agent puts in the context for ``text``: its nearest worked examples, then its
        top-k passages. Examples first: ``fit_prompt`` drops from the end, and a solved question like
        this one is worth more to a small model than a paragraph of docs."""
        r = self.agent.retrieval
        out = self.examples().search(text, r.example_k) if self.agent.examples_file and r.example_k else []
        return out + (self.store().search(text, r.top_k) if r.top_k else [])

    def _handler(self, tool: ToolDef) -> Callable[..., Any]:
        from specterm.agent.plugins import PluginError, is_user_handler, resolve

        if not is_user_handler(tool.handler):
            return HANDLERS[tool.handler]
        try:  # resolved (and cached) when the agent was loaded; here only for a hand-built ToolDef
            user = resolve(tool.handler, self.agent.path)
        except PluginError as err:
            raise ToolError(str(err)) from None
        return lambda box, args, t: user(args)

    def call(self, name: str, arguments: Any) -> ToolOutcome:
        start = time.perf_counter()
        tool = self.agent.tool(name)
        if tool is None:
            return ToolOutcome(False, error=f"unknown tool {name!r}")
        problem = _check_arguments(tool, arguments)
        if problem:
            return ToolOutcome(False, error=problem, latency_s=time.perf_counter() - start)
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["value"] = self._handler(tool)(self, arguments, tool)
            except ToolError as err:
                box["error"] = str(err)
            except BaseException as err:  # noqa: BLE001 - a failing tool is a result, never a crash
                # BaseException too: a user tool calling sys.exit() must not end the agent thread
                box["error"] = f"tool failed: {type(err).__name__}: {err}"

        worker = threading.Thread(target=work, name=f"tool-{name}", daemon=True)
        worker.start()
        # A short grace lets a handler that enforces the deadline itself (SQL interrupts its own
        # query) report why; only a handler that ignores it is cut off here.
        worker.join(tool.timeout_s + GRACE_S)
        latency = time.perf_counter() - start
        if worker.is_alive():
            return ToolOutcome(False, error=f"tool timed out after {tool.timeout_s:g}s", latency_s=latency)
        if "error" in box:
            return ToolOutcome(False, error=box["error"], latency_s=latency)
        value = box.get("value")
        text, truncated = value if isinstance(value, tuple) else (str(value), False)
        return ToolOutcome(True, content=text, truncated=truncated, latency_s=latency)


def _check_arguments(tool: ToolDef, arguments: Any) -> str | None:
    import jsonschema

    try:
        jsonschema.validate(arguments, tool.parameters)
    except jsonschema.ValidationError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "arguments"
        return f"bad arguments for {tool.name} at {where}: {err.message}"
    return None
