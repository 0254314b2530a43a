"""The report section on the exact limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from empirical.cli.report import SECTIONS, write_report
from empirical.cli.sections.limit import limit_section
from empirical.errors import EmpiricalError
from empirical.measure.convergence import limit_convergence
from empirical.models.loading import load_model


def test_limit_section_tables_c_1000_beside_infinity(tmp_path: Path) -> None:
    path = write_report(tmp_path, sections=[limit_section], sentences=2, progress=False)
    text = path.read_text()
    assert "| layer | pretrained c = 1000 | pretrained c = ∞ |" in text
    assert (tmp_path / "limit_convergence.png").stat().st_size > 1000
    data = json.loads((tmp_path / "results.json").read_text())["sections"]["limit"]
    pretrained = data["pretrained"]
    assert len(pretrained["layers"]) == 7
    assert set(pretrained["to_limit"]) == {"1", "10", "100", "1000", "10000"}
    # The top layer approaches its limit as c grows.
    top = [pretrained["to_limit"][c][-1] for c in ("10", "10000")]
    assert top[1] > top[0] and top[1] > 0.99
    assert limit_section in SECTIONS


def test_convergence_shares_the_similarity_input_checks() -> None:
    model, tokenizer = load_model("bert", random_init=True, num_layers=1)
    with pytest.raises(EmpiricalError, match="at least one sentence"):
        limit_convergence(model, tokenizer, [])
    model.train()
    with pytest.raises(EmpiricalError, match="eval"):
        limit_convergence(model, tokenizer, ["A short sentence."])
