"""The layering contract in pyproject.toml (``[tool.importlinter]``): core packages never import
textual or ``specterm.ui``. import-linter reads every import statement, the ones inside functions
included, so a lazy import of the UI from the core breaks it too. Replaces four partial checks that
each imported a different list of modules and looked at ``sys.modules``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _lint(root: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(exe), "--config", str(root / "pyproject.toml"), "--no-cache"],
                          capture_output=True, text=True, cwd=root, timeout=120, env=env)


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
