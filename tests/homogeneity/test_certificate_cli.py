"""``normsat degree --certificate``, ``normsat check`` and ``normsat lemmas``: exit codes and files."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
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


def test_check_json_holds_the_verdict_each_output_and_each_failure(
        certificate: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "verdict.json"
    assert main(["check", str(certificate), *BERT, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert (data["schema"], data["verdict"], data["exit_code"], data["failures"]) == (
        "normsat.check/1", "accepted", 0, [])
    assert data["outputs"]["last_hidden_state"] == {"degree": "1", "grade": "asymptotic"}
    assert f"JSON: {out}" in capsys.readouterr().out
    forged = json.loads(certificate.read_text())
    forged["outputs"]["last_hidden_state"] = forged["outputs"]["pooler_output"]
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    assert main(["check", str(tmp_path / "forged.json"), *BERT, "--json", str(out)]) == 1
    data = json.loads(out.read_text())
    assert (data["verdict"], data["exit_code"], data["outputs"]) == ("rejected", 1, {})
    assert [(f["field"], f["node"]) for f in data["failures"]] == [("outputs['last_hidden_state']",
                                                                    forged["outputs"]["hidden_states.1"])]


def test_check_json_records_bad_input_with_the_field(tmp_path: Path, certificate: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    text = certificate.read_text().replace('"1", "exact"]', '"1e999999999", "exact"]', 1)
    (tmp_path / "huge.json").write_text(text)
    out = tmp_path / "verdict.json"
    assert main(["check", str(tmp_path / "huge.json"), *BERT, "--json", str(out)]) == 2
    data = json.loads(out.read_text())
    assert (data["verdict"], data["exit_code"]) == ("bad input", 2)
    assert data["failures"][0]["field"] == "steps[0].degree"
    assert capsys.readouterr().err.count("\n") == 1


def _number(digits: int) -> str:
    """A certificate whose steps are a number of ``digits`` digits, every other field well formed."""
    return ('{"schema": "normsat.certificate/1", "step_fields": ["node", "target", "inputs", "lemma", '
            '"case", "conditions", "degree", "grade"], "steps": ' + "1" * digits + ', "outputs": {}, '
            '"params": [], "graph_hash": "' + "ab" * 32 + '"}')


@pytest.mark.parametrize(("content", "message"), [
    (b"\xff{}", "byte 0 (0xff) is not UTF-8; expected a certificate in UTF-8 text"),
    (_number(5000).encode(), "field steps: expected a list of steps, got RawNumber('1111111111"),
    (b"[" * 3_000_000 + b"]" * 3_000_000, "its arrays and objects nest deeper than 4 levels"),
    (b"[" * 3_000_000, "its arrays and objects nest deeper than 4 levels"),
    (b'{"a": "' + b"x" * (8 * 2**20) + b'"}', "bytes; expected a certificate of at most 8,388,608 bytes"),
    (b'{"schema": "normsat.certificate/1", "schema": "x"}', "the key 'schema' appears twice in one object"),
])
def test_untrusted_certificate_files_are_refused_naming_the_file(tmp_path: Path, content: bytes, message: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "untrusted.json"
    path.write_bytes(content)
    assert main(["check", str(path), *BERT]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"normsat check: error: {path}: ") and message in err and err.count("\n") == 1


def test_check_help_states_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for rule in ("Exit code 0: accepted", "1: rejected, a step or an output does not follow",
                 "2: bad input"):
        assert rule in help_text
    assert "--json PATH" in help_text and "--quiet" in help_text and "--params GLOB" in help_text


def test_a_reader_that_goes_away_ends_the_check_quietly(certificate: Path) -> None:
    """`normsat check cert.json | head -1`: the pipe is closed before anything is written."""
    command = [sys.executable, "-m", "empirical.cli", "check", str(certificate), *BERT]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait() == 128 + signal.SIGPIPE
    assert "Broken pipe" not in err and "Errno 32" not in err and "Traceback" not in err, err
