"""normsat train: tiny real runs through the CLI and the Python API, checked against independent numbers."""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from dataclasses import asdict, replace
from itertools import pairwise

import pytest
import safetensors.torch
import torch
import transformers
from torch import nn
from transformers.modeling_outputs import CausalLMOutput

import empirical.cli.sections.training as training_sections
import empirical.training.fits as fits
import empirical.training.runs as runs_module
from empirical.cli import main
from empirical.cli.sections.context import ReportContext
from empirical.cli.sections.training import training_section
from empirical.errors import EmpiricalError
from empirical.measure.similarity import representation_similarity
from empirical.models.corpus import load_corpus
from empirical.training.runs import (
    CompactTokenizer,
    TrainConfig,
    TrainResult,
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
                 "--context", "16", "--quiet", "--out", str(out), "--json", str(tmp_path / "copy.json")])
    assert code == 0 and "best law" in capsys.readouterr().out
    data = json.loads((out / "train.json").read_text(), parse_constant=_reject_constant)
    assert data == read_run(out) == json.loads((tmp_path / "copy.json").read_text())
    assert data["config"]["steps"] == 6 and data["best"] in {f["law"] for f in data["fits"]}
    # The growth document has the shape of normsat norms JSON: top-level fits, best, skipped.
    assert all({"law", "params", "r2", "aic"} <= set(fit) for fit in data["fits"])
    assert {"best_by_aic", "skipped", "layer_growth"} <= set(data)
    assert [row["layer"] for row in data["layer_growth"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.json", "run"]  # no staging folder
    assert data["provenance"]["versions"]["torch"] == torch.__version__
    wanted = evaluation_steps(6, 3)
    assert wanted == [0, 1, 2, 6]
    assert [e["step"] for e in data["evaluations"]] == wanted
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        checkpoint_path(out, s).name for s in wanted]
    # Every checkpoint reloads into the parameters whose norm the run measured at that step, and
    # whose similarity to the limit, measured again on the held-out sentences (every tenth of the
    # corpus, the first --eval-sentences of them), is the run's at each scale.
    corpus = load_corpus(n=None)
    assert data["corpus"]["sha256"] == corpus.sha256
    sentences = list(corpus)[::10][:4]
    for evaluation in data["evaluations"]:
        model, tokenizer = load_checkpoint(out, evaluation["step"])
        assert _norm(model) == pytest.approx(evaluation["norm"], rel=1e-9)
        for key, scale in (("1000", 1000.0), ("inf", math.inf)):
            with pytest.warns(UserWarning, match="truncated to 16"):  # the run's context, as in it
                measured = representation_similarity(model, tokenizer, sentences, scale=scale)
            assert evaluation["saturation"][key] == pytest.approx(
                dict(zip(measured.layers, measured.per_layer)), rel=1e-9)
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
    assert re.search(r"the similarity of layer 1 to the exact limit \(c = ∞\) (rose from|fell from|"
                     r"stayed at|went up and down) ", section.markdown)
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
    # The last line says why and what to try; reading the loss that requires grad adds no warning.
    err = capsys.readouterr().err
    assert re.fullmatch(r"normsat train: error: the training loss is (nan|-?inf) at step [0-2] \(lr "
                        r"1e\+30, sgd\); expected a finite loss, try a smaller lr", err.splitlines()[-1])
    assert "requires_grad" not in err
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


def test_train_refuses_a_file_as_its_run_folder_before_training(tmp_path, monkeypatch):
    monkeypatch.setattr(runs_module, "_prepare_data", None)  # never reached
    target = tmp_path / "taken"
    target.write_text("x")
    with pytest.raises(EmpiricalError) as caught:
        train(TrainConfig(**TINY, steps=3), target)
    assert str(caught.value) == f"expected a folder for the run folder, but {target} is an existing file"
    assert target.read_text() == "x"


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


# -- the definitions a run is built from, checked against direct computations ----------------------


@pytest.mark.parametrize(("steps", "count"), [(1000, 4), (3, 10), (50, 1), (50, 2), (7, 2), (10000, 5),
                                              (20, 3)])
def test_evaluation_steps_are_step_0_then_log_spaced_steps_ending_at_the_last(steps, count):
    # count points t_k = steps^(k/(count−1)) from 1 to steps, rounded and deduplicated; one point is
    # the last step. The cases avoid a power ending in .5, where rounding conventions differ.
    exact = [steps ** (k / (count - 1)) for k in range(count)] if count > 1 else [steps]
    assert all(abs(t - math.floor(t) - 0.5) > 1e-6 for t in exact)
    expected = [0, *sorted({math.floor(t + 0.5) for t in exact})]
    got = evaluation_steps(steps, count)
    assert got == expected and all(type(s) is int for s in got)
    assert got[0] == 0 and got[-1] == steps and (count == 1 or got[1] == 1)


@pytest.mark.parametrize(("schedule", "definition"), [
    ("constant", lambda t, steps: 1.0),
    ("linear", lambda t, steps: (steps - t) / steps),  # 1 at the start, 0 after the last step
    ("sqrt", lambda t, steps: (t + 1) ** -0.5),        # lr/√(step), steps counted from 1
])
def test_the_learning_rate_factor_follows_its_schedule(schedule, definition):
    config = TrainConfig(**TINY, steps=8, schedule=schedule)
    factor = runs_module._lr_factor(config)
    for t in range(9):  # LambdaLR's t: the number of completed steps
        assert factor(t) == pytest.approx(definition(t, 8), rel=1e-15)


def test_checkpoint_paths_are_zero_padded_step_files_in_checkpoints(tmp_path):
    assert checkpoint_path(tmp_path, 42) == tmp_path / "checkpoints" / "step-0000042.safetensors"
    assert checkpoint_path(str(tmp_path), 0) == tmp_path / "checkpoints" / "step-0000000.safetensors"


_ONES = {"layers": 1, "width": 1, "heads": 1, "steps": 3, "batch_size": 1, "evaluations": 1,
         "eval_sentences": 1, "context": 2}


@pytest.mark.parametrize("fields", [
    _ONES,                                          # every count at its smallest
    {**_ONES, "lr": 0.5, "weight_decay": 0.0},
    {**_ONES, "lr": 3.0, "weight_decay": 0.5, "limit_similarity": False, "seed": 0},
    {"width": 12, "heads": 4, "arch": "t5", "optimizer": "adafactor", "schedule": "sqrt"},
])
def test_configurations_at_the_edges_are_accepted(fields):
    config = TrainConfig(**fields)
    assert {name: getattr(config, name) for name in fields} == fields


@pytest.mark.parametrize(("fields", "message"), [
    ({"arch": "lstm"}, "arch must be one of post, pre, scale-invariant, t5, got 'lstm'"),
    ({"optimizer": "lion"}, "optimizer must be one of sgd, adamw, adafactor, got 'lion'"),
    ({"schedule": "cosine"}, "schedule must be one of constant, linear, sqrt, got 'cosine'"),
    ({"layers": 0}, "layers must be a positive integer, got 0 (int)"),
    ({"width": True}, "width must be a positive integer, got True (bool)"),
    ({"heads": 2.0}, "heads must be a positive integer, got 2.0 (float)"),
    ({"steps": -5}, "steps must be a positive integer, got -5 (int)"),
    ({"batch_size": 0}, "batch_size must be a positive integer, got 0 (int)"),
    ({"evaluations": 0}, "evaluations must be a positive integer, got 0 (int)"),
    ({"eval_sentences": "4"}, "eval_sentences must be a positive integer, got '4' (str)"),
    ({"seed": -1}, "expected seed to be an integer ≥ 0"),
    ({"lr": 0.0}, "expected lr to be a number > 0, got 0.0"),
    ({"lr": -1e-3}, "expected lr to be a number > 0, got -0.001"),
    ({"weight_decay": -0.5}, "expected weight_decay to be a number ≥ 0, got -0.5"),
    ({"limit_similarity": 1}, "limit_similarity must be True or False, got 1 (int)"),
    ({"steps": 2}, "steps must be at least 3 (the fewest points a growth law is fitted to), got 2"),
    ({"context": 1}, "context must be at least 2 tokens (one prediction), got 1"),
    ({"context": 2.5}, "context must be at least 2 tokens (one prediction), got 2.5"),
    ({"context": True}, "context must be at least 2 tokens (one prediction), got True"),
    ({"width": 10, "heads": 4}, "width must be divisible by heads, got width 10 and 4 heads"),
])
def test_a_bad_configuration_is_refused_naming_the_field_what_it_got_and_what_it_needs(fields, message):
    with pytest.raises(EmpiricalError) as caught:
        TrainConfig(**fields)
    assert message in str(caught.value)


def test_validate_refuses_a_field_changed_after_construction():
    config = TrainConfig(**TINY)
    object.__setattr__(config, "layers", 0)  # frozen, but a caller can still force it
    with pytest.raises(EmpiricalError, match="layers must be a positive integer, got 0"):
        config.validate()


# -- the tokenizer ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_base():
    return runs_module._minilm_tokenizer()


def test_the_compact_tokenizer_renumbers_pieces_by_count_and_maps_back(small_corpus, minilm_base):
    sentences = list(small_corpus)[:40]
    tokenizer = CompactTokenizer.fit(sentences, minilm_base)
    assert tokenizer.base is minilm_base
    base_rows = minilm_base(sentences)["input_ids"]
    counts = Counter(i for row in base_rows for i in row)
    specials = [minilm_base.pad_token_id, minilm_base.unk_token_id, minilm_base.cls_token_id,
                minilm_base.sep_token_id]
    pieces = list(tokenizer.pieces)
    # The special tokens first (new ids 0-3), then every other piece used, by count, ties by id.
    assert pieces[:4] == specials and len(tokenizer) == len(pieces)
    assert sorted(pieces[4:]) == sorted(set(counts) - set(specials))
    keys = [(-counts[p], p) for p in pieces[4:]]
    assert keys == sorted(keys) and counts[pieces[4]] > counts[pieces[-1]]
    assert (tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.cls_token_id,
            tokenizer.sep_token_id) == (0, 1, 2, 3)
    # Same segmentation: the new ids map back onto the MiniLM ids, row by row.
    rows = tokenizer(sentences)["input_ids"]
    assert [[pieces[i] for i in row] for row in rows] == base_rows
    # The base tokenizer's options pass through (here: no [CLS] … [SEP]).
    bare = tokenizer(sentences[:3], add_special_tokens=False)["input_ids"]
    assert [[pieces[i] for i in row] for row in bare] == minilm_base(
        sentences[:3], add_special_tokens=False)["input_ids"]


def test_pieces_the_training_text_never_used_become_unk(minilm_base):
    kept = CompactTokenizer.fit(["the cat sat on the mat."], minilm_base)
    again = CompactTokenizer(kept.pieces, minilm_base)  # as load_checkpoint rebuilds it
    assert again.base is minilm_base and again.pieces == kept.pieces
    (row,) = again(["the zebra sat."])["input_ids"]
    base_row = minilm_base(["the zebra sat."])["input_ids"][0]
    expected = [kept.pieces.index(i) if i in kept.pieces else again.unk_token_id for i in base_row]
    assert row == expected and again.unk_token_id in row and expected.count(again.unk_token_id) == 1


# -- the models ------------------------------------------------------------------------------------


def _layer_norm(x: torch.Tensor) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / (x - mean).square().mean(-1, keepdim=True).sqrt()


def _reference_forward(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor | None):
    """The scale-invariant LM from its definition, in float64, one attention score at a time."""
    w = {name: p.detach().double() for name, p in model.named_parameters()}
    batch, length = ids.shape
    heads = model.config.num_attention_heads
    width = model.config.hidden_size
    size = width // heads
    h = _layer_norm(w["token_embedding.weight"][ids] + w["position_embedding.weight"][:length])
    states = [h]
    for layer in range(model.config.num_hidden_layers):
        p = f"blocks.{layer}."
        q, k, v = (h @ w[p + name + ".weight"].T for name in ("query", "key", "value"))
        mixed = torch.zeros_like(h)
        for b in range(batch):
            for head in range(heads):
                cut = slice(head * size, (head + 1) * size)
                for i in range(length):
                    seen = [j for j in range(i + 1) if mask is None or mask[b, j]]
                    scores = torch.stack([_layer_norm(q[b, i, cut]) @ _layer_norm(k[b, j, cut])
                                          for j in seen]) / math.sqrt(size)
                    weights = torch.softmax(scores, 0)
                    mixed[b, i, cut] = sum(a * v[b, j, cut] for a, j in zip(weights, seen, strict=True))
        h = h + _layer_norm(mixed @ w[p + "output.weight"].T)
        h = h + _layer_norm(torch.relu(h @ w[p + "up.weight"].T) @ w[p + "down.weight"].T)
        states.append(h)
    return _layer_norm(h @ w["token_embedding.weight"].T), states


@pytest.fixture(scope="module")
def scale_invariant_model():
    return build_model(TrainConfig(arch="scale-invariant", layers=2, width=8, heads=2, context=6),
                       vocab_size=11, pad_id=0)


@pytest.mark.parametrize("masked", [False, True])
def test_the_scale_invariant_lm_computes_its_definition(scale_invariant_model, masked):
    model = scale_invariant_model
    ids = torch.tensor([[1, 5, 2, 9, 3, 7], [4, 4, 10, 0, 6, 8]])
    mask = torch.tensor([[1, 0, 1, 1, 1, 1], [1, 1, 1, 0, 0, 1]]) if masked else None
    logits, states = _reference_forward(model, ids, mask)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        plain = model(ids, mask)
    assert out.logits.shape == (2, 6, 11)
    assert torch.allclose(out.logits.double(), logits, atol=1e-5)
    assert len(out.hidden_states) == 3
    for got, expected in zip(out.hidden_states, states, strict=True):
        assert torch.allclose(got.double(), expected, atol=1e-5)
    assert plain.hidden_states is None and torch.equal(plain.logits, out.logits)


def test_the_scale_invariant_lm_has_no_biases_and_gpt2_s_initial_scale():
    model = build_model(TrainConfig(arch="scale-invariant", layers=2, width=8, heads=2, context=6),
                        vocab_size=11, pad_id=0)
    width, vocab, context, layers = 8, 11, 6, 2
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    expected = {"token_embedding.weight": (vocab, width), "position_embedding.weight": (context, width)}
    for layer in range(layers):
        for name, shape in (("query", (width, width)), ("key", (width, width)),
                            ("value", (width, width)), ("output", (width, width)),
                            ("up", (4 * width, width)), ("down", (width, 4 * width))):
            expected[f"blocks.{layer}.{name}.weight"] = shape
    assert shapes == expected
    values = torch.cat([p.detach().flatten() for p in model.parameters()])
    # N(0, 0.02²) over 1,224 draws: the sample standard deviation is within 10% of 0.02.
    assert float(values.std()) == pytest.approx(0.02, rel=0.1)


@pytest.mark.parametrize("c", [7.0, 1000.0])
def test_the_scale_invariant_lm_answers_the_same_when_every_weight_is_scaled(scale_invariant_model, c):
    ids = torch.tensor([[1, 5, 2, 9, 3, 7]])
    scaled = {name: c * p.detach() for name, p in scale_invariant_model.named_parameters()}
    with torch.no_grad():
        plain = scale_invariant_model(input_ids=ids, output_hidden_states=True)
        grown = torch.func.functional_call(scale_invariant_model, scaled, (ids,),
                                           {"output_hidden_states": True})
    assert torch.allclose(plain.logits, grown.logits, atol=1e-4)
    for a, b in zip(plain.hidden_states, grown.hidden_states, strict=True):
        assert torch.allclose(a, b, atol=1e-4)


def _homogeneous_logits(degree_two: bool):
    class Tiny(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(11, 4)
            self.out = nn.Linear(4, 11, bias=False)

        def forward(self, input_ids):
            logits = self.out(self.embedding(input_ids))
            return CausalLMOutput(logits=logits) if degree_two else logits

    return Tiny()


@pytest.mark.parametrize(("degree_two", "found"), [
    (True, "found degree 2 (exact)"),
    (False, "found no 'logits' output"),
])
def test_confirm_scale_invariant_names_what_it_found_instead(degree_two, found):
    with pytest.raises(EmpiricalError) as caught:
        confirm_scale_invariant(_homogeneous_logits(degree_two), torch.tensor([[1, 2, 3]]))
    assert "expected the scale-invariant model's logits to be exactly 0-homogeneous" in str(caught.value)
    assert found in str(caught.value)


def test_confirm_scale_invariant_refuses_a_model_it_cannot_trace():
    class Branchy(nn.Module):  # a branch on a value: torch.export cannot trace it
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(11, 4)

        def forward(self, input_ids):
            h = self.embedding(input_ids)
            return CausalLMOutput(logits=h if float(h.sum()) > 0 else -h)

    with pytest.raises(EmpiricalError, match=r"^cannot confirm scale invariance: torch.export could not "
                                             r"trace Branchy"):
        confirm_scale_invariant(Branchy(), torch.tensor([[1, 2, 3]]))


def test_confirm_scale_invariant_returns_the_exact_degree_0_report(scale_invariant_model):
    report = confirm_scale_invariant(scale_invariant_model, torch.tensor([[1, 5, 2]]))
    assert report.outputs["logits"].value == 0 and report.outputs["logits"].grade.value == "exact"


@pytest.mark.parametrize("arch", ["pre", "post", "t5"])
def test_build_model_follows_the_configuration_without_dropout(arch):
    config = TrainConfig(arch=arch, layers=2, width=12, heads=3, context=10, seed=5)
    before = torch.random.get_rng_state()
    model = build_model(config, vocab_size=23, pad_id=4)
    assert torch.equal(torch.random.get_rng_state(), before)  # the caller's random state is kept
    hf = model.config
    if arch == "pre":
        assert (hf.vocab_size, hf.n_embd, hf.n_layer, hf.n_head, hf.n_positions) == (23, 12, 2, 3, 10)
        assert (hf.resid_pdrop, hf.embd_pdrop, hf.attn_pdrop) == (0.0, 0.0, 0.0)
        assert (hf.bos_token_id, hf.eos_token_id, hf.pad_token_id) == (4, 4, 4)
    elif arch == "post":
        assert (hf.vocab_size, hf.hidden_size, hf.num_hidden_layers, hf.num_attention_heads,
                hf.max_position_embeddings, hf.pad_token_id) == (23, 12, 2, 3, 10, 4)
        assert (hf.intermediate_size, hf.type_vocab_size, hf.is_decoder) == (48, 1, True)
        assert (hf.hidden_dropout_prob, hf.attention_probs_dropout_prob) == (0.0, 0.0)
    else:
        assert (hf.vocab_size, hf.d_model, hf.num_layers, hf.num_heads, hf.pad_token_id) == (23, 12, 2, 3, 4)
    assert hf._attn_implementation == "eager"
    # Seeded: the same configuration gives the same weights, another seed others.
    again = build_model(config, vocab_size=23, pad_id=4)
    other = build_model(replace(config, seed=6), vocab_size=23, pad_id=4)
    first = dict(model.named_parameters())
    assert all(torch.equal(p, first[n]) for n, p in again.named_parameters())
    assert not all(torch.equal(p, first[n]) for n, p in other.named_parameters())
    # No dropout: in training mode two passes give the same logits.
    ids = torch.tensor([[1, 7, 3, 22, 5, 8, 2, 9, 11, 6]])
    model.train()
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, model(input_ids=ids).logits)


@pytest.mark.parametrize("optimizer", ["sgd", "adamw", "adafactor"])
def test_the_optimizer_gets_every_parameter_the_lr_and_the_weight_decay(optimizer):
    config = TrainConfig(**TINY, optimizer=optimizer, lr=0.125, weight_decay=0.25)
    model = build_model(config, vocab_size=20, pad_id=0)
    made = runs_module._make_optimizer(config, model)
    kind = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW,
            "adafactor": transformers.optimization.Adafactor}[optimizer]
    assert type(made) is kind
    (group,) = made.param_groups
    assert [id(p) for p in group["params"]] == [id(p) for p in model.parameters()]
    assert (group["lr"], group["weight_decay"]) == (0.125, 0.25)
    if optimizer == "adafactor":  # lr as given: no relative step, no parameter scaling
        assert (group["scale_parameter"], group["relative_step"], group["warmup_init"]) == (
            False, False, False)


