"""normsat train --arch t5: T5's decoder as a causal LM, its degree and a tiny real run."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from empirical.cli import main
from empirical.training.runs import TrainConfig, build_model, load_checkpoint, read_run
from empirical.training.t5 import T5DecoderLM
from homogeneity import Grade, analyze

TINY = {"arch": "t5", "layers": 1, "width": 16, "heads": 2, "batch_size": 4, "context": 16,
        "eval_sentences": 4}


def test_t5_has_rms_norms_no_biases_relu_and_relative_positions():
    model = build_model(TrainConfig(**TINY), vocab_size=50, pad_id=0)
    assert isinstance(model, T5DecoderLM)
    modules = list(model.modules())
    names = {type(m).__name__ for m in modules}
    assert "T5LayerNorm" in names and "ReLU" in names and "LayerNorm" not in names
    assert all(m.bias is None for m in modules if isinstance(m, nn.Linear))
    # The only parameter with "bias" in its name is the relative position bias (an embedding table).
    assert [n for n, _ in model.named_parameters() if "bias" in n] == [
        "transformer.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
    # RMSNorm: the weight times x/√(mean x² + eps), no mean subtracted.
    norm = model.transformer.final_layer_norm
    x = torch.randn(3, 16) + 5.0
    expected = norm.weight * x / torch.sqrt(x.square().mean(-1, keepdim=True) + norm.variance_epsilon)
    assert torch.allclose(norm(x), expected)


def test_t5_logits_are_asymptotically_2_homogeneous():
    model = build_model(TrainConfig(**TINY), vocab_size=50, pad_id=0).double()
    ids = torch.randint(50, (1, 6), generator=torch.Generator().manual_seed(0))
    # By hand: the final RMSNorm makes the residual stream's degree 0, up to its eps (hence
    # asymptotic), its weight adds 1 and the tied embedding matrix of the head 1 more.
    logits = analyze(model, ids).outputs["logits"]
    assert (logits.value, logits.grade) == (2, Grade.ASYMPTOTIC)

    # Independently: ‖f(cθ)‖ grows like c² once the degree-1 embeddings and the eps are negligible
    # beside the degree-3 sublayer outputs.
    def logit_norm(c: float) -> float:
        scaled = {n: c * p.detach() for n, p in model.named_parameters()}
        return float(torch.func.functional_call(model, scaled, (ids,)).logits.norm())

    def growth_error(c: float) -> float:
        return abs(logit_norm(10 * c) / logit_norm(c) - 100.0)

    assert growth_error(1e3) < 1e-3
    assert growth_error(1.0) > 100 * growth_error(1e3)  # asymptotic, not exact: the error shrinks


def test_a_tiny_t5_run_trains_measures_saturation_and_reloads(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--arch", "t5", "--layers", "1", "--width", "16", "--heads", "2",
                 "--steps", "5", "--lr", "1e-2", "--optimizer", "adafactor", "--schedule", "sqrt",
                 "--evaluations", "1", "--eval-sentences", "4", "--blocks-per-step", "4",
                 "--context", "16", "--quiet", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    run = read_run(out)
    assert all(math.isfinite(r["loss"]) for r in run["records"])
    assert set(run["records"][-1]["layers"]) == {"embeddings", "transformer.block.0", "other"}
    first, last = run["evaluations"]
    assert (first["step"], last["step"]) == (0, 5) and last["loss"] < first["loss"]
    for evaluation in run["evaluations"]:
        limit = evaluation["saturation"]["inf"]
        assert list(limit) == ["embeddings", "layer 1"]
        # The embedding lookup is linear in θ: its saturated direction is its own.
        assert limit["embeddings"] == pytest.approx(1.0, abs=1e-6)
        assert -1.0 - 1e-6 <= limit["layer 1"] <= 1.0 + 1e-6
    model, tokenizer = load_checkpoint(out, 5)
    assert isinstance(model, T5DecoderLM) and len(tokenizer) == model.config.vocab_size
    # The reloaded checkpoint holds the weights the last evaluation measured.
    norm = math.sqrt(sum(float(p.detach().double().square().sum()) for p in model.parameters()))
    assert norm == pytest.approx(last["norm"], rel=1e-6)
