"""normsat train: tiny real runs through the CLI and the Python API, checked against independent numbers."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from itertools import pairwise

import pytest
import safetensors.torch
import torch
from torch import nn

import empirical.cli.sections.training as training_sections
import empirical.training.fits as fits
from empirical.cli import main
from empirical.cli.sections.context import ReportContext
from empirical.cli.sections.training import training_section
from empirical.errors import EmpiricalError
from empirical.models.corpus import load_corpus
from empirical.training.runs import (
    TrainConfig,
    build_model,
    checkpoint_path,
    confirm_scale_invariant,
    evaluation_steps,
    load_checkpoint,
    read_run,
    train,
)

FLOAT32_EPS = 2.0**-23
TINY = {"layers": 1, "width": 16, "heads": 2, "batch_size": 4, "context": 16, "eval_sentences": 4}


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-strict JSON constant {name}")


def _norm(model: nn.Module) -> float:
    return math.sqrt(sum(float(p.detach().double().square().sum()) for p in model.parameters()))


@pytest.fixture(scope="module")
def small_corpus():
    return load_corpus(n=200)


def test_cli_run_writes_reloadable_checkpoints_strict_json_and_figures(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--layers", "1", "--width", "16", "--heads", "2", "--steps", "6",
                 "--evaluations", "3", "--eval-sentences", "4", "--blocks-per-step", "4",
                 "--context", "16", "--quiet", "--out", str(out)])
    assert code == 0 and "best law" in capsys.readouterr().out
    data = json.loads((out / "train.json").read_text(), parse_constant=_reject_constant)
    assert data == read_run(out)
    assert data["config"]["steps"] == 6 and data["best"] in {f["law"] for f in data["fits"]}
    # The growth document has the shape of normsat norms JSON: top-level fits, best, skipped.
    assert all({"law", "params", "r2", "aic"} <= set(fit) for fit in data["fits"])
    assert {"best_by_aic", "skipped", "layer_growth"} <= set(data)
    assert [row["layer"] for row in data["layer_growth"]]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # no staging folder left beside it
    assert data["provenance"]["versions"]["torch"] == torch.__version__
    wanted = evaluation_steps(6, 3)
    assert wanted == [0, 1, 2, 6]
    assert [e["step"] for e in data["evaluations"]] == wanted
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        checkpoint_path(out, s).name for s in wanted]
    # Every checkpoint reloads into the parameters whose norm the run measured at that step.
    for evaluation in data["evaluations"]:
        model, _tokenizer = load_checkpoint(out, evaluation["step"])
        assert _norm(model) == pytest.approx(evaluation["norm"], rel=1e-9)
    # The step-1 record measures θ before the first update, i.e. the step-0 checkpoint.
    assert data["records"][0]["norm"] == pytest.approx(data["evaluations"][0]["norm"], rel=1e-9)
    assert [r["step"] for r in data["records"]] == list(range(1, 7))
    for record in data["records"]:
        assert None not in (record["loss"], record["grad_projection"], record["update_projection"])
        assert set(record["layers"]) == set(data["records"][0]["layers"])
    for evaluation in data["evaluations"]:
        assert evaluation["perplexity"] == pytest.approx(math.exp(evaluation["loss"]))
        assert 0.0 <= evaluation["accuracy"] <= 1.0
        assert set(evaluation["saturation"]) == {"1000", "inf"}
        assert list(evaluation["saturation"]["inf"]) == ["embeddings", "layer 1"]
    assert (out / "norms.png").stat().st_size > 0 and (out / "saturation.png").stat().st_size > 0
    # The report's training section reads the same folder (no training) and draws its figures.
    section = training_section(ReportContext(out=tmp_path / "report", train_dir=str(out)))
    assert section.data["evaluations"] == data["evaluations"]
    assert f"Best law: **{data['best']}**" in section.markdown
    assert "| 6 |" in section.markdown and "layer 1, c = ∞" in section.markdown
    # ... and says in words what its tables show (the numbers are this run's own)
    assert "the similarity of layer 1 to the exact limit (c = ∞) went from" in section.markdown
    assert "Held-out loss was lowest at " in section.markdown
    # layers as the similarity measure numbers them: blocks.0 is layer 1
    assert "| layer 1 |" in section.markdown and "blocks.0" not in section.markdown
    assert (tmp_path / "report" / "training_saturation.png").stat().st_size > 0


# Large batches: the held-out evaluation over the whole corpus goes batch by batch.
_TINY_ARGS = ["--layers", "1", "--width", "16", "--heads", "2", "--evaluations", "1",
              "--eval-sentences", "2", "--blocks-per-step", "64", "--context", "16", "--quiet"]


def test_a_run_that_fails_after_its_checkpoints_leaves_nothing_behind(tmp_path, capsys, monkeypatch):
    def no_convergence(steps, values, law):
        raise EmpiricalError(f"the {law} law did not converge on these {len(steps)} points")

    monkeypatch.setattr(fits, "fit_law", no_convergence)  # fails once every checkpoint is written
    # An existing folder keeps what it held, and gets no checkpoints/ of a failed run; no staging
    # folder is left beside it (test_a_diverging_run_... covers a folder that did not exist).
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["train", *_TINY_ARGS, "--steps", "3", "--out", str(out), "--overwrite"]) == 2
    assert "did not converge" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["run"]
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_a_diverging_run_leaves_nothing_behind(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *_TINY_ARGS, "--steps", "3", "--optimizer", "sgd", "--lr", "1e30",
                 "--out", str(out)]) == 2
    assert capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_report_section_trains_without_and_with_weight_decay(tmp_path, monkeypatch):
    # Large batches: the held-out evaluation over the whole corpus goes batch by batch.
    short = TrainConfig(**{**TINY, "batch_size": 64}, steps=4, evaluations=2, limit_similarity=False)
    monkeypatch.setattr(training_sections, "SHORT_RUN", short)
    monkeypatch.setattr(training_sections, "SHORT_RUN_DECAY", replace(short, weight_decay=1.0))
    section = training_section(ReportContext(out=tmp_path, progress=False))
    plain, decayed = section.data, section.data["weight_decay_run"]
    assert (plain["config"]["weight_decay"], decayed["config"]["weight_decay"]) == (0.0, 1.0)
    assert decayed["config"]["seed"] == plain["config"]["seed"]
    # Same start, then decay pulls the norm down: AdamW's decoupled decay θ ← θ(1 − ηλ) per step.
    assert decayed["evaluations"][0]["norm"] == plain["evaluations"][0]["norm"]
    assert decayed["evaluations"][-1]["norm"] < plain["evaluations"][-1]["norm"]
    # Both growth laws side by side: each run's own best law, in one table and one figure.
    table = next(line for line in section.markdown.splitlines() if line.startswith("| best law"))
    assert table.count(f"**{plain['best']}**") + table.count(f"**{decayed['best']}**") >= 2
    assert table.index(f"**{plain['best']}**") < table.rindex(f"**{decayed['best']}**")
    assert (tmp_path / "training_norms_weight_decay.png").read_bytes()[:4] == b"\x89PNG"
    assert section.data["source"]["short_runs"][1]["weight_decay"] == 1.0


def test_report_refuses_a_folder_without_a_run_before_measuring(tmp_path, capsys):
    code = main(["report", "--train-dir", str(tmp_path), "--out", str(tmp_path / "r"), "--quiet"])
    assert code == 2 and "holding train.json" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_records_follow_the_sgd_update_and_held_out_metrics_are_recomputable(small_corpus):
    config = TrainConfig(**TINY, steps=5, lr=0.05, optimizer="sgd", evaluations=2, limit_similarity=False)
    result = train(config, corpus=small_corpus)
    for record in result.records:  # plain SGD: δ = −η∇L, so θᵀδ = −η θᵀ∇L ...
        # ... up to the float32 rounding of θ + δ: each coordinate is off by ≤ 2⁻²⁴|θᵢ + δᵢ|, so
        # θᵀδ by ≤ 2⁻²⁴ Σ|θᵢ||θᵢ + δᵢ| ≤ 2⁻²⁴‖θ‖(‖θ‖ + ‖δ‖) (Cauchy–Schwarz).
        rounding = 2.0**-24 * record["norm"] * (record["norm"] + record["update_norm"])
        assert record["update_projection"] == pytest.approx(-0.05 * record["grad_projection"],
                                                            rel=1e-6, abs=rounding)
    # ‖θ_{t+1}‖² = ‖θ_t‖² + 2θᵀδ + ‖δ‖²: consecutive records agree with the recorded update.
    for before, after in pairwise(result.records):
        predicted = before["norm"] ** 2 + 2 * before["update_projection"] + before["update_norm"] ** 2
        assert after["norm"] ** 2 == pytest.approx(predicted, rel=1e-9)
    assert "saturation" not in result.evaluations[0]


@pytest.mark.gpu
def test_a_run_on_cuda_follows_the_run_on_the_cpu(small_corpus, tmp_path):
    config = TrainConfig(**TINY, steps=5, lr=0.05, optimizer="sgd", evaluations=2)
    on_cpu = train(config, corpus=small_corpus)
    on_gpu = train(config, tmp_path, corpus=small_corpus, device="cuda")
    assert [r["norm"] for r in on_gpu.records] == pytest.approx([r["norm"] for r in on_cpu.records], rel=1e-4)
    assert on_gpu.evaluations[-1]["loss"] == pytest.approx(on_cpu.evaluations[-1]["loss"], rel=1e-3)
    saved = sorted(tmp_path.glob("checkpoints/*.safetensors"))
    assert saved and all(t.device.type == "cpu" for t in safetensors.torch.load_file(str(saved[-1])).values())


def test_scale_invariant_model_is_exactly_0_homogeneous_and_never_projects_its_gradient(small_corpus):
    config = TrainConfig(**TINY, arch="scale-invariant", steps=6, lr=0.5, optimizer="sgd",
                         evaluations=2, limit_similarity=False)
    result = train(config, corpus=small_corpus)
    assert result.homogeneity == {"output": "logits", "degree": 0, "grade": "exact"}
    for record in result.records:
        # θᵀ∇L = 0 (Euler for degree 0) up to float32 rounding: |θᵀ∇L| ≤ ε₃₂‖θ‖‖∇L‖.
        assert abs(record["grad_projection"]) <= FLOAT32_EPS * record["norm"] * record["grad_norm"]
    # Hence ‖θ‖ can only grow under SGD: ‖θ_{t+1}‖² = ‖θ_t‖² + η²‖∇L‖².
    norms = [r["norm"] for r in result.records]
    assert all(b >= a * (1 - 1e-9) for a, b in pairwise(norms))
    assert norms[-1] > norms[0]


def test_a_bias_breaks_scale_invariance_and_is_refused(small_corpus):
    model = build_model(TrainConfig(**TINY, arch="scale-invariant"), vocab_size=50, pad_id=0)
    ids = torch.randint(50, (2, 8))
    confirm_scale_invariant(model, ids)
    # A bias after a degree-1 input (the MLP's second layer: relu(hW₁)W₂ has degree 2, its bias 1)
    # breaks exactness. (A bias in a layer reading the degree-0 residual stream would not: hW + b
    # has degree 1 in both terms.)
    block = model.blocks[0]
    block.down.bias = nn.Parameter(0.02 * torch.randn(block.down.out_features))  # the init of the rest
    with pytest.raises(EmpiricalError, match="exactly 0-homogeneous"):
        confirm_scale_invariant(model, ids)
    # The measured projection sees it too: θᵀ∇L is no longer zero.
    logits = model(input_ids=ids).logits
    loss = nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 50), ids[:, 1:].reshape(-1))
    loss.backward()
    projection = sum(float((p.detach() * p.grad).sum()) for p in model.parameters())
    grad_norm = math.sqrt(sum(float(p.grad.square().sum()) for p in model.parameters()))
    assert abs(projection) > 100 * FLOAT32_EPS * _norm(model) * grad_norm  # 100× the bound above


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--steps", "0", "steps must be a positive integer"),
    ("--steps", "2", "steps must be at least 3"),
    ("--width", "-4", "width must be a positive integer"),
    ("--lr", "0", "expected lr to be a number > 0, got 0.0"),
    ("--arch", "lstm", "arch must be one of post, pre, scale-invariant"),
    ("--optimizer", "lion", "optimizer must be one of sgd, adamw, adafactor"),
    ("--schedule", "cosine", "schedule must be one of constant, linear, sqrt"),
])
def test_bad_options_fail_before_training(option, value, message, tmp_path, capsys):
    assert main(["train", option, value, "--quiet", "--out", str(tmp_path / "run")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_folder_that_holds_anything_is_refused_without_overwrite(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "train.json").write_text("{}")
    assert main(["train", *_TINY_ARGS, "--steps", "3", "--out", str(run)]) == 2
    assert "already holds a run (train.json); pass --overwrite" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert main(["train", *_TINY_ARGS, "--steps", "3", "--out", str(other)]) == 2
    assert "already holds 1 entries (notes.txt)" in capsys.readouterr().err
    assert (run / "train.json").read_text() == "{}" and (other / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "run"]  # nothing staged


def test_overwrite_replaces_the_run_and_keeps_other_files(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "step-0000099.safetensors").write_text("an older run's")
    (run / "train.json").write_text("{}")
    (run / "notes.txt").write_text("mine")
    assert main(["train", *_TINY_ARGS, "--steps", "3", "--out", str(run), "--overwrite"]) == 0
    assert (run / "notes.txt").read_text() == "mine"
    assert json.loads((run / "train.json").read_text())["config"]["steps"] == 3
    assert not (run / "checkpoints" / "step-0000099.safetensors").exists()  # the old run's, replaced


def test_overwrite_never_deletes_foreign_files_in_checkpoints(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "best.pt").write_text("mine")
    assert main(["train", *_TINY_ARGS, "--steps", "3", "--out", str(run), "--overwrite"]) == 2
    assert "checkpoints/ holds files a run does not write (best.pt)" in capsys.readouterr().err
    assert (run / "checkpoints" / "best.pt").read_text() == "mine"


def test_an_existing_file_as_out_is_refused(tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("x")
    assert main(["train", "--steps", "1", "--quiet", "--out", str(target)]) == 2
    assert "is an existing file" in capsys.readouterr().err


def test_post_ln_decoder_is_causal():
    model = build_model(TrainConfig(**TINY, arch="post"), vocab_size=40, pad_id=0).eval()
    ids = torch.randint(1, 40, (1, 10))
    changed = ids.clone()
    changed[0, 7:] = (changed[0, 7:] % 39) + 1
    with torch.no_grad():
        a, b = model(input_ids=ids).logits, model(input_ids=changed).logits
    assert torch.allclose(a[0, :7], b[0, :7], atol=1e-6) and not torch.allclose(a[0, 7:], b[0, 7:])


@pytest.mark.parametrize(("schedule", "factor"), [
    ("sqrt", lambda step, steps: 1 / math.sqrt(step)),
    ("linear", lambda step, steps: 1 - (step - 1) / steps),
])
def test_schedules_set_the_sgd_step_size(schedule, factor, small_corpus):
    config = TrainConfig(**TINY, arch="post", steps=4, lr=0.05, optimizer="sgd", schedule=schedule,
                         evaluations=1, limit_similarity=False)
    for record in train(config, corpus=small_corpus).records:  # θᵀδ = −η_t θᵀ∇L
        rounding = 2.0**-24 * record["norm"] * (record["norm"] + record["update_norm"])
        eta = 0.05 * factor(record["step"], 4)
        assert record["update_projection"] == pytest.approx(-eta * record["grad_projection"],
                                                            rel=1e-6, abs=rounding)


def test_adafactor_trains_with_decoupled_weight_decay(small_corpus):
    runs = {wd: train(TrainConfig(**TINY, steps=3, lr=1e-2, optimizer="adafactor", weight_decay=wd,
                                  evaluations=1, limit_similarity=False), corpus=small_corpus)
            for wd in (0.0, 0.1)}
    result = runs[0.1]
    assert all(r["update_norm"] > 0 for r in result.records)
    assert result.evaluations[-1]["step"] == 3 and math.isfinite(result.evaluations[-1]["loss"])
    # Same seed, same first gradient: the first updates differ only by the decay −λη·θ₀ (Adafactor
    # without parameter scaling does not look at θ), so θ₀ᵀδ differs by −λη‖θ₀‖², and the decayed
    # run ends its first step with the smaller norm.
    plain, decayed = runs[0.0].records[0], result.records[0]
    assert decayed["norm"] == plain["norm"]
    rounding = 2 * 2.0**-24 * plain["norm"] * (plain["norm"] + max(plain["update_norm"],
                                                                   decayed["update_norm"]))
    assert decayed["update_projection"] - plain["update_projection"] == pytest.approx(
        -0.1 * 1e-2 * plain["norm"] ** 2, abs=rounding)
    assert result.records[1]["norm"] < runs[0.0].records[1]["norm"]


def test_a_run_interrupted_before_its_first_checkpoint_leaves_the_folder_as_it_was(tmp_path, capsys,
                                                                                   monkeypatch):
    import empirical.training.runs as runs

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C while step 0 is evaluated: no checkpoint finished

    monkeypatch.setattr(runs, "_evaluate", interrupted)
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    assert main(["train", *_TINY_ARGS, "--steps", "3", "--out", str(run), "--overwrite"]) == 130
    assert "interrupted by SIGINT" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["run"]
    assert [p.name for p in run.iterdir()] == ["notes.txt"]
    assert main(["train", *_TINY_ARGS, "--steps", "3", "--out", str(tmp_path / "new")]) == 130
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # the folder it would have made: gone
