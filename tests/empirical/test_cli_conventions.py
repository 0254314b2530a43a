"""CLI conventions: one model argument, --version, --debug, quiet loading, outputs, the limit's plot."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

from empirical.cli import main
from empirical.cli.sections.similarity import similarity_section
from empirical.measure.plotting import plot_similarity
from empirical.measure.similarity import SimilarityResult


def _factory_module(folder: Path, name: str, config_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An importable module ``name`` whose ``make()`` builds a random-init BERT from ``config_dir``."""
    (folder / f"{name}.py").write_text(
        "import transformers\nfrom empirical.models.loading import load_tokenizer, minilm_path\n"
        f"def make():\n    config = transformers.BertConfig.from_pretrained({str(config_dir)!r})\n"
        "    return transformers.BertModel(config), load_tokenizer(minilm_path())\n")
    monkeypatch.syspath_prepend(str(folder))


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and re.fullmatch(r"normsat \S+\n", capsys.readouterr().out)


def test_quiet_json_run_prints_nothing_on_stderr(tiny_bert_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    done = subprocess.run(
        [sys.executable, "-m", "empirical.cli", "similarity", "--model", str(tiny_bert_dir),
         "--sentences", "2", "--quiet", "--json", str(out)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "TQDM_DISABLE": ""},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no "Loading weights" bar, no log line of a dependency
    run = json.loads(out.read_text())["runs"][0]
    assert run["scale"] == 1000.0 and run["exact_limit"] is False and run["model"]["seed"] is None
    assert all(-1.0 <= layer["similarity"] <= 1.0 for layer in run["layers"])


def test_debug_shows_the_traceback_and_errors_are_one_line(tiny_bert_dir: Path,
                                                           capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["similarity", "--model", str(tiny_bert_dir), "--scale", "0.5"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == "normsat similarity: error: expected the scale c (parameters are multiplied by c) " \
                  "to be a number ≥ 1 or inf, got 0.5\n"
    assert main([*argv, "--debug"]) == 2
    assert "Traceback (most recent call last)" in capsys.readouterr().err
    monkeypatch.setenv("NORMSAT_DEBUG", "1")
    assert main(argv) == 2
    assert "Traceback" in capsys.readouterr().err


def test_a_bug_is_exit_code_one_with_one_line(tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> None:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("empirical.measure.similarity.representation_similarity", broken)
    assert main(["similarity", "--model", str(tiny_bert_dir), "--sentences", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("normsat similarity: internal error: ZeroDivisionError: division by zero")
    assert err.count("\n") == 1 and "--debug" in err


def test_one_model_argument_for_every_command(tiny_bert_dir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["degree", "--model", str(tiny_bert_dir), "--depth", "1"]) == 0
    assert main(["degree", str(tiny_bert_dir), "--depth", "1"]) == 0  # the older positional form
    capsys.readouterr()
    assert main(["degree", "minilm", "--model", str(tiny_bert_dir)]) == 2
    assert "expected one model, got --model" in capsys.readouterr().err
    _factory_module(tmp_path, "cli_factories", tiny_bert_dir, monkeypatch)
    out = tmp_path / "factory.json"
    assert main(["similarity", "--model", "cli_factories:make", "--sentences", "2", "--quiet",
                 "--json", str(out)]) == 0
    assert json.loads(out.read_text())["runs"][0]["model"]["name"] == "cli_factories:make"
    assert main(["degree", "--model", "cli_factories:make", "--depth", "1"]) == 0  # traced on SENTENCES


def test_degree_json_records_its_inputs(tiny_bert_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "degree.json"
    assert main(["degree", "--model", str(tiny_bert_dir), "--params", "encoder.*", "--json", str(out)]) == 0
    inputs = json.loads(out.read_text())["inputs"]
    assert inputs["params"] == ["encoder.*"] and len(inputs["sentences"]) == 2
    assert inputs["kwargs"]["input_ids"]["dtype"] == "torch.int64"


def test_report_takes_the_similarity_options(tiny_bert_dir: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # The options reach the shared context; the similarity section alone shows it (and is quick).
    monkeypatch.setattr("empirical.cli.report.SECTIONS", [similarity_section])
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The norm grows during training.\nAttention saturates.\n")
    out = tmp_path / "report"
    assert main(["report", "--out", str(out), "--model", str(tiny_bert_dir), "--corpus", str(corpus),
                 "--sentences", "2", "--num-layers", "1", "--dtype", "float64", "--quiet"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["corpus"]["source"] == str(corpus) and results["corpus"]["n_sentences"] == 2
    similarity = results["sections"]["similarity"]["pretrained"]
    assert similarity["dtype"] == "torch.float64" and len(similarity["layers"]) == 2
    assert not list(out.glob(".*"))  # no temporary file left behind


def test_plot_of_the_limit_is_labelled_with_integer_layers(tmp_path: Path) -> None:
    result = SimilarityResult(layers=("embeddings", "layer 1", "layer 2"), per_layer=(1.0, 0.9, 0.8),
                              stacks=("", "", ""), scale=float("inf"), n_sentences=1,
                              n_tokens={"": 3}, n_truncated=0, max_length=512)
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text stays text in the SVG
        svg = plot_similarity({"pretrained": result}, tmp_path / "limit.svg").read_text()
    assert "the exact c → ∞ limit" in svg
    ticks = re.findall(r">(-?\d+(?:\.\d+)?)</text>", svg)
    # Layers 0, 1, 2 and no half layers (the y axis has 0.0, 0.2, …, 1.0 and never 1.5).
    assert {"0", "1", "2"} <= set(ticks) and not {"0.50", "1.5", "1.50"} & set(ticks)


def test_report_takes_a_factory_and_says_which_sections_it_skips(
        tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from empirical.cli.sections.context import ReportContext, Section

    def size(ctx: ReportContext) -> Section:  # a quick section that needs only the model itself
        model, _ = ctx.pretrained
        return Section("size", "Size", "measured", {"parameters": sum(p.numel() for p in model.parameters())})

    monkeypatch.setattr("empirical.cli.report.SECTIONS", [similarity_section, size])
    _factory_module(tmp_path, "report_factories", tiny_bert_dir, monkeypatch)
    out = tmp_path / "report"
    assert main(["report", "--out", str(out), "--model", "report_factories:make", "--sentences", "2",
                 "--quiet"]) == 0
    sections = json.loads((out / "results.json").read_text())["sections"]
    assert "random-init twin" in sections["similarity"]["skipped"]
    assert sections["size"]["parameters"] > 0
    markdown = (out / "report.md").read_text()
    assert "Skipped: the model comes from the factory report_factories:make" in markdown
    assert "(from a factory, no random-init twin)" in markdown.splitlines()[2]


def test_degree_and_projection_take_device_and_dtype(tiny_bert_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "degree.json"
    assert main(["degree", "--model", str(tiny_bert_dir), "--depth", "1", "--device", "cpu",
                 "--dtype", "float64", "--json", str(out)]) == 0
    model = json.loads(out.read_text())["model"]
    assert (model["dtype"], model["device"]) == ("torch.float64", "cpu")
    out = tmp_path / "projection.json"
    assert main(["projection", "--variants", "attention", "--sequences", "2", "--length", "3",
                 "--max-scale", "2", "--scale-step", "1", "--accuracies", "1.0", "--no-saturation",
                 "--device", "cpu", "--dtype", "float32", "--json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert (document["dtype"], document["device"]) == ("torch.float32", "cpu")


def test_report_num_layers_help_states_its_bound(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    assert "at most the checkpoint's depth" in " ".join(capsys.readouterr().out.split())
