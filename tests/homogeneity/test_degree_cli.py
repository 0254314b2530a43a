"""``normsat degree``, the report section, and the generated rule table in the docs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from empirical.cli import main
from empirical.cli.sections.context import ReportContext
from empirical.cli.sections.degree import degree_section
from homogeneity.rules import rule_table_markdown

DOCS = Path(__file__).resolve().parents[2] / "docs" / "homogeneity.md"


def test_docs_rule_table_is_the_generated_one() -> None:
    text = DOCS.read_text(encoding="utf-8")
    start, end = "<!-- rule table -->\n", "<!-- end rule table -->"
    embedded = text[text.index(start) + len(start):text.index(end)]
    assert embedded == rule_table_markdown() + "\n"


def test_degree_command_prints_table_and_writes_json(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "deg.json"
    code = main(["degree", "bert", "--random-init", "--num-layers", "1", "--params",
                 "encoder.*", "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "degree 1 (asymptotic) of last_hidden_state" in printed
    data = json.loads(out.read_text())
    assert data["schema"] == "normsat.degree/1" and data["model"]["name"] == "bert"
    # Embeddings are fixed: the embedding output is a constant, the encoder makes degree 1.
    assert data["report"]["outputs"]["hidden_states.0"]["degree"] == 0
    assert all(p.startswith("encoder.") for p in data["report"]["scaled_parameters"])


def test_degree_command_accepts_a_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "my_factories.py").write_text(
        "import torch\nfrom torch import nn\n\n"
        "def make():\n"
        "    return nn.Sequential(nn.Linear(3, 4, bias=False), nn.ReLU()), (torch.randn(2, 3),)\n"
        "\n\ndef broken():\n    return 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["degree", "my_factories:make"]) == 0
    assert "degree 1 (exact) of output" in capsys.readouterr().out
    assert main(["degree", "my_factories:broken"]) == 2
    assert "expected my_factories:broken to return (model, args)" in capsys.readouterr().err


def test_degree_command_reports_bad_params(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["degree", "minilm", "--num-layers", "1", "--params", "nothing.*"]) == 2
    assert "match no parameter" in capsys.readouterr().err


def test_report_section_has_the_degree_table(tmp_path: Path, minilm: Any) -> None:
    ctx = ReportContext(out=tmp_path)
    ctx.__dict__["pretrained"] = minilm  # the session's MiniLM instead of loading it again
    section = degree_section(ctx)
    assert section.key == "degree"
    assert "**1-homogeneous (asymptotic)**" in section.markdown
    assert "| `encoder.layer.5` | BertLayer | 0 (exact), 1 (asymptotic) | 1 (asymptotic) |" \
        in section.markdown
    assert section.data["grade"] == "asymptotic" and "nodes" not in section.data
