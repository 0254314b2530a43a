"""NormTracker on real (tiny, random-init) Hugging Face models, checked against direct computation."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
import transformers
from torch.nn.utils import parameters_to_vector

import empirical.training.norms as norms
from empirical.errors import EmpiricalError
from empirical.training.fits import LAWS
from empirical.training.norms import DEFAULT_GROUPS, NormTracker, layer_of, record_scalars


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
        with warnings.catch_warnings():  # reading a loss that requires grad must not warn per step
            warnings.simplefilter("error")
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
    best = label.split(" fit, ")[0]
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


# -- hand-made modules: every path through the tracker, checked against torch.linalg ---------------


def stacked(blocks: int = 3, seed: int = 0) -> torch.nn.Module:
    """A module with blocks ``h.0`` … ``h.<blocks-1>`` of two parameters each and an ``embed``."""
    torch.manual_seed(seed)
    model = torch.nn.Module()
    model.embed = torch.nn.Embedding(5, 3)
    model.h = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(blocks)])
    return model


def layer_vectors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """θ per layer of ``model``, float64, by the names' own layer (a loop over the definition)."""
    parts: dict[str, list[torch.Tensor]] = {}
    for name, p in model.named_parameters():
        parts.setdefault(layer_of(name), []).append(p.detach().reshape(-1).double())
    return {layer: torch.cat(ps) for layer, ps in parts.items()}


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(a @ b / (torch.linalg.vector_norm(a) * torch.linalg.vector_norm(b)))


def moved(model: torch.nn.Module, scale: float, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=generator))


def test_layer_gradient_projections_match_direct_computation():
    """θᵀ∇L per layer is each layer's own θ_layer·g_layer; they sum to θᵀ∇L."""
    model = stacked()
    tracker = NormTracker(model)
    model.h[1].weight.requires_grad_(False)  # a parameter without gradient counts as zero
    loss = model.h[2](model.h[1](model.h[0](model.embed(torch.tensor([0, 3]))))).square().sum()
    loss.backward()
    with warnings.catch_warnings():  # the loss still requires grad: it is read detached, silently
        warnings.simplefilter("error")
        tracker.after_backward(0, loss)
    record = tracker.records[0]
    grads: dict[str, list[torch.Tensor]] = {}
    for name, p in model.named_parameters():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        grads.setdefault(layer_of(name), []).append(g.reshape(-1).double())
    expected = {layer: float(theta @ torch.cat(grads[layer]))
                for layer, theta in layer_vectors(model).items()}
    assert record["layer_grad_projection"] == pytest.approx(expected, rel=1e-12)
    assert list(record["layer_grad_projection"]) == ["embeddings", "h.0", "h.1", "h.2"]
    assert record["grad_projection"] == pytest.approx(sum(expected.values()), rel=1e-12)
    assert record["loss"] == loss.item()


@pytest.mark.parametrize("loss", [2.5, 3, torch.tensor(1.25), torch.tensor([0.75])])
def test_a_loss_given_as_a_number_or_a_one_element_tensor_is_recorded(loss):
    model = stacked(1)
    tracker = NormTracker(model)
    tracker.after_backward(0, loss)
    assert tracker.records[0]["loss"] == float(loss) and isinstance(tracker.records[0]["loss"], float)


def test_records_are_returned_and_written_in_order():
    """Each record call returns the record it appended, and the writer gets that one, at its step."""
    model = stacked()
    writer = []
    tracker = NormTracker(model, writer=type("W", (), {"add_scalar": lambda self, *a: writer.append(a)})())
    for step in (0, 3, 8):
        moved(model, 0.1, step)
        record = tracker.record(step)
        assert record is tracker.records[-1] and record["step"] == step
        assert record["norm"] == pytest.approx(float(torch.cat(list(layer_vectors(model).values())).norm()),
                                               rel=1e-12)
        assert writer[-1][2] == step and {a[0] for a in writer if a[2] == step} == set(record_scalars(record))
        # Without gradients, what needs them is there and not measured (None).
        assert {k for k, v in record.items() if v is None} == {
            "loss", "grad_norm", "grad_projection", "layer_grad_projection", "update_norm",
            "update_projection", *(["cosine_prev", "layer_cosine_prev"] if step == 0 else [])}
        assert set(record) == {"step", "loss", "norm", "layers", "groups", "grad_norm", "grad_projection",
                               "layer_grad_projection", "update_norm", "update_projection", "cosine_prev",
                               "layer_cosine_prev"}


