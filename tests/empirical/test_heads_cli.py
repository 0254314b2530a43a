"""``normsat heads`` and the report's atlas section, on one layer of MiniLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from empirical.cli import main
from empirical.cli.report import SECTIONS, write_report
from empirical.cli.sections.heads import heads_section
from empirical.cli.sections.limit import limit_section
from empirical.cli.sections.similarity import similarity_section
from empirical.models.corpus import load_corpus
from empirical.training.runs import TrainConfig, train


def test_heads_command_writes_one_entry_per_head(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, plot = tmp_path / "heads.json", tmp_path / "heads.png"
    code = main(["heads", "--model", "minilm", "--num-layers", "1", "--sentences", "3", "--no-paper",
                 "--ties", "uniform", "--quiet", "--json", str(out), "--plot", str(plot)])
    assert code == 0
    (run,) = json.loads(out.read_text())["runs"]
    assert run["label"] == "pretrained" and run["corpus"]["n_sentences"] == 3
    assert [(h["layer"], h["head"]) for h in run["heads"]] == [(0, h) for h in range(12)]
    assert all(h["class"] in ("local", "mixed", "global") and h["queries"] > 0 for h in run["heads"])
    assert run["thresholds"]["global_fraction"] == 0.5 and plot.stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "local" in printed
    # the table numbers layers as the similarity measure does: layer 1 is the first block
    header = next(line for line in printed.splitlines() if line.split()[:2] == ["layer", "head"])
    rows = printed.splitlines()[printed.splitlines().index(header) + 1:][:12]
    assert {row.split()[0] for row in rows} == {"1"}


@pytest.mark.parametrize("eps", ["0", "1", "nan"])
def test_eps_outside_the_unit_interval_is_refused(eps: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["heads", "--eps", eps])
    assert exit_info.value.code == 2 and "tolerance in (0, 1)" in capsys.readouterr().err


def test_report_section(tmp_path: Path) -> None:
    assert heads_section in SECTIONS
    path = write_report(tmp_path, sections=[heads_section], sentences=2, progress=False,
                        load_options={"num_layers": 1})
    text = path.read_text()
    assert "## Head atlas" in text and "(heads.png)" in text and (tmp_path / "heads.png").exists()
    data = json.loads((tmp_path / "results.json").read_text())["sections"]["heads"]
    assert set(data) == {"pretrained", "random-init"} and len(data["pretrained"]["heads"]) == 12


def _first_cells(markdown: str, header: str) -> list[str]:
    """The first column of the Markdown table under ``header`` (a line starting with it)."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header)) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return [row[1] if header.startswith("| model") else row[0] for row in rows]


def test_the_report_sections_number_layers_alike(tmp_path: Path) -> None:
    """Similarity, limit and head atlas sections of a one-layer model: the one block is layer 1
    everywhere (embeddings first where hidden states are listed), and the report says so once."""
    path = write_report(tmp_path, sections=[similarity_section, limit_section, heads_section],
                        sentences=2, progress=False, load_options={"num_layers": 1})
    text = path.read_text()
    similarity = _first_cells(text, "| layer | pretrained | random-init |")
    limit = _first_cells(text, "| layer | pretrained c = 1000 |")
    heads = _first_cells(text, "| model | layer | heads |")
    assert similarity == limit == ["embeddings", "layer 1"]
    assert heads == ["layer 1", "layer 1"]  # pretrained and random-init
    assert heads[0] == similarity[1]  # the first block, by the same name
    assert text.count("layer 1 the first transformer block") == 1


def test_heads_measures_trained_post_ln_and_pre_ln_runs(tmp_path: Path) -> None:
    """``--run`` loads the last checkpoint of ``normsat train`` folders: a post-LN (BERT decoder)
    and a pre-LN (GPT-2) model, three steps each, measured side by side as causal models."""
    corpus = load_corpus(n=60)
    for arch in ("post", "pre"):
        config = TrainConfig(arch=arch, layers=1, width=16, heads=2, batch_size=4, context=16, steps=3,
                             evaluations=1, eval_sentences=2, limit_similarity=False)
        train(config, tmp_path / arch, corpus=corpus).to_json(tmp_path / arch / "train.json")
    out, plot = tmp_path / "heads.json", tmp_path / "heads.png"
    code = main(["heads", "--run", str(tmp_path / "post"), "--run", str(tmp_path / "pre"),
                 "--sentences", "3", "--no-paper", "--ties", "uniform", "--quiet", "--json", str(out),
                 "--plot", str(plot)])
    assert code == 0 and plot.stat().st_size > 1000
    runs = json.loads(out.read_text())["runs"]
    assert [(r["label"], r["arch"], r["step"]) for r in runs] == [
        ("post-LN", "post", 3), ("pre-LN", "pre", 3)]
    for r in runs:
        assert r["causal"] and [(h["layer"], h["head"]) for h in r["heads"]] == [(0, 0), (0, 1)]
        assert all(h["queries"] > 0 and h["class"] in ("local", "mixed", "global") for h in r["heads"])
    assert main(["heads", "--run", str(tmp_path / "pre"), "--random-init", "--quiet"]) != 0
