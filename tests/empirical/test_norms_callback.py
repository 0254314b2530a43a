"""NormCallback inside a real transformers.Trainer (tiny random-init GPT-2, CPU, a few steps)."""

from __future__ import annotations

import json

import pytest
import torch
import transformers
from torch.nn.utils import parameters_to_vector

from empirical.errors import EmpiricalError
from empirical.training.callbacks import NormCallback
from empirical.training.norms import record_scalars


def _trainer(tmp_path, callback, *, steps=4, lr=0.05):
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=40, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 40, (8, 10), generator=torch.Generator().manual_seed(0))
    dataset = [{"input_ids": row, "labels": row} for row in ids]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=steps, per_device_train_batch_size=4,
        learning_rate=lr, optim="sgd", lr_scheduler_type="constant", max_grad_norm=0.0,
        weight_decay=0.0, report_to=[], save_strategy="no", logging_strategy="no", use_cpu=True,
        disable_tqdm=True, seed=0,
    )
    return transformers.Trainer(model=model, args=args, train_dataset=dataset, callbacks=[callback])


def test_records_follow_the_trainer_updates(tmp_path):
    callback = NormCallback(json_path=tmp_path / "norms.json")
    trainer = _trainer(tmp_path, callback)
    start = float(parameters_to_vector(trainer.model.parameters()).detach().double().norm())
    trainer.train()
    records = callback.records
    assert [r["step"] for r in records] == [0, 1, 2, 3]
    assert records[0]["norm"] == pytest.approx(start, rel=1e-12)
    final = float(parameters_to_vector(trainer.model.parameters()).detach().double().norm())
    for record, following in zip(records, [*records[1:], {"norm": final}]):
        # ‖θ + δ‖² = ‖θ‖² + 2θᵀδ + ‖δ‖²: the update recorded is the one that took θ to the next record.
        expected = record["norm"] ** 2 + 2 * record["update_projection"] + record["update_norm"] ** 2
        assert following["norm"] ** 2 == pytest.approx(expected, rel=1e-9)
        # Plain SGD at a constant lr: δ = −lr·∇L, so θᵀδ = −lr·θᵀ∇L (up to float32 rounding).
        assert record["update_projection"] == pytest.approx(-0.05 * record["grad_projection"],
                                                            rel=1e-3)
        assert record["grad_projection"] != 0.0
    assert records[1]["cosine_prev"] is not None and records[1]["cosine_prev"] < 1.0
    saved = json.loads((tmp_path / "norms.json").read_text())
    assert [r["step"] for r in saved["records"]] == [0, 1, 2, 3]


def test_every_n_steps(tmp_path):
    callback = NormCallback(every=2)
    _trainer(tmp_path, callback, steps=5).train()
    assert [r["step"] for r in callback.records] == [0, 2, 4]
    assert all(r["update_projection"] is not None for r in callback.records)


def test_bad_every_is_an_error():
    with pytest.raises(EmpiricalError, match=r"every .* to be an integer ≥ 1, got 0"):
        NormCallback(every=0)


def test_bad_every_names_the_option_and_what_came():
    with pytest.raises(EmpiricalError, match=r"^expected every \(record every so many steps\) to be an "
                                             r"integer ≥ 1, got 0$"):
        NormCallback(every=0)


def _update(model):
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.linspace(0.1, 0.2, p.numel()).reshape(p.shape))


def _hooks(callback, model, steps):
    """Drive the Trainer's events by hand: the updates of ``steps`` optimizer steps."""
    state, control = transformers.TrainerState(), transformers.TrainerControl()
    callback.on_train_begin(None, state, control, model=model)
    for _ in range(steps):
        callback.on_pre_optimizer_step(None, state, control)
        _update(model)
        callback.on_optimizer_step(None, state, control)
        state.global_step += 1
    return state, control


