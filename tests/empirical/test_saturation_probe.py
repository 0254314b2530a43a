"""The live saturation probe: per-layer similarity to the exact limit and head scales while training."""

from __future__ import annotations

import logging
import math

import pytest
import torch

from empirical.errors import EmpiricalError
from empirical.training.norms import NormTracker
from empirical.training.probe import SaturationProbe, probe_scalars
from empirical.training.runs import CompactTokenizer, TrainConfig, build_model

SENTENCES = ["The cat sat on the mat.", "A dog ran in the park today.", "Birds sing at dawn."]


@pytest.fixture(scope="module")
def tiny():
    tokenizer = CompactTokenizer.fit(SENTENCES)
    config = TrainConfig(arch="pre", layers=1, width=16, heads=2, context=16, batch_size=2)
    return tokenizer, build_model(config, len(tokenizer), tokenizer.pad_token_id)


class _Writer:
    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int]] = []

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars.append((tag, value, step))


def test_tracker_probes_every_n_steps_and_writes_the_scalars(tiny, caplog):
    tokenizer, model = tiny
    model.train()
    probe = SaturationProbe(tokenizer, SENTENCES[:2], every=2, threshold=1e9)  # every head warns
    writer = _Writer()
    tracker = NormTracker(model, writer=writer, probe=probe)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(1, len(tokenizer), (2, 8), generator=torch.Generator().manual_seed(0))
    with caplog.at_level(logging.WARNING, logger="normsat.probe"):
        for step in range(4):
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            tracker.after_backward(step, loss)
            optimizer.step()
            optimizer.zero_grad()
            updated = [p.detach().clone() for p in model.parameters()]
            tracker.after_step(step)  # probes at step 1 (the state after 2 updates) and 3
            assert model.training  # the probe restores the mode and never touches the parameters
            assert all(torch.equal(a, p) for a, p in zip(updated, model.parameters()))
    assert [r["step"] for r in probe.records] == [2, 4]
    record = probe.records[0]
    assert len(record["heads"]) == 2 and all(h["scale"][0] <= h["scale"][1] for h in record["heads"])
    assert all(-1.0 <= v <= 1.0 for v in record["saturation"].values())
    written = {(tag, step): value for tag, value, step in writer.scalars}
    for probed in probe.records:
        for tag, value in probe_scalars(probed, "normsat/").items():
            assert written[(tag, probed["step"])] == value
    assert any(tag.startswith("normsat/head_scale/layer0.head") for tag, _ in written)
    warned = [r.getMessage() for r in caplog.records]
    assert any("step 2: layer 0 head 1 is close to hard attention" in m for m in warned), warned


def test_a_head_above_the_threshold_is_not_warned_about(tiny, caplog):
    tokenizer, model = tiny
    probe = SaturationProbe(tokenizer, SENTENCES[:2], every=1, threshold=1e-12)
    with caplog.at_level(logging.WARNING, logger="normsat.probe"):
        probe.measure(model, 7)
    assert not caplog.records


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"every": 0}, "every ≥ 1"), ({"threshold": 0.0}, "positive threshold"),
])
def test_bad_probe_options(kwargs, message):
    with pytest.raises(EmpiricalError, match=message):
        SaturationProbe(None, SENTENCES, **kwargs)


def test_callback_probes_at_its_steps_and_logs_with_the_trainer(tiny, tmp_path):
    import transformers

    from empirical.training.callbacks import NormCallback

    tokenizer, model = tiny
    probe = SaturationProbe(tokenizer, SENTENCES[:2], every=2)
    callback = NormCallback(probe=probe)
    ids = torch.randint(1, len(tokenizer), (4, 8), generator=torch.Generator().manual_seed(0))
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=2, learning_rate=0.05,
        optim="sgd", report_to=[], logging_steps=2, save_strategy="no", use_cpu=True,
        disable_tqdm=True, seed=0)
    trainer = transformers.Trainer(model=model, args=args, callbacks=[callback],
                                   train_dataset=[{"input_ids": r, "labels": r} for r in ids])
    trainer.train()
    assert [r["step"] for r in probe.records] == [2, 4]
    logged = {entry["step"]: entry for entry in trainer.state.log_history if "normsat/norm" in entry}
    for record in probe.records:
        for tag, value in probe_scalars(record, "normsat/").items():
            assert logged[record["step"]][tag] == value