# -- one short run, written to a folder, read back -------------------------------------------------

_RUN = TrainConfig(**TINY, steps=4, lr=0.05, optimizer="sgd", evaluations=1, limit_similarity=False)


@pytest.fixture(scope="module")
def written_run(tmp_path_factory, small_corpus):
    """A run of 4 steps evaluated at steps 0 and 4 (without the slow saturation measurement, which
    the CLI test covers), its folder as train() leaves it: checkpoints and an unfinished train.json
    (the finished one is the CLI's to write)."""
    out = tmp_path_factory.mktemp("written") / "run"
    return out, train(_RUN, out, corpus=small_corpus)


def _held_out_blocks(corpus, vocabulary, base, context):
    """Every tenth sentence from the first, packed into rows of ``context`` renumbered ids."""
    held_out = list(corpus)[::10]
    new_id = {piece: i for i, piece in enumerate(vocabulary)}
    unk = new_id[base.unk_token_id]
    stream = [new_id.get(i, unk) for row in base(held_out)["input_ids"] for i in row]
    rows = len(stream) // context
    return torch.tensor(stream[: rows * context]).view(rows, context)


def test_each_evaluation_recomputes_from_its_checkpoint(written_run, small_corpus, minilm_base):
    out, result = written_run
    assert [e["step"] for e in result.evaluations] == [0, 4]
    blocks = _held_out_blocks(small_corpus, result.vocabulary, minilm_base, _RUN.context)
    assert len(blocks) > _RUN.batch_size  # several evaluation batches, the last one shorter
    assert len(blocks) % _RUN.batch_size
    for evaluation in result.evaluations:
        model, _tokenizer = load_checkpoint(out, evaluation["step"])
        with torch.no_grad():
            logits = model(input_ids=blocks).logits[:, :-1].double()
        targets = blocks[:, 1:]
        losses = -logits.log_softmax(-1).gather(-1, targets[..., None])[..., 0]
        # The mean over every held-out prediction (not a mean of batch means).
        assert evaluation["loss"] == pytest.approx(float(losses.mean()), rel=1e-5)
        assert evaluation["perplexity"] == pytest.approx(math.exp(float(losses.mean())), rel=1e-5)
        assert evaluation["accuracy"] == float((logits.argmax(-1) == targets).double().mean())
        assert evaluation["norm"] == pytest.approx(_norm(model), rel=1e-9)
        assert "saturation" not in evaluation


