"""Lint: `ruff check` passes and `ruff format` has nothing to change, on the package, the tests, the scripts and
the benchmarks (rules in pyproject.toml [tool.ruff])."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PATHS = ["specterm", "tests", "scripts", "benchmarks"]
NO_RUFF = "ruff is not installed (it is in the test extra: pip install -e '.[test]')"


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason=NO_RUFF)
def test_ruff_check_passes():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *PATHS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (
        f"ruff check found problems (fix with `ruff check --fix {' '.join(PATHS)}`, or a `# noqa: CODE - why`):\n"
        f"{proc.stdout}{proc.stderr}"
    )


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason=NO_RUFF)
def test_ruff_format_has_nothing_to_change():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--no-cache", "--check", *PATHS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"not formatted (run `ruff format {' '.join(PATHS)}`):\n{proc.stdout}{proc.stderr}"
