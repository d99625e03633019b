"""Lint: `ruff check` passes on the package, the tests and the scripts (rules in pyproject.toml [tool.ruff])."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PATHS = ["specterm", "tests", "scripts"]


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (it is in the test extra: pip install -e '.[test]')")
def test_ruff_check_passes():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *PATHS],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (
        f"ruff check found problems (fix with `ruff check --fix {' '.join(PATHS)}`, or a `# noqa: CODE - why`):\n"
        f"{proc.stdout}{proc.stderr}"
    )