def test_the_first_checkpoint_is_the_seeded_initialization(written_run, small_corpus):
    out, result = written_run
    model, tokenizer = load_checkpoint(out, 0)
    fresh = build_model(_RUN, len(result.vocabulary), tokenizer.pad_token_id)
    assert all(torch.equal(p, dict(fresh.named_parameters())[n]) for n, p in model.named_parameters())


def test_a_post_ln_run_starts_from_the_seeded_model_with_a_zero_pad_embedding(small_corpus, tmp_path):
    """BERT's embedding keeps the [PAD] row at zero when it is told the pad id: the run must tell it."""
    config = TrainConfig(**TINY, arch="post", steps=3, evaluations=1, limit_similarity=False)
    train(config, tmp_path, corpus=small_corpus)
    model, tokenizer = load_checkpoint(tmp_path, 0)
    fresh = dict(build_model(config, len(tokenizer), tokenizer.pad_token_id).named_parameters())
    assert all(torch.equal(p, fresh[n]) for n, p in model.named_parameters())
    assert not model.get_input_embeddings().weight[tokenizer.pad_token_id].any()


def test_load_checkpoint_gives_back_the_saved_weights_exactly(written_run):
    out, result = written_run
    for step in (0, 4):
        model, tokenizer = load_checkpoint(out, step)
        assert not model.training
        assert list(tokenizer.pieces) == result.vocabulary and len(tokenizer) == len(result.vocabulary)
        saved = safetensors.torch.load_file(str(checkpoint_path(out, step)))
        state = model.state_dict()
        assert saved and all(torch.equal(state[name], tensor) for name, tensor in saved.items())
    with pytest.raises(EmpiricalError) as caught:
        load_checkpoint(out, 3)
    assert str(caught.value) == (f"no checkpoint of step 3 in {out}; saved: step-0000000.safetensors, "
                                 "step-0000004.safetensors")


