"""NormCallback inside a real transformers.Trainer (tiny random-init GPT-2, CPU, a few steps)."""

from __future__ import annotations

import json

import pytest
import torch
import transformers
from torch.nn.utils import parameters_to_vector

from empirical.errors import EmpiricalError
from empirical.training.callbacks import NormCallback


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
