"""The contracts in pyproject.toml (``[tool.importlinter]``): core packages never import textual or
``specterm.ui``, nothing in specterm imports the test doubles (``tests/doubles.py``), specterm's
packages and specterm.agent's modules import downward only (``layers`` contracts), nothing outside
``specterm.models.training`` imports it but two named lazy imports (``protected``); and no import
cycle among specterm's modules (grimp, here).
import-linter reads every import statement, the ones inside functions included, so a lazy import of
the UI from the core breaks it too. An ``ignore_imports`` entry exempts a pair of modules, not one
statement, so the training room's two exemptions are checked here to be lazy (no module-level import
of it anywhere outside it). Replaces four partial checks that
each imported a different list of modules and looked at ``sys.modules``."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _lint(root: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(exe), "--config", str(root / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
        env=env,
    )


def test_core_packages_never_import_textual_or_the_ui():
    proc = _lint(REPO)
    assert proc.returncode == 0 and "0 broken" in proc.stdout, proc.stdout[-2000:] + proc.stderr


def test_the_contract_catches_a_lazy_ui_import_in_the_core(tmp_path):
    """The check can fail: a copy of the package whose stats module imports the UI inside a function."""
    shutil.copytree(REPO / "specterm", tmp_path / "specterm", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "specterm" / "stats.py").open("a") as f:
        f.write("\n\ndef _probe():\n    from specterm.ui import entries  # noqa: F401\n")
    proc = _lint(tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})  # the copy, not the repo
    assert proc.returncode != 0 and "BROKEN" in proc.stdout and "specterm.stats" in proc.stdout, proc.stdout[-2000:]


def test_the_contract_catches_a_module_level_import_of_the_training_room(tmp_path):
    """A copy of the package whose default-pair logic imports the intents at module level."""
    shutil.copytree(REPO / "specterm", tmp_path / "specterm", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "specterm" / "models" / "defaults.py").open("a") as f:
        f.write("\nfrom specterm.models.training.intents import intents_for  # noqa: E402, F401\n")
    proc = _lint(tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})  # the copy, not the repo
    assert proc.returncode != 0 and "specterm.models.defaults" in proc.stdout, proc.stdout[-2000:]


TRAINING = "specterm.models.training"


def _module_level_imports(source: str, package: str) -> list[tuple[int, str]]:
    """(line, module) of every import that runs when the module is imported: at the top, under
    ``if``/``try``/``with``/loops and in class bodies; not inside functions. ``package`` resolves
    relative imports; ``from a import b`` gives ``a.b`` (b may be a submodule)."""
    found: list[tuple[int, str]] = []

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.Import):
                found.extend((node.lineno, a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                found.extend((node.lineno, f"{base}.{a.name}") for a in node.names)
            for field in ("body", "orelse", "finalbody", "handlers"):
                visit(getattr(node, field, []))

    visit(ast.parse(source).body)
    return found


def test_the_module_level_import_finder_sees_guarded_imports_and_skips_functions():
    source = (
        "import os\n"
        "try:\n    from specterm.models.training import corpus\nexcept ImportError:\n    pass\n"
        "class A:\n    from .training.train import QUICK\n"
        "def f():\n    from specterm.models.training.train import train_pair\n"
    )
    assert _module_level_imports(source, "specterm.models") == [
        (1, "os"),
        (3, "specterm.models.training.corpus"),
        (7, "specterm.models.training.train.QUICK"),
    ]


def test_nothing_imports_the_training_room_at_module_level():
    """The runtime's reader never opens the corpora: the contract's two exempt imports (and any
    other) stay inside the functions that train or build."""
    found = []
    for path in sorted((REPO / "specterm").rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        if module == TRAINING or module.startswith(TRAINING + "."):
            continue
        package = module.removesuffix(".__init__") if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for line, name in _module_level_imports(path.read_text(encoding="utf-8"), package):
            if name == TRAINING or name.startswith(TRAINING + "."):
                found.append(f"{path.relative_to(REPO)}:{line}: {name}")
    assert found == []


def _import_cycles() -> list[list[str]]:
    """Strongly connected components (more than one module) of specterm's import graph, as grimp
    (import-linter's graph) builds it: every import counts, function-local and ``TYPE_CHECKING``
    ones included, since a type-only back edge is still a circle in the design."""
    import grimp

    graph = grimp.build_graph("specterm", cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.find_modules_directly_imported_by(v)):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return sorted(cycles)


# The layers contracts cover imports between specterm's packages and between specterm.agent's
# modules, not inside the other packages, so cycles are checked here for all of specterm.


def test_no_import_cycles():
    assert _import_cycles() == []