def test_a_run_s_document_and_table(written_run, small_corpus):
    _out, result = written_run
    document = result.to_dict()
    assert set(document) == {"schema", "config", "stopped", "model", "corpus", "homogeneity",
                             "evaluations", "checkpoints", "records", "vocabulary", "provenance",
                             "checkpoint_sha256", *result.fits}
    assert {"fits", "best", "best_by_aic", "skipped", "layer_growth"} <= set(result.fits)
    assert document["schema"] == "normsat.train/2" and document["config"] == asdict(_RUN)
    assert document["stopped"] is None and document["homogeneity"] is None
    assert document["corpus"] == small_corpus.to_dict() and document["model"] == result.model
    assert document["vocabulary"] == result.vocabulary and document["provenance"] == result.provenance
    for key in ("evaluations", "checkpoints", "records", "best"):
        assert document[key] == getattr(result, key, result.fits.get(key))
    assert [r["step"] for r in document["records"]] == [1, 2, 3, 4]
    assert [r["step"] for r in document["checkpoints"]] == [0, 4]
    lines = result.table().split("\n")
    assert lines[0].split() == ["step", "loss", "accuracy", "norm"] and len(lines) == 3
    for line, evaluation in zip(lines[1:], result.evaluations, strict=True):
        assert line.split() == [str(evaluation["step"]), f"{evaluation['loss']:.4f}",
                                f"{evaluation['accuracy']:.4f}", f"{evaluation['norm']:.4f}"]


