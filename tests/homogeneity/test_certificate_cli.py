"""``normsat degree --certificate``, ``normsat check`` and ``normsat lemmas``: exit codes and files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from empirical.cli import main
from homogeneity.rules import RULES, register_rule

BERT = ["--model", "bert", "--random-init", "--num-layers", "1", "--quiet"]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cert") / "bert.json"
    assert main(["degree", *BERT, "--certificate", str(path)]) == 0
    return path


def test_a_written_certificate_is_accepted(certificate: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(certificate), *BERT]) == 0
    out = capsys.readouterr().out
    assert "certificate accepted" in out and "last_hidden_state: degree 1 (asymptotic)" in out


def test_a_certificate_of_another_model_is_bad_input(certificate: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    gpt2 = ["--model", "gpt2", "--random-init", "--num-layers", "1", "--quiet"]
    assert main(["check", str(certificate), *gpt2]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"normsat check: error: {certificate} does not apply to gpt2: node ")
    assert "a certificate of another model or graph" in captured.err and "accepted" not in captured.out


BESSEL = """import torch
from torch import nn


class Bessel(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return torch.special.i0(self.lin(x))


def make():
    torch.manual_seed(0)
    return Bessel(), (torch.randn(3, 2),)
"""


def test_a_model_with_an_op_without_a_rule_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bessel_factories.py").write_text(BESSEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "bessel.json"
    assert main(["degree", "bessel_factories:make", "--certificate", str(path)]) == 0
    assert "INCOMPLETE (no proved lemma for aten.special_i0.default)" in capsys.readouterr().out
    assert main(["check", str(path), "--model", "bessel_factories:make", "--quiet"]) == 2
    captured = capsys.readouterr()
    assert "ops no proved lemma covers (aten.special_i0.default)" in captured.err
    assert "accepted" not in captured.out and captured.err.count("\n") == 1


def test_a_forged_certificate_is_rejected_naming_the_step(certificate: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(certificate.read_text())
    fields = data["step_fields"]
    row = next(r for r in data["steps"] if r[fields.index("target")] == "aten.gelu.default")
    row[fields.index("grade")] = "exact"
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(data))
    assert main(["check", str(forged), *BERT]) == 1
    assert f"node {row[fields.index('node')]} (aten.gelu.default)" in capsys.readouterr().out


@pytest.mark.parametrize("content", ["{oops", '{"schema": "normsat.certificate/7"}', None])
def test_bad_certificate_files_exit_2(tmp_path: Path, content: str | None,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.json"
    if content is not None:
        path.write_text(content)
    assert main(["check", str(path), *BERT]) == 2
    err = capsys.readouterr().err
    assert err.startswith("normsat check: error: ") and err.count("\n") == 1


def test_lemmas_command_proves_every_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lemmas.json"
    assert main(["lemmas", "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert len(results) == len(RULES) and all(r["proved"] for r in results)
    assert f"{len(RULES)} of {len(RULES)} targets proved" in capsys.readouterr().out


def test_lemmas_command_exits_1_on_a_wrong_rule(capsys: pytest.CaptureFixture[str]) -> None:
    target = torch.ops.aten.sigmoid.default
    saved = RULES[target]
    register_rule(target, lambda x: x)
    try:
        assert main(["lemmas"]) == 1
    finally:
        register_rule(target, saved)
    out = capsys.readouterr().out
    assert "aten.sigmoid.default" in out and "UNPROVED" in out
