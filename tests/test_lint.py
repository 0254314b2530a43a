"""ruff, mypy and the import-linter contracts, configured in pyproject.toml, stay clean."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; install the test extra: pip install -e '.[test]'")
    return found


def test_ruff_is_clean():
    done = subprocess.run([_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_is_clean():
    done = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_import_contracts_are_kept():
    """The packages and empirical's sub-packages import downward only (DESIGN.md, Shape)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([_tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
