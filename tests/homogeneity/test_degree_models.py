"""Real transformers: MiniLM (pretrained) and two-layer random-init BERT, RoBERTa, GPT-2, T5, XLNet.

Expected degrees, derived by hand from the architectures:

- post-LN encoders (BERT, RoBERTa, MiniLM, XLNet): each layer ends in LayerNorm + affine, so every
  hidden state is 1-homogeneous, asymptotically (biases before it and eps are lower order); the
  embeddings are exact 1 before their LayerNorm, and BERT's pooler tanh makes 0 (approximate).
- pre-LN decoders (GPT-2, T5): the residual stream is embeddings (1, exact) plus sublayer outputs
  LN(h)·W_qkv → 2, softmax → 0, ·V → 2, ·W_o → 3; so hidden states after a block are 3
  (asymptotic: the degree-1 embeddings and the biases are lower order) and the final norm
  brings the last hidden state back to 1.
"""

from __future__ import annotations

from typing import Any

import pytest
import sympy
from torch import nn

import homogeneity
from homogeneity import Grade
from homogeneity.analysis import analyze_program
from homogeneity.verify import check_scaling

ASYM, EXACT, APPROX = Grade.ASYMPTOTIC, Grade.EXACT, Grade.APPROXIMATE

EXPECTED: dict[str, dict[str, tuple[int, Grade]]] = {
    "bert": {"last_hidden_state": (1, ASYM), "pooler_output": (0, APPROX),
             "hidden_states.0": (1, ASYM), "hidden_states.1": (1, ASYM),
             "hidden_states.2": (1, ASYM)},
    "gpt2": {"last_hidden_state": (1, ASYM), "hidden_states.0": (1, EXACT),
             "hidden_states.1": (3, ASYM), "hidden_states.2": (1, ASYM)},
    "t5": {"last_hidden_state": (1, ASYM), "encoder_last_hidden_state": (1, ASYM),
           "encoder_hidden_states.0": (1, EXACT), "encoder_hidden_states.1": (3, ASYM),
           "encoder_hidden_states.2": (1, ASYM), "decoder_hidden_states.0": (1, EXACT),
           "decoder_hidden_states.1": (3, ASYM), "decoder_hidden_states.2": (1, ASYM)},
    "xlnet": {"last_hidden_state": (1, ASYM), "hidden_states.0": (1, EXACT),
              "hidden_states.1": (1, ASYM), "hidden_states.2": (1, ASYM)},
}
EXPECTED["roberta"] = EXPECTED["bert"]


def _inputs(family: str, tokenizer: Any) -> dict[str, Any]:
    enc = tokenizer(["the norm grows", "saturated attention is hard"], return_tensors="pt",
                    padding=True)
    inputs = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
              "output_hidden_states": True}
    if family == "t5":
        inputs["decoder_input_ids"] = enc["input_ids"][:, :3]
    return inputs


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_family_degrees_match_hand_derivation(family: str, small_models: dict[str, Any]) -> None:
    model, tokenizer = small_models[family]
    report = homogeneity.analyze(model, **_inputs(family, tokenizer))
    assert report.unsupported == []
    found = {name: (d.value, d.grade) for name, d in report.outputs.items() if name in
             EXPECTED[family]}
    assert found == {name: (sympy.Integer(k), g) for name, (k, g) in EXPECTED[family].items()}


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_family_without_attention_mask_has_every_rule(family: str,
                                                      small_models: dict[str, Any]) -> None:
    # One unpadded sentence and no mask takes other code paths (GPT-2 checks its positions
    # with aten.diff, for one).
    model, tokenizer = small_models[family]
    inputs = _inputs(family, tokenizer)
    ids = inputs["input_ids"][:1, :4]
    kwargs = {"decoder_input_ids": ids} if family == "t5" else {}
    report = homogeneity.analyze(model, input_ids=ids, **kwargs)
    assert report.unsupported == []
    assert (report.degree, report.grade) == (1, ASYM)


