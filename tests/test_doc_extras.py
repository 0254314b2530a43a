"""Each docs page names the extra its examples need (`pip install "normsat[NAME]"`), and that
extra, with the core dependencies, holds every distribution the page's doctests import or need.
scripts/doc_extras.py runs a page's doctests in a fresh venv with exactly those extras (minutes:
too slow here); this test checks the same mapping from the text: page → extras → pyproject.toml."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
OWN = {"homogeneity", "saturated", "empirical"}
PAGES = sorted((ROOT / "docs").glob("*.md"))


@pytest.fixture(scope="module")
def script(load_script: Callable[[Path, str], ModuleType]) -> ModuleType:
    return load_script(ROOT / "scripts" / "doc_extras.py", "doc_extras")


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _uncovered(script: ModuleType, pyproject: dict, page: str) -> set[str]:
    """What the page's doctests need that neither the standard library, normsat itself nor the
    distributions its named extras install provide."""
    provided = script.requirements(pyproject, script.named_extras(page))
    owners = importlib.metadata.packages_distributions()
    missing = set()
    for need in script.doctest_needs(page) - OWN - set(sys.stdlib_module_names):
        dists = {d.lower().replace("_", "-") for d in owners.get(need, [need])}
        if not dists & provided:
            missing.add(need)
    return missing


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_extras_a_page_names_cover_its_doctests(script: ModuleType, pyproject: dict, page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert script.named_extras(text) <= set(pyproject["project"]["optional-dependencies"]), page.name
    assert _uncovered(script, pyproject, text) == set(), page.name


def test_the_check_fails_where_a_page_names_no_extra(script: ModuleType, pyproject: dict) -> None:
    """norms.md without its install line: its Trainer needs accelerate, its logs tensorboard."""
    text = (ROOT / "docs" / "norms.md").read_text(encoding="utf-8")
    assert script.named_extras(text) == {"trainer", "tensorboard"}
    unnamed = text.replace('"normsat[', '"other[')
    assert _uncovered(script, pyproject, unnamed) == {"accelerate", "tensorboard"}


def test_the_tensorboard_extra_holds_what_the_trainer_needs(script: ModuleType, pyproject: dict) -> None:
    assert {"tensorboard", "accelerate"} <= script.requirements(pyproject, {"tensorboard"})
    assert "accelerate" in script.requirements(pyproject, {"trainer"})
    assert "accelerate" not in script.requirements(pyproject)
