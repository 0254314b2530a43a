"""The live saturation probe: per-layer similarity to the exact limit and head scales while training."""

from __future__ import annotations

import logging

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