def test_read_run_refuses_an_unfinished_run_unless_asked(written_run, tmp_path):
    out, result = written_run
    document = read_run(out, unfinished=True)
    assert document["stopped"] == {"last_checkpoint": 4, "at_step": None, "signal": None}
    assert document["evaluations"] == json.loads(json.dumps(result.evaluations))
    with pytest.raises(EmpiricalError) as caught:
        read_run(out)
    assert str(caught.value) == (f"expected a finished run in {out}, got an unfinished one (under way, "
                                 f"or killed; checkpoints up to step 4); finish it with normsat train "
                                 f"--out {out} --resume")
    interrupted = tmp_path / "interrupted"
    interrupted.mkdir()
    document["stopped"] = {"last_checkpoint": 1, "at_step": 3, "signal": "SIGTERM"}
    (interrupted / "train.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(EmpiricalError, match=r"unfinished one \(interrupted by SIGTERM at step 3; "
                                             r"checkpoints up to step 1\)"):
        read_run(interrupted)
    # The finished document (as normsat train writes it) reads back whole.
    finished = tmp_path / "finished"
    finished.mkdir()
    result.to_json(finished / "train.json")
    assert read_run(finished) == json.loads((finished / "train.json").read_text(encoding="utf-8"))
    assert read_run(finished)["stopped"] is None


def test_read_run_reads_utf8_whatever_the_locale(written_run, tmp_path, ascii_locale):
    """A train.json rewritten by a tool that leaves non-ASCII characters unescaped (as jq does)."""
    out, _result = written_run
    document = read_run(out, unfinished=True)
    document["corpus"]["source"] = "naïve docstrings – edited"
    (tmp_path / "train.json").write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    assert read_run(tmp_path, unfinished=True) == document


@pytest.mark.parametrize(("text", "message"), [
    (None, "expected a normsat train folder holding train.json, got {run}"),
    ("{not json", "the run file {run}/train.json: not JSON ("),
    ('{"schema": "normsat.norms/1"}', "expected a normsat.train/2 document in {run}/train.json, got "
                                      "schema 'normsat.norms/1'"),
    ("{}", "expected a normsat.train/2 document in {run}/train.json, got schema None"),
    ("[1, 2]", "expected a normsat.train/2 document in {run}/train.json, got schema 'list'"),
])
def test_read_run_refuses_a_folder_without_a_run_document(tmp_path, text, message):
    if text is not None:
        (tmp_path / "train.json").write_text(text, encoding="utf-8")
    with pytest.raises(EmpiricalError) as caught:
        read_run(tmp_path, unfinished=True)
    assert message.format(run=tmp_path) in str(caught.value)


def test_the_progress_bar_counts_steps_and_shows_the_last_loss_and_norm(small_corpus, capsys):
    config = TrainConfig(**TINY, steps=4, lr=0.05, optimizer="sgd", evaluations=1, limit_similarity=False)
    quiet = train(config, corpus=small_corpus)
    assert capsys.readouterr().err == ""  # no bar unless asked for
    shown = train(config, corpus=small_corpus, progress=True)
    bar = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    last = shown.records[-1]
    assert bar.startswith("train pre: 100%") and "| 4/4 [" in bar
    assert re.search(rf"(step/s|s/step), loss={last['loss']:.3f}, norm={last['norm']:.2f}\]$", bar)
    assert [r["norm"] for r in shown.records] == [r["norm"] for r in quiet.records]  # same run


# -- the training text -----------------------------------------------------------------------------


def test_every_tenth_sentence_is_held_out(small_corpus):
    sentences = list(small_corpus)[:25]
    corpus = load_corpus(n=25)
    assert list(corpus) == sentences
    train_text, held_out = runs_module._split(corpus)
    assert held_out == [sentences[0], sentences[10], sentences[20]]
    assert train_text == [s for i, s in enumerate(sentences) if i not in (0, 10, 20)]


def test_a_corpus_of_one_sentence_is_refused():
    with pytest.raises(EmpiricalError) as caught:
        train(TrainConfig(**TINY, steps=3), corpus=load_corpus(n=1))
    assert str(caught.value) == "expected a corpus of at least 2 sentences to hold one out, got 1"


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def transformers_log():
    """The messages Hugging Face's loggers give during a test (they do not propagate to the root)."""
    collect, logger = _Collect(), logging.getLogger("transformers")
    logger.addHandler(collect)
    yield collect.messages
    logger.removeHandler(collect)


def test_blocks_pack_the_sentences_into_rows_without_a_length_warning(transformers_log):
    # A sentence far beyond MiniLM's 512 positions: packing cuts it into rows, so the base
    # tokenizer's warning about sequences too long for the model would be wrong here.
    base = runs_module._minilm_tokenizer()  # a fresh one: that warning is given once per tokenizer
    long = " ".join(["the cat sat on the mat."] * 119)
    short = "the dog sat."
    tokenizer = CompactTokenizer.fit([long, short], base)
    blocks = runs_module._blocks(tokenizer, [long, short], 16)
    assert not [m for m in transformers_log if "sequence length is longer" in m]
    stream = [i for row in tokenizer([long, short], verbose=False)["input_ids"] for i in row]
    assert len(stream) > 512 and len(stream) % 16
    base([long])  # the warning this test looks for, as the base tokenizer gives it
    assert [m for m in transformers_log if "sequence length is longer" in m]
    rows = len(stream) // 16
    assert blocks.shape == (rows, 16) and blocks.flatten().tolist() == stream[: rows * 16]
    # A text of between one and two rows makes exactly one; too short a text is refused.
    (one,) = tokenizer([short], verbose=False)["input_ids"]
    assert runs_module._blocks(tokenizer, [short], len(one) - 1).tolist() == [one[:-1]]
    assert runs_module._blocks(tokenizer, [short, short], len(one) + 1).tolist() == [
        (one + one)[: len(one) + 1]]
    with pytest.raises(EmpiricalError) as caught:
        runs_module._blocks(tokenizer, [short], len(one) + 1)
    assert str(caught.value) == (f"expected at least {len(one) + 1} tokens of text to make one block, "
                                 f"got {len(one)}; use a smaller context")


def test_a_result_s_document_spreads_its_fits_and_its_table_rounds_each_evaluation():
    config = TrainConfig(**TINY, steps=10)
    evaluations = [{"step": 0, "loss": 6.906754, "accuracy": 0.0, "norm": 7.123456},
                   {"step": 10, "loss": 3.25, "accuracy": 0.41666, "norm": 123.45678}]
    fits = {"fits": [{"law": "sqrt"}], "best": "sqrt", "skipped": []}
    stopped = {"last_checkpoint": 10, "at_step": 12, "signal": "SIGINT"}
    result = TrainResult(config=config, records=[{"step": 1}], checkpoints=[{"step": 0}],
                         evaluations=evaluations, fits=fits, model={"class": "GPT2LMHeadModel"},
                         corpus={"sha256": "ab12"}, vocabulary=[0, 100, 101, 102],
                         homogeneity={"degree": 0}, stopped=stopped)
    assert result.to_dict() == {
        "schema": "normsat.train/2", "config": asdict(config), "stopped": stopped,
        "model": {"class": "GPT2LMHeadModel"}, "corpus": {"sha256": "ab12"}, "homogeneity": {"degree": 0},
        "fits": [{"law": "sqrt"}], "best": "sqrt", "skipped": [], "evaluations": evaluations,
        "checkpoints": [{"step": 0}], "records": [{"step": 1}], "vocabulary": [0, 100, 101, 102],
        "checkpoint_sha256": {},
        "provenance": {"versions": result.provenance["versions"]}}
    assert result.provenance["versions"]["torch"] == torch.__version__
    # Right-aligned columns of 8, 8, 8 and 10 characters, two spaces apart, 4 decimals.
    assert result.table() == ("    step      loss  accuracy        norm\n"
                              "       0    6.9068    0.0000      7.1235\n"
                              "      10    3.2500    0.4167    123.4568")


@pytest.mark.parametrize(("stopped", "how"), [
    ({"last_checkpoint": 4, "at_step": None, "signal": None},
     "under way, or killed; checkpoints up to step 4"),
    ({"last_checkpoint": 1, "at_step": 3, "signal": "SIGTERM"},
     "interrupted by SIGTERM at step 3; checkpoints up to step 1"),
])
def test_read_run_says_how_a_run_is_unfinished(tmp_path, stopped, how):
    document = {**TrainResult(config=TrainConfig(**TINY), records=[], checkpoints=[], evaluations=[],
                              fits={}, model={"note": "‖θ‖ grows"}, corpus={}, vocabulary=[0]).to_dict(),
                "stopped": stopped}
    (tmp_path / "train.json").write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(EmpiricalError) as caught:
        read_run(tmp_path)
    assert str(caught.value) == (f"expected a finished run in {tmp_path}, got an unfinished one ({how}); "
                                 f"finish it with normsat train --out {tmp_path} --resume")
    assert read_run(tmp_path, unfinished=True) == document
    finished = {**document, "stopped": None}
    (tmp_path / "train.json").write_text(json.dumps(finished, ensure_ascii=False), encoding="utf-8")
    assert read_run(str(tmp_path)) == finished