def test_each_complete_record_is_logged_once_and_joins_the_stored_history():
    """A log adds the newest record whose update is done, once; with nothing new, nothing."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    callback = NormCallback(groups={"weights": ["*.weight"]}, prefix="n/")
    assert callback.records == []
    logs = {"loss": 1.0}
    callback.on_log(None, transformers.TrainerState(), transformers.TrainerControl(), logs=logs)
    assert logs == {"loss": 1.0}  # before training: no tracker yet
    state, control = _hooks(callback, model, 0)
    assert callback.tracker.group_names == ["weights", "other"]
    callback.on_log(None, state, control, logs=logs)
    assert logs == {"loss": 1.0}  # no record yet
    callback.on_pre_optimizer_step(None, state, control)
    callback.on_log(None, state, control, logs=logs)
    assert logs == {"loss": 1.0}  # the record of step 0 waits for its update
    _update(model)
    callback.on_optimizer_step(None, state, control)
    state.global_step = 1
    callback.on_log(None, state, control, logs=logs)  # an empty history: only the logs change
    record = callback.records[0]
    assert logs == {"loss": 1.0, "n/step": 0, **record_scalars(record, "n/")}
    assert logs["n/update_norm"] > 0 and "n/grad_projection" in logs
    again = {"loss": 0.5}
    callback.on_log(None, state, control, logs=again)
    assert again == {"loss": 0.5}
    callback.on_pre_optimizer_step(None, state, control)
    _update(model)
    callback.on_optimizer_step(None, state, control)
    state.global_step = 2
    state.log_history = [{"loss": 0.75, "step": 1}, {"loss": 0.5, "step": 2}]
    logs = {"loss": 0.5}
    callback.on_log(None, state, control, logs=logs)
    scalars = {"n/step": 1, **record_scalars(callback.records[1], "n/")}
    assert logs == {"loss": 0.5, **scalars}
    assert state.log_history == [{"loss": 0.75, "step": 1}, {"loss": 0.5, "step": 2, **scalars}]


def test_without_logging_the_records_stay_out_of_the_logs():
    model = torch.nn.Linear(2, 1)
    callback = NormCallback(log=False)
    state, control = _hooks(callback, model, 2)
    assert [r["step"] for r in callback.records] == [0, 1]
    logs = {"loss": 1.0}
    callback.on_log(None, state, control, logs=logs)
    assert logs == {"loss": 1.0}


def test_training_without_the_model_is_an_error():
    with pytest.raises(EmpiricalError, match=r"^NormCallback expected the Trainer to pass its model to "
                                             r"callbacks$"):
        NormCallback().on_train_begin(None, transformers.TrainerState(), transformers.TrainerControl())


class _Integration(transformers.TrainerCallback):
    """Stands for a reporting integration (TensorBoard, W&B, …): what its module makes it."""


_Integration.__module__ = "transformers.integrations.integration_utils"


@pytest.mark.parametrize("log", [True, False])
def test_the_callback_moves_ahead_of_the_reporting_integrations(log):
    """Logging callbacks go right before the first integration, once, the others keeping their
    order; a callback that does not log stays where it was."""
    from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback

    flow, first, second = DefaultFlowCallback(), _Integration(), _Integration()
    callback = NormCallback(log=log)
    handler = CallbackHandler([flow, first, second, callback], torch.nn.Linear(2, 1), None, None, None)
    state, control = transformers.TrainerState(), transformers.TrainerControl()

    def event_of(self, hook):  # as the handler's call_event calls a hook, without its loop
        hook(None, state, control, model=self.model)

    event_of(handler, callback.on_init_end)
    expected = [flow, callback, first, second] if log else [flow, first, second, callback]
    assert handler.callbacks == expected
    handler.on_init_end(None, state, control)  # within the handler's own loop: nothing moves
    assert handler.callbacks == expected
    handler.on_train_begin(None, state, control)  # already in place: nothing moves
    assert handler.callbacks == expected and callback.tracker is not None