def test_a_model_tracker_compares_its_parameters_with_a_checkpoint_and_back():
    """A tracker of a model may record a checkpoint's state dict between its own records: each
    cosine is the one between the two neighbouring records, per layer too."""
    model = stacked()
    tracker = NormTracker(model)
    first = layer_vectors(model)
    tracker.record(0)
    checkpoint = {n: p.detach() + 0.2 * torch.randn_like(p) for n, p in model.named_parameters()}
    ckpt = {layer: v for layer, v in layer_vectors(_loaded(stacked(), checkpoint)).items()}
    from_checkpoint = tracker.record(1, checkpoint)
    moved(model, 0.3, 1)
    now = layer_vectors(model)
    back = tracker.record(2)
    for record, a, b in ((from_checkpoint, first, ckpt), (back, ckpt, now)):
        assert record["layer_cosine_prev"] == pytest.approx({k: cosine(a[k], b[k]) for k in a}, abs=1e-12)
        total = cosine(torch.cat(list(a.values())), torch.cat(list(b.values())))
        assert record["cosine_prev"] == pytest.approx(total, abs=1e-12)
        assert record["cosine_prev"] < 0.999


def _loaded(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> torch.nn.Module:
    model.load_state_dict(state)
    return model


@pytest.mark.parametrize("blocks", [0, 3], ids=["one parameter", "several layers"])
def test_resume_continues_the_records_of_an_interrupted_run(blocks):
    """A tracker resumed from another's records and previous θ makes the records that one would
    have made; without a previous θ it compares with the parameters as they are."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1, bias=False) if blocks == 0 else stacked(blocks)
    tracker = NormTracker(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(trackers, i):
        loss = sum(p.sum() ** 2 for p in model.parameters()) / 10
        optimizer.zero_grad()
        loss.backward()
        for t in trackers:
            t.after_backward(i, loss)
        optimizer.step()
        for t in trackers:
            t.after_step(i)

    for i in range(2):
        step([tracker], i)
    saved = [dict(r) for r in tracker.records]
    resumed = NormTracker(model)
    resumed.resume(saved, tracker.previous_parameters())
    assert resumed.records == saved and resumed.records is not saved
    resumed.records[0]["norm"] = -1.0  # its own copies
    assert saved[0]["norm"] != -1.0
    resumed.records[0]["norm"] = tracker.records[0]["norm"]
    for i in range(2, 4):
        step([tracker, resumed], i)
    assert resumed.records == tracker.records
    assert resumed.records[2]["cosine_prev"] is not None and resumed.records[2]["cosine_prev"] < 1.0
    # Without previous: the last record measured what the run continues from.
    tracker.record(4)
    fresh = NormTracker(model)
    fresh.resume(tracker.records)
    moved(model, 0.05, 4)
    assert fresh.record(5) == tracker.record(5)
    assert torch.equal(fresh.previous_parameters(), tracker.previous_parameters())


def test_previous_parameters_is_a_copy_of_the_last_recorded_theta():
    model = stacked()
    tracker = NormTracker(model)
    assert tracker.previous_parameters() is None
    tracker.record(0)
    previous = tracker.previous_parameters()
    assert torch.equal(previous, parameters_to_vector([p for _, p in sorted(
        model.named_parameters(), key=lambda item: tracker.names.index(item[0]))]).double())
    previous.zero_()
    assert tracker.previous_parameters().abs().sum() > 0
    offline = NormTracker(dict(model.named_parameters()))
    offline.record(0, {n: p.detach() for n, p in model.named_parameters()})
    assert offline.previous_parameters() is None


def _refusals():
    model = stacked(1)
    state = {n: p.detach() for n, p in model.named_parameters()}
    with torch.device("meta"):
        meta = torch.nn.Linear(2, 2)
    return [
        (lambda: NormTracker(meta), r"expected a model with weights for a NormTracker \(it reads the "
                                    r"parameters\), got Linear on the meta device"),
        (lambda: NormTracker(torch.nn.Linear(2, 2, dtype=torch.complex64)),
         r"expected real parameters for a NormTracker \(it reads the parameters\), got the complex "
         r"parameter 'weight'"),
        (lambda: NormTracker([1, 2]), r"NormTracker expected a model or a state dict of tensors with "
                                      r"values, got \[1, 2\] \(list\)"),
        (lambda: NormTracker({"w": 1.0}), r"a state dict of tensors with values, got \{'w': 1.0\} \(dict\)"),
        (lambda: NormTracker({"w": torch.empty(2, device="meta")}),
         r"a state dict of tensors with values, got .*meta.* \(dict\)"),
        (lambda: NormTracker({}), r"^NormTracker expected a model with parameters, got none$"),
        (lambda: NormTracker(torch.nn.ReLU()), r"^NormTracker expected a model with parameters, got none$"),
        (lambda: NormTracker(model, groups=["*.weight"]),
         r"groups expected a mapping of name → list of glob patterns, got \['\*.weight'\] \(list\)"),
        (lambda: NormTracker(model, groups={1: ["*.weight"]}),
         r"groups expected a mapping of name → list of glob patterns, got \{1: \['\*.weight'\]\} \(dict\)"),
        (lambda: NormTracker(model, groups={"w": 3}),
         r"groups expected a mapping of name → list of glob patterns, got \{'w': 3\} \(dict\)"),
        (lambda: NormTracker(model, groups={"w": "*.weight"}),
         r"^groups expected name → list of glob patterns, got a bare string pattern; wrap it in a list$"),
        (lambda: NormTracker(model, writer=type("W", (), {"add_scalar": 3})()),
         r"NormTracker expected a writer with an add_scalar method \(e.g. a SummaryWriter\), got W$"),
        (lambda: NormTracker(state).record(1), r"^this NormTracker was built from a state dict and has no "
                                               r"parameters of its own; pass the state dict to "
                                               r"record\(step, state_dict\)$"),
        (lambda: NormTracker(state).record(1, {"h.0.weight": state["h.0.weight"]}),
         r"^state dict does not match the architecture: tensor 'embed.weight' \(shape \(5, 3\)\) "
         r"is missing$"),
        (lambda: NormTracker(state).resume([]),
         r"^resume needs a NormTracker built from a model, got one built from a state dict$"),
        (lambda: NormTracker(model).resume([], torch.zeros(7)),
         r"^resume expected previous parameters of 27 values \(this model's\), got 7$"),
    ]


@pytest.mark.parametrize("index", range(16))
def test_what_cannot_be_tracked_is_refused_with_what_was_expected_and_what_came(index):
    build, message = _refusals()[index]
    with pytest.raises(EmpiricalError, match=message):
        build()


def test_a_waiting_step_blocks_every_other_call_by_name():
    model = stacked(1)
    tracker = NormTracker(model)
    with pytest.raises(EmpiricalError, match=r"^after_step\(0\) expected after_backward\(0\) first; "
                                             r"no step is waiting$"):
        tracker.after_step(0)
    tracker.after_backward(0)
    for call, name in ((lambda: tracker.after_backward(1), "after_backward"),
                       (lambda: tracker.record(1), "record"), (lambda: tracker.resume([]), "resume")):
        with pytest.raises(EmpiricalError, match=rf"^NormTracker\.{name}: after_backward\(0\) is still "
                                                 rf"waiting for after_step\(0\)$"):
            call()
    with pytest.raises(EmpiricalError, match=r"^after_step\(2\) expected after_backward\(2\) first; "
                                             r"step 0 is waiting$"):
        tracker.after_step(2)


def test_json_holds_layers_groups_and_records_as_written(tmp_path):
    """The file is to_dict as indented strict JSON, with the layer and group names in order; a
    tracker of a state dict has no model to describe."""
    model = stacked()
    tracker = NormTracker(model, groups={"weights": ["*.weight"]})
    tracker.record(0)
    path = tracker.to_json(tmp_path / "n.json")
    text = path.read_text()
    assert text == json.dumps(tracker.to_dict(), indent=2, allow_nan=False) + "\n"
    data = json.loads(text)
    assert data["layers"] == ["embeddings", "h.0", "h.1", "h.2"]
    assert data["groups"] == ["weights", "other"]
    assert data["model"]["num_parameters"] == 5 * 3 + 3 * (9 + 3) and data["records"] == tracker.records
    offline = NormTracker({n: p.detach() for n, p in model.named_parameters()})
    assert offline.to_dict()["model"] is None


def test_plot_hands_its_title_on(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(norms, "plot_records", lambda records, out, *, fitted=None, title="": seen.append(
        (records, out, title)) or out)
    tracker = NormTracker(stacked())
    tracker.record(0)
    assert tracker.plot(tmp_path / "n.png", title="run 7") == tmp_path / "n.png"
    assert seen == [(tracker.records, tmp_path / "n.png", "run 7")]
    tracker.plot(tmp_path / "untitled.png")  # no title: the figure gets none
    assert seen[-1] == (tracker.records, tmp_path / "untitled.png", "")
    with pytest.raises(EmpiricalError, match=r"^plot expected at least one record, got none$"):
        NormTracker(stacked()).plot(tmp_path / "none.png")


def test_a_group_named_other_joins_the_unmatched_parameters():
    """A custom group called ``other`` is the same group as the parameters no pattern matches:
    one entry, holding the norm of both."""
    model = stacked()
    tracker = NormTracker(model, groups={"embeddings": ["embed.*"], "other": ["*.weight"]})
    record = tracker.record(0)
    rest = [p for n, p in model.named_parameters() if not n.startswith("embed.")]
    assert tracker.group_names == ["embeddings", "other"]
    expected = {"embeddings": float(model.embed.weight.detach().double().norm()),
                "other": float(vector_of(rest).norm())}
    assert record["groups"] == pytest.approx(expected, rel=1e-12)
