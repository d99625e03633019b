"""User tools: Python functions an agent brings itself, beside its ``agent.toml`` or from a package.

A tool's ``handler`` in ``agent.toml`` is one of

* a built-in (``sql.query``: a dotted name, ``specterm.agent.handlers.HANDLERS``);
* ``MODULE:FUNCTION`` — ``FUNCTION`` in ``MODULE.py`` beside ``agent.toml`` (``tools:lookup_weather``).
  The file is imported by path under a module name unique to the agent folder
  (``specterm_user_tools._<hash>.tools``), so two agents' ``tools.py`` never collide and nothing is
  added to ``sys.path``;
* ``entry:NAME`` — the entry point ``NAME`` of the group ``specterm.tools`` that an installed package
  declares (``[project.entry-points."specterm.tools"] weather = "mypkg.tools:lookup_weather"``), found
  with ``importlib.metadata`` the way pytest plugins and harlequin adapters are.

A user tool is a plain function (``async def`` works too). Its arguments are a JSON Schema like a
built-in's, so the call is grammar-constrained the same way: ``parameters`` in ``agent.toml`` when
given, else derived by pydantic — from the function's one parameter when that is a pydantic model
(``Model.model_json_schema()``; the function gets a validated ``Model``), else from its signature
(``TypeAdapter(fn).json_schema()``; bound strings with ``Annotated[str, Field(max_length=...)]``;
the function gets keyword arguments). A missing ``description`` is the docstring's first paragraph.
It returns the result text (a dict or list is sent as JSON, anything else as ``str()``).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import inspect
import json
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

ENTRY_POINT_GROUP = "specterm.tools"
ENTRY_PREFIX = "entry:"
_USER_SPEC = re.compile(r"^(?:entry:[A-Za-z0-9_.\-]+|[A-Za-z_][A-Za-z0-9_]*:[A-Za-z_][A-Za-z0-9_]*)$")
_lock = threading.Lock()
_cache: dict[tuple[str, str], UserTool] = {}


class PluginError(ValueError):
    """A user tool that cannot be loaded; ``str(err)`` is the one line after ``tools[i].handler:``."""


def is_user_handler(spec: str) -> bool:
    return ":" in spec


def check_user_handler(spec: str) -> None:
    if not _USER_SPEC.match(spec):
        raise PluginError(
            f"{spec!r} is neither a built-in, MODULE:FUNCTION (a MODULE.py beside "
            "agent.toml) nor entry:NAME (an installed specterm.tools entry point)"
        )


@dataclass(frozen=True)
class UserTool:
    """A resolved user tool: the function, where it came from, and how to call it."""

    fn: Callable[..., Any]
    source: str
    """Where it was found, for messages and ``agents list`` (a file path or ``dist version``)."""
    model: Any = None
    """The pydantic model the function takes, if it takes one; else it gets keyword arguments."""

    def parameters(self) -> dict[str, Any]:
        from pydantic import TypeAdapter

        schema = self.model.model_json_schema() if self.model is not None else TypeAdapter(self.fn).json_schema()
        schema.setdefault("additionalProperties", False)  # the grammar must not invent extra keys
        return schema

    def description(self) -> str:
        doc = inspect.getdoc(self.fn) or ""
        return " ".join(doc.split("\n\n")[0].split())[:300]

    def __call__(self, arguments: dict[str, Any]) -> str:
        result = self.fn(self.model.model_validate(arguments)) if self.model is not None else self.fn(**arguments)
        if inspect.isawaitable(result):  # an async tool: its own event loop, in this worker thread
            result = asyncio.run(_awaited(result))
        if isinstance(result, str):
            return result
        if isinstance(result, (dict, list)):
            return json.dumps(result, ensure_ascii=False, default=str)
        return "" if result is None else str(result)


async def _awaited(awaitable):
    return await awaitable


def _model_param(fn: Callable[..., Any]):
    """The pydantic model class ``fn`` takes as its only parameter, or None."""
    from pydantic import BaseModel

    try:
        params = list(inspect.signature(fn).parameters.values())
        hints = inspect.get_annotations(fn, eval_str=True)
    except (TypeError, ValueError, NameError):
        return None
    if len(params) != 1:
        return None
    kind = hints.get(params[0].name)
    return kind if inspect.isclass(kind) and issubclass(kind, BaseModel) else None


def _wrap(fn: Any, source: str, what: str) -> UserTool:
    if not callable(fn):
        raise PluginError(f"{what} is not a function (it is a {type(fn).__name__})")
    return UserTool(fn=fn, source=source, model=_model_param(fn))


def _load_module(folder: Path, module: str):
    path = folder / f"{module}.py"
    if not path.is_file():
        raise PluginError(f"no file {module}.py beside agent.toml ({path})")
    # A unique name per folder: two agents may both have a tools.py.
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"specterm_user_tools._{digest}.{module}"
    if name in sys.modules:  # another tool of this agent lives in the same file: one module, run once
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses and pydantic look their module up while it runs
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as err:
        sys.modules.pop(name, None)
        raise PluginError(f"cannot import {module}.py: SyntaxError: {err.msg} (line {err.lineno})") from None
    except BaseException as err:  # noqa: BLE001 - user code: any failure is a loading error
        sys.modules.pop(name, None)
        raise PluginError(f"cannot import {module}.py: {type(err).__name__}: {err}") from None
    return mod


def entry_point_tools() -> list[Any]:
    """The installed ``specterm.tools`` entry points (``importlib.metadata``: nothing imported yet)."""
    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def entry_source(ep) -> str:
    dist = getattr(ep, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else ep.value


def _resolve(spec: str, folder: Path) -> UserTool:
    if spec.startswith(ENTRY_PREFIX):
        name = spec[len(ENTRY_PREFIX) :]
        found = [ep for ep in entry_point_tools() if ep.name == name]
        if not found:
            known = ", ".join(ep.name for ep in entry_point_tools()) or "none installed"
            raise PluginError(f"no {ENTRY_POINT_GROUP} entry point named {name!r} (known: {known})")
        ep = found[0]
        try:
            fn = ep.load()
        except BaseException as err:  # noqa: BLE001 - a broken package is a loading error
            raise PluginError(
                f"entry point {name!r} ({ep.value}) failed to load: {type(err).__name__}: {err}"
            ) from None
        return _wrap(fn, entry_source(ep), f"entry point {name!r} ({ep.value})")
    module, func = spec.split(":", 1)
    mod = _load_module(folder, module)
    if not hasattr(mod, func):
        raise PluginError(f"module {module}.py has no function {func!r}")
    return _wrap(getattr(mod, func), str(folder / f"{module}.py"), f"{module}.{func}")


def resolve(spec: str, folder: Path) -> UserTool:
    """The user tool ``spec`` names for the agent in ``folder``; raises ``PluginError`` (one line).
    Resolved once per process: a module's top level (opening a client, reading a file) runs once."""
    check_user_handler(spec)
    key = (spec, "" if spec.startswith(ENTRY_PREFIX) else str(Path(folder).resolve()))
    with _lock:
        if key not in _cache:
            _cache[key] = _resolve(spec, Path(folder))
        return _cache[key]