def test_the_documented_defaults():
    from empirical.training.probe import DEFAULT_EVERY

    probe = SaturationProbe(None, SENTENCES)
    assert (probe.every, probe.threshold, probe.eps) == (DEFAULT_EVERY, 2.0, 1e-3) == (500, 2.0, 1e-3)
    assert probe.sentences == SENTENCES and probe.sentences is not SENTENCES and probe.records == []


@pytest.mark.parametrize(("every", "due"), [(1, [1, 2, 3, 4, 5, 6]), (3, [3, 6]), (7, [])])
def test_due_at_each_multiple_of_every_after_step_zero(every, due):
    probe = SaturationProbe(None, SENTENCES, every=every, threshold=0.5)
    assert [step for step in range(7) if probe.due(step)] == due


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"every": 0}, r"^SaturationProbe expected every ≥ 1, got 0$"),
    ({"sentences": []}, r"^SaturationProbe expected a list of held-out sentences, got \[\]$"),
    ({"sentences": "A sentence."},
     r"^SaturationProbe expected a list of held-out sentences, got 'A sentence.'$"),
    ({"threshold": math.inf}, r"^SaturationProbe expected a positive threshold, got inf$"),
    ({"threshold": math.nan}, r"^SaturationProbe expected a positive threshold, got nan$"),
    ({"threshold": -1.0}, r"^SaturationProbe expected a positive threshold, got -1.0$"),
])
def test_bad_probe_options_name_what_came(kwargs, message):
    sentences = kwargs.pop("sentences", SENTENCES)
    with pytest.raises(EmpiricalError, match=message):
        SaturationProbe(None, sentences, **kwargs)


def test_a_measurement_is_the_limit_similarity_and_the_head_atlas_at_its_eps(tiny, caplog):
    """The record holds what representation_similarity (c = ∞) and head_atlas (at the probe's eps)
    give on the held-out batch; exactly the heads whose scale is below the threshold are warned
    about, by step, layer, head, scale, threshold and eps (a head at the threshold is not)."""
    from empirical.measure.heads import head_atlas
    from empirical.measure.similarity import representation_similarity

    tokenizer, model = tiny
    model.eval()
    sentences = SENTENCES[:2]
    atlas = head_atlas(model, tokenizer, sentences, eps=1e-2, paper=False, batch_size=2)
    limit = representation_similarity(model, tokenizer, sentences, scale=math.inf, batch_size=2)
    uppers = sorted(h.scale[1] for h in atlas.heads)
    assert uppers[0] < uppers[-1]  # two heads with different scales
    probe = SaturationProbe(tokenizer, sentences, every=1, threshold=uppers[-1], eps=1e-2)
    with caplog.at_level(logging.WARNING, logger="normsat.probe"):
        record = probe.measure(model, 7)
    assert record == {"step": 7, "saturation": dict(zip(limit.layers, limit.per_layer)),
                      "heads": [{"layer": h.layer, "head": h.head, "scale": list(h.scale)}
                                for h in atlas.heads]}
    assert probe.records == [record]
    expected = [f"step 7: layer {h.layer} head {h.head} is close to hard attention: certified scale "
                f"to saturate {h.scale[1]:.3g} < threshold {uppers[-1]:g} (eps 0.01)"
                for h in atlas.heads if h.scale[1] < uppers[-1]]
    assert [r.getMessage() for r in caplog.records] == expected and len(expected) == 1


def test_probe_scalars_name_layers_and_heads_and_leave_out_infinite_scales():
    record = {"step": 4, "saturation": {"layer 1": 0.5, "layer 2": 0.25},
              "heads": [{"layer": 0, "head": 1, "scale": [1.5, 3.0]},
                        {"layer": 2, "head": 0, "scale": [2.0, math.inf]}]}
    assert probe_scalars(record, "p/") == {"p/saturation/layer 1": 0.5, "p/saturation/layer 2": 0.25,
                                           "p/head_scale/layer0.head1": 3.0}
