"""NormTracker on real (tiny, random-init) Hugging Face models, checked against direct computation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers
from torch.nn.utils import parameters_to_vector

import empirical.training.norms as norms
from empirical.errors import EmpiricalError
from empirical.training.fits import LAWS
from empirical.training.norms import DEFAULT_GROUPS, NormTracker, layer_of


def tiny_gpt2(seed: int = 0) -> transformers.GPT2LMHeadModel:
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                      bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config)


def vector(model: torch.nn.Module) -> torch.Tensor:
    return parameters_to_vector(model.parameters()).detach().double()


def train(model, tracker, steps, optimizer, *, inputs=None):
    inputs = torch.randint(0, 50, (4, 8), generator=torch.Generator().manual_seed(1)) \
        if inputs is None else inputs
    history = []  # independent record: θ before each step, its gradient, θ after
    for step in range(steps):
        loss = model(input_ids=inputs, labels=inputs).loss
        optimizer.zero_grad()
        loss.backward()
        before = vector(model)
        grad = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).double()
        tracker.after_backward(step, loss)
        optimizer.step()
        tracker.after_step(step)
        history.append((before, grad, vector(model), loss.item()))
    return history


@pytest.mark.parametrize("optimizer_name", ["sgd", "adamw"])
def test_records_match_direct_computation(optimizer_name):
    model = tiny_gpt2()
    tracker = NormTracker(model)
    optimizer = (torch.optim.SGD(model.parameters(), lr=0.5) if optimizer_name == "sgd"
                 else torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1))
    history = train(model, tracker, 4, optimizer)
    for step, (record, (before, grad, after, loss)) in enumerate(zip(tracker.records, history)):
        assert record["step"] == step
        assert record["loss"] == pytest.approx(loss)
        assert record["norm"] == pytest.approx(float(before.norm()), rel=1e-12)
        assert record["grad_norm"] == pytest.approx(float(grad.norm()), rel=1e-10)
        assert record["grad_projection"] == pytest.approx(float(before @ grad), rel=1e-9)
        delta = after - before
        assert record["update_norm"] == pytest.approx(float(delta.norm()), rel=1e-9)
        assert record["update_projection"] == pytest.approx(float(before @ delta), rel=1e-9)
        # The identity behind norm growth: ‖θ+δ‖² − ‖θ‖² = 2θᵀδ + ‖δ‖².
        grown = float(after.norm() ** 2 - before.norm() ** 2)
        assert grown == pytest.approx(2 * record["update_projection"] + record["update_norm"] ** 2,
                                      rel=1e-6)
        if step == 0:
            assert record["cosine_prev"] is None and record["layer_cosine_prev"] is None
        else:
            previous = history[step - 1][0]
            expected = float(before @ previous / (before.norm() * previous.norm()))
            assert record["cosine_prev"] == pytest.approx(expected, abs=1e-12)
    if optimizer_name == "sgd":  # δ = −η∇L up to float32 rounding of θ − η∇L, so θᵀδ ≈ −η θᵀ∇L
        for record, (before, _grad, after, _loss) in zip(tracker.records, history):
            rounding = 2 * float(before.abs() @ after.abs()) * 2.0**-24  # ½ ulp per element, twice
            assert record["update_projection"] == pytest.approx(-0.5 * record["grad_projection"],
                                                                abs=rounding, rel=0)


def test_layers_and_groups_partition_the_parameters():
    model = tiny_gpt2()
    tracker = NormTracker(model)
    tracker.record(0)
    record = tracker.records[0]
    assert list(record["layers"]) == ["embeddings", "transformer.h.0", "transformer.h.1", "other"]
    assert sum(v**2 for v in record["layers"].values()) == pytest.approx(record["norm"] ** 2)
    assert sum(v**2 for v in record["groups"].values()) == pytest.approx(record["norm"] ** 2)
    block = [p for n, p in model.named_parameters() if n.startswith("transformer.h.1.")]
    assert record["layers"]["transformer.h.1"] == pytest.approx(float(vector_of(block).norm()))
    ln = [p for n, p in model.named_parameters() if ".ln_" in n]
    assert record["groups"]["norm layers"] == pytest.approx(float(vector_of(ln).norm()))
    biases = [p for n, p in model.named_parameters() if n.endswith(".bias") and ".ln_" not in n]
    assert record["groups"]["biases"] == pytest.approx(float(vector_of(biases).norm()))


def vector_of(params) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1).double() for p in params])


def test_per_layer_cosine_matches_direct_computation():
    model = tiny_gpt2()
    tracker = NormTracker(model)
    block = [p for n, p in model.named_parameters() if n.startswith("transformer.h.0.")]
    tracker.record(0)
    first = vector_of(block)
    with torch.no_grad():
        for p in block:
            p.add_(0.3 * torch.randn_like(p))
    tracker.record(10)
    second = vector_of(block)
    record = tracker.records[1]
    expected = float(first @ second / (first.norm() * second.norm()))
    assert record["layer_cosine_prev"]["transformer.h.0"] == pytest.approx(expected, abs=1e-12)
    assert record["layer_cosine_prev"]["transformer.h.1"] == pytest.approx(1.0, abs=1e-12)
    assert record["layer_cosine_prev"]["transformer.h.0"] < 0.99


@pytest.mark.parametrize(("name", "layer"), [
    ("bert.encoder.layer.11.output.dense.weight", "bert.encoder.layer.11"),
    ("transformer.h.0.attn.c_attn.weight", "transformer.h.0"),
    ("decoder.block.3.layer.2.DenseReluDense.wo.weight", "decoder.block.3"),
    ("model.layers.7.mlp.up_proj.weight", "model.layers.7"),
    ("embeddings.word_embeddings.weight", "embeddings"),
    ("shared.weight", "embeddings"),
    ("lm_head.weight", "embeddings"),
    ("pooler.dense.weight", "other"),
    ("encoder.final_layer_norm.weight", "other"),
])
def test_layer_of_hugging_face_names(name, layer):
    assert layer_of(name) == layer


def test_default_groups_on_the_paper_families(small_models):
    expected = {
        "bert": {"embeddings.word_embeddings.weight": "embeddings",
                 "encoder.layer.0.attention.self.query.weight": "attention",
                 "encoder.layer.0.attention.output.dense.weight": "attention",
                 "encoder.layer.0.intermediate.dense.weight": "feed-forward",
                 "encoder.layer.0.output.dense.weight": "feed-forward",
                 "encoder.layer.0.output.LayerNorm.bias": "norm layers",
                 "encoder.layer.0.attention.self.query.bias": "biases"},
        "t5": {"shared.weight": "embeddings",
               "encoder.block.0.layer.0.SelfAttention.q.weight": "attention",
               "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight": "attention",
               "decoder.block.1.layer.2.DenseReluDense.wo.weight": "feed-forward",
               "decoder.final_layer_norm.weight": "norm layers"},
        "gpt2": {"wte.weight": "embeddings", "h.1.mlp.c_fc.weight": "feed-forward",
                 "h.1.attn.c_proj.weight": "attention", "h.1.attn.c_proj.bias": "biases",
                 "ln_f.weight": "norm layers"},
    }
    for family, groups in expected.items():
        model, _tokenizer = small_models[family]
        tracker = NormTracker(model)
        index = {name: tracker.group_names[int(i)] for name, i in zip(tracker.names,
                                                                        tracker._group_index)}
        for name, group in groups.items():
            assert index[name] == group, (family, name)
        assert set(tracker.group_names) <= {*DEFAULT_GROUPS, "other"}


def test_custom_groups_first_match_wins_and_other_collects_the_rest():
    model = tiny_gpt2()
    tracker = NormTracker(model, groups={"block 0": ["transformer.h.0.*"], "weights": ["*.weight"]})
    tracker.record(0)
    groups = tracker.records[0]["groups"]
    assert list(groups) == ["block 0", "weights", "other"]
    rest = [p for n, p in model.named_parameters()
            if not n.startswith("transformer.h.0.") and not n.endswith(".weight")]
    assert groups["other"] == pytest.approx(float(vector_of(rest).norm()))
    with pytest.raises(EmpiricalError, match="bare string"):
        NormTracker(model, groups={"weights": "*.weight"})  # type: ignore[dict-item]


def test_misuse_gives_clear_errors():
    model = tiny_gpt2()
    tracker = NormTracker(model)
    with pytest.raises(EmpiricalError, match=r"after_step\(0\) expected after_backward\(0\) first"):
        tracker.after_step(0)
    inputs = torch.randint(0, 50, (2, 8))
    loss = torch.nn.functional.cross_entropy(
        model(input_ids=inputs).logits.reshape(-1, 50), inputs.reshape(-1), reduction="none")
    with pytest.raises(EmpiricalError, match=r"scalar loss, got a tensor of shape \(16,\)"):
        tracker.after_backward(0, loss)
    loss.mean().backward()
    tracker.after_backward(0, loss.mean())
    with pytest.raises(EmpiricalError, match=r"after_step\(1\) expected .* step 0 is waiting"):
        tracker.after_step(1)
    with pytest.raises(EmpiricalError, match="still waiting"):
        tracker.record(1)
    tracker.after_step(0)
    with pytest.raises(EmpiricalError, match="steps to increase, got step 0 after step 0"):
        tracker.record(0)


def test_parameters_without_gradient_do_not_count():
    model = tiny_gpt2()
    model.transformer.wpe.weight.requires_grad_(False)
    tracker = NormTracker(model)
    inputs = torch.randint(0, 50, (2, 8))
    model(input_ids=inputs, labels=inputs).loss.backward()
    tracker.after_backward(0)
    with_grad = [p for p in model.parameters() if p.grad is not None]
    expected = sum(float((p.detach().double() * p.grad.double()).sum()) for p in with_grad)
    assert tracker.records[0]["grad_projection"] == pytest.approx(expected, rel=1e-9)
    assert tracker.records[0]["loss"] is None


def test_record_from_a_state_dict_matches_the_model():
    model = tiny_gpt2()
    live = NormTracker(model)
    live.record(0)
    offline = NormTracker(dict(model.named_parameters()))
    offline.record(0, {n: p.detach().clone() for n, p in model.named_parameters()})
    assert offline.records[0]["layers"] == pytest.approx(live.records[0]["layers"], rel=1e-12)
    with pytest.raises(EmpiricalError, match="no parameters of its own"):
        offline.record(1)
    bad = {n: p.detach() for n, p in model.named_parameters()}
    bad["transformer.h.0.attn.c_attn.weight"] = torch.zeros(16, 3)
    with pytest.raises(EmpiricalError, match=r"'transformer.h.0.attn.c_attn.weight' has shape "
                                              r"\(16, 3\), expected \(16, 48\)"):
        offline.record(1, bad)


def test_json_is_strict_with_provenance_and_plot_writes_a_png(tmp_path):
    model = tiny_gpt2()
    tracker = NormTracker(model)
    train(model, tracker, 3, torch.optim.SGD(model.parameters(), lr=0.1))
    data = json.loads(tracker.to_json(tmp_path / "norms.json").read_text())
    assert data["schema"] == "normsat.norms/1"
    assert data["model"]["class"].endswith("GPT2LMHeadModel")
    assert data["versions"]["torch"] == torch.__version__
    assert [r["step"] for r in data["records"]] == [0, 1, 2]
    assert tracker.plot(tmp_path / "norms.png").read_bytes()[:4] == b"\x89PNG"
    tracker.records[-1]["norm"] = float("nan")
    with pytest.raises(EmpiricalError, match="finite"):
        tracker.to_json(tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()


def test_the_model_is_not_changed(tmp_path):
    model = tiny_gpt2()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    tracker = NormTracker(model)
    inputs = torch.randint(0, 50, (2, 8))
    model(input_ids=inputs, labels=inputs).loss.backward()
    tracker.after_backward(0)
    tracker.after_step(0)
    tracker.record(1)
    tracker.to_json(tmp_path / "n.json")
    for name, param in model.named_parameters():
        assert torch.equal(param, before[name])


def _drawn_curve(tracker, path, monkeypatch):
    """The ``fitted`` curve NormTracker.plot hands to plot_records (which still writes the PNG)."""
    seen = []
    real = norms.plot_records

    def spy(records, out, *, fitted=None, title=""):
        seen.append(fitted)
        return real(records, out, fitted=fitted, title=title)

    monkeypatch.setattr(norms, "plot_records", spy)
    assert tracker.plot(path).read_bytes()[:4] == b"\x89PNG"
    return seen[0]


def test_plot_draws_the_best_fitted_law_over_the_total_norm(tmp_path, monkeypatch):
    model = tiny_gpt2()
    tracker = NormTracker(model)
    train(model, tracker, 6, torch.optim.SGD(model.parameters(), lr=0.5))
    label, steps, curve = _drawn_curve(tracker, tmp_path / "n.png", monkeypatch)
    best = label.split(":")[0]
    assert best in LAWS and steps[0] == 0 and steps[-1] == 5
    # The curve is the law fitted to the recorded norms: close to them where they were recorded.
    norms_at = [r["norm"] for r in tracker.records]
    at_records = np.interp(range(6), steps, curve)
    spread = max(norms_at) - min(norms_at)
    assert np.max(np.abs(at_records - norms_at)) < 0.2 * spread
    # Too few records for any law: the norms are drawn without a curve.
    short = NormTracker(model)
    short.record(0)
    short.record(1)
    assert _drawn_curve(short, tmp_path / "short.png", monkeypatch) is None


def test_scan_sums_are_exact_across_chunks_and_resolve_cosines_near_one(monkeypatch):
    monkeypatch.setattr(norms, "_CHUNK", 1000)  # several chunks per tensor, and a ragged last one
    generator = torch.Generator().manual_seed(0)
    state = {"layer.0.w": torch.randn(3, 1234, generator=generator),
             "layer.1.w": torch.randn(2500, generator=generator)}
    moved = {name: t + 1e-5 * torch.randn(t.shape, generator=generator) for name, t in state.items()}
    tracker = NormTracker(state)
    tracker.record(0, state)
    record = tracker.record(1, moved)
    a = torch.cat([t.reshape(-1).double() for t in state.values()])
    b = torch.cat([t.reshape(-1).double() for t in moved.values()])
    assert record["norm"] == pytest.approx(float(b.norm()), rel=1e-14)
    # 1 − cos ≈ 1e-10 here: from ‖a − b‖², which loses nothing to cancellation.
    one_minus = float((a - b).square().sum() - (a.norm() - b.norm()) ** 2) / (2 * float(a.norm() * b.norm()))
    assert 1e-11 < one_minus < 1e-9
    assert 1.0 - record["cosine_prev"] == pytest.approx(one_minus, rel=1e-3)