def test_minilm_is_asymptotically_1_homogeneous_and_says_why(minilm: tuple[nn.Module, Any]) -> None:
    model, tokenizer = minilm
    report = homogeneity.analyze(model, **_inputs("bert", tokenizer))
    assert (report.degree, report.grade) == (1, ASYM)
    assert len([n for n in report.outputs if n.startswith("hidden_states.")]) == 7
    assert all((d.value, d.grade) == (1, ASYM) for n, d in report.outputs.items()
               if n.startswith("hidden_states."))
    # The only weakening is the embeddings' LayerNorm eps: every later term carries its lower-order
    # part along (GELU's linear tail included), so no later node is stronger than asymptotic.
    (weakening,) = report.weakenings
    assert weakening.module == "embeddings.LayerNorm"
    assert "eps=1e-12 is lower order" in weakening.degree.reason
    gelus = [n for n in report.nodes if n.op == "aten.gelu.default"]
    assert len(gelus) == 6 and all(str(n.degree) == "2 (asymptotic)" for n in gelus)
    layer = report.module("encoder.layer.3")
    # Entering: the hidden states and the (constant) attention mask.
    assert (layer.type, layer.inputs, layer.outputs) == (
        "BertLayer", ("0 (exact)", "1 (asymptotic)"), ("1 (asymptotic)",))
    # Attention probabilities are approximately 0-homogeneous; context = probs·V has V's degree 2.
    assert report.module("encoder.layer.0.attention.self").outputs == ("2 (asymptotic)",)
    softmaxes = [n for n in report.nodes if n.op == "aten.softmax.int"]
    assert len(softmaxes) == 6 and all(str(n.degree) == "0 (approximate)" for n in softmaxes)


def test_minilm_scaling_confirms_degree_and_grade(minilm: tuple[nn.Module, Any]) -> None:
    model, tokenizer = minilm
    enc = tokenizer(["norm growth saturates attention"], return_tensors="pt")
    report = homogeneity.analyze(model, input_ids=enc["input_ids"])
    # Pretrained attention saturates only around c ≈ 500, so the scales go up to 2¹⁴.
    checks = {c.output: c for c in check_scaling(model, input_ids=enc["input_ids"], report=report,
                                                 scales=[2.0**i for i in range(15)])}
    last = checks["last_hidden_state"]
    assert last.measured == "polynomial", last.changes
    assert checks["pooler_output"].measured == "exponential", checks["pooler_output"].changes


def test_json_and_table(small_models: dict[str, Any]) -> None:
    model, tokenizer = small_models["bert"]
    report = homogeneity.analyze(model, **_inputs("bert", tokenizer))
    data = report.to_dict()
    assert data["degree"] == "1" and data["grade"] == "asymptotic"
    assert data["outputs"]["pooler_output"]["grade"] == "approximate"
    assert len(data["nodes"]) == len(report.nodes)
    assert report.to_json().startswith("{")
    table = report.table(depth=3)
    assert "degree 1 (asymptotic) of last_hidden_state" in table
    assert "encoder.layer.1" in table and "encoder.layer.1.attention.self" not in table


def test_params_selects_which_parameters_scale(small_models: dict[str, Any]) -> None:
    model, tokenizer = small_models["bert"]
    inputs = _inputs("bert", tokenizer)
    report = homogeneity.analyze(model, params="encoder.layer.1.output.*", **inputs)
    # Only the last sublayer's dense and LayerNorm scale: LN + affine gives degree 1 again, and
    # the dense weight's degree-1 term dominates the fixed residual (a lower-order constant).
    assert (report.degree, report.grade) == (1, ASYM)
    assert str(report.outputs["hidden_states.1"]) == "0 (exact)"
    assert len(report.scaled) == 4 and "encoder.layer.1.output.dense.weight" in report.scaled


def test_gpt2_tanh_gelu_is_approximately_relu() -> None:
    import torch
    from transformers.activations import NewGELUActivation

    # 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))): the x³ term leads inside tanh (asymptotic), tanh
    # saturates (approximate 0), and the product with x keeps x's degree: approximately ReLU.
    program = homogeneity.export_model(NewGELUActivation(), (torch.randn(2, 3),))
    (name,) = program.graph_signature.user_inputs
    report = analyze_program(program, input_degrees={name: 1})
    assert str(report.outputs["output"]) == "1 (approximate)"
