"""Norms in the dashboards: NormCallback through the Trainer's logs, NormTracker to a writer."""

from __future__ import annotations

import pytest
import torch
import transformers

from empirical.errors import EmpiricalError
from empirical.training.callbacks import NormCallback
from empirical.training.norms import NormTracker, record_scalars

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def _scalars(folder) -> dict[str, dict[int, float]]:
    """Every scalar of the event files under ``folder``, read with TensorBoard's own reader."""
    files = sorted(folder.rglob("events.out.tfevents.*"))
    assert files, f"no event file under {folder}"
    found: dict[str, dict[int, float]] = {}
    for path in files:
        reader = event_accumulator.EventAccumulator(str(path), size_guidance={"scalars": 0})
        reader.Reload()
        for tag in reader.Tags()["scalars"]:
            found.setdefault(tag, {}).update({e.step: e.value for e in reader.Scalars(tag)})
    return found


def _gpt2(seed: int = 0) -> transformers.GPT2LMHeadModel:
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=40, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                     bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config)


def test_trainer_reports_the_records_to_tensorboard(tmp_path, monkeypatch):
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)  # events go under output_dir
    callback = NormCallback()
    ids = torch.randint(0, 40, (8, 10), generator=torch.Generator().manual_seed(0))
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=6, per_device_train_batch_size=4,
        learning_rate=0.05, optim="sgd", lr_scheduler_type="constant", weight_decay=0.0,
        report_to=["tensorboard"], logging_steps=2,
        save_strategy="no", use_cpu=True, disable_tqdm=True, seed=0,
    )
    trainer = transformers.Trainer(model=_gpt2(), args=args, callbacks=[callback],
                                   train_dataset=[{"input_ids": r, "labels": r} for r in ids])
    trainer.train()
    found = _scalars(tmp_path / "out")
    by_step = {r["step"]: r for r in callback.records}
    logged = found["train/normsat/step"]
    assert sorted(logged) == [2, 4, 6]  # the Trainer's logging steps
    for global_step, record_step in logged.items():
        assert record_step == global_step - 1  # the newest record whose update is complete
        expected = record_scalars(by_step[record_step], "train/normsat/")
        assert {"train/normsat/norm", "train/normsat/grad_projection",
                "train/normsat/update_projection", "train/normsat/cosine_prev"} <= expected.keys()
        assert any(tag.startswith("train/normsat/layer/") for tag in expected)
        for tag, value in expected.items():
            assert found[tag][global_step] == pytest.approx(value, rel=1e-6), tag  # float32 events
    assert "train/loss" in found  # the Trainer's own metrics are still there
    history = [entry for entry in trainer.state.log_history if "normsat/norm" in entry]
    assert [entry["step"] for entry in history] == [2, 4, 6]


def test_callback_without_logging_leaves_the_logs_alone(tmp_path):
    callback = NormCallback(log=False)
    logs: dict[str, float] = {"loss": 1.0}
    callback.on_log(None, transformers.TrainerState(), transformers.TrainerControl(), logs=logs)
    assert logs == {"loss": 1.0}


class _Writer:
    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int]] = []

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars.append((tag, value, step))


def _plain_loop(tracker: NormTracker, model: torch.nn.Module, steps: int = 3) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = torch.randint(0, 40, (4, 10), generator=torch.Generator().manual_seed(1))
    for step in range(steps):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        tracker.after_backward(step, loss)
        optimizer.step()
        optimizer.zero_grad()
        tracker.after_step(step)


def test_tracker_writes_each_complete_record():
    model = _gpt2()
    writer = _Writer()
    tracker = NormTracker(model, writer=writer, prefix="n/")
    _plain_loop(tracker, model)
    expected = [(tag, value, r["step"]) for r in tracker.records
                for tag, value in record_scalars(r, "n/").items()]
    assert writer.scalars == expected
    assert {tag for tag, _, _ in writer.scalars} >= {"n/norm", "n/loss", "n/grad_projection",
                                                      "n/update_projection", "n/cosine_prev"}
    tracker.record(10)  # a record without gradients is complete at once
    assert writer.scalars[-1][2] == 10


def test_a_checkpoint_scan_writes_each_record_at_once():
    """A tracker built from a state dict (a scan over checkpoints) writes every record it makes,
    with the record's own scalars at the record's step."""
    states = [{n: p.detach().clone() for n, p in _gpt2(seed).named_parameters()} for seed in (0, 1)]
    writer = _Writer()
    tracker = NormTracker(states[0], writer=writer, prefix="scan/")
    for step, state in zip((100, 200), states):
        tracker.record(step, state)
    expected = [(tag, value, r["step"]) for r in tracker.records
                for tag, value in record_scalars(r, "scan/").items()]
    assert writer.scalars == expected
    assert {step for _, _, step in writer.scalars} == {100, 200}
    assert ("scan/norm", tracker.records[1]["norm"], 200) in writer.scalars


def test_tracker_writes_to_a_summary_writer(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    model = _gpt2()
    with SummaryWriter(str(tmp_path)) as writer:
        tracker = NormTracker(model, writer=writer)
        _plain_loop(tracker, model)
    found = _scalars(tmp_path)
    for record in tracker.records:
        for tag, value in record_scalars(record).items():
            assert found[tag][record["step"]] == pytest.approx(value, rel=1e-6)


def test_a_writer_without_add_scalar_is_an_error():
    with pytest.raises(EmpiricalError, match=r"add_scalar method.*got list"):
        NormTracker(torch.nn.Linear(2, 2), writer=[])  # type: ignore[arg-type]
