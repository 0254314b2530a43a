"""docs/zoo.md: its table is the one docs/figures/zoo.py renders from zoo.json, and the degrees
recorded there are what :func:`homogeneity.analyze` gives today (checked for a few families: each
export takes seconds)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def zoo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("zoo_figure", ROOT / "docs" / "figures" / "zoo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def data() -> dict:
    return json.loads((ROOT / "docs" / "figures" / "zoo.json").read_text())


def test_the_doc_shows_the_table_of_the_record(zoo: ModuleType, data: dict) -> None:
    text = (ROOT / "docs" / "zoo.md").read_text()
    shown = text.split(zoo.BEGIN, 1)[1].split(zoo.END, 1)[0].strip()
    assert shown == zoo.table(data)
    assert list(data["families"]) == list(zoo.ROWS)


@pytest.mark.parametrize("family", ["bert", "llama", "qwen2-moe"])
def test_recorded_degrees_are_what_analyze_gives(zoo: ModuleType, data: dict, family: str) -> None:
    now = zoo.degree_entry(family)
    recorded = data["families"][family]["degree"]
    for key in ("output", "degree", "grade", "hidden_states", "weakenings", "unsupported"):
        assert recorded[key] == now[key], key
