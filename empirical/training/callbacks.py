"""A Hugging Face ``Trainer`` callback recording norms with :class:`~empirical.training.norms.NormTracker`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from empirical.errors import EmpiricalError
from empirical.training.norms import NormTracker

__all__ = ["NormCallback"]


class NormCallback(TrainerCallback):
    """Track the parameter norm, θᵀ∇L and θᵀδ of every ``every``-th optimizer step of a ``Trainer``.

    Records have the same fields as :attr:`NormTracker.records`. Step ``N`` is the state after
    ``N`` optimizer updates (what ``checkpoint-N`` holds); θᵀ∇L uses the gradients the optimizer
    receives (accumulated, and clipped if ``max_grad_norm`` is set). ``loss`` is ``None``: the
    Trainer does not hand the per-step loss to callbacks.

    Args:
        groups: parameter groups for :class:`NormTracker` (``None``: the default groups).
        every: record every ``every``-th optimizer step (starting with step 0).
        json_path: if given, the records are written there as JSON when training ends.

    >>> NormCallback(every=2).records  # filled during ``Trainer.train()``; see docs/norms.md
    []
    """

    def __init__(
        self,
        groups: Mapping[str, Sequence[str]] | None = None,
        *,
        every: int = 1,
        json_path: str | Path | None = None,
    ) -> None:
        if every < 1:
            raise EmpiricalError(f"NormCallback expected every ≥ 1, got {every}")
        self.groups = groups
        self.every = every
        self.json_path = json_path
        self.tracker: NormTracker | None = None

    @property
    def records(self) -> list[dict[str, Any]]:
        """The records so far (empty before training starts)."""
        return self.tracker.records if self.tracker is not None else []

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        model = kwargs.get("model")
        if model is None:
            raise EmpiricalError("NormCallback expected the Trainer to pass its model to callbacks")
        self.tracker = NormTracker(model, self.groups)

    def _tracking(self, state: TrainerState) -> NormTracker | None:
        return self.tracker if state.global_step % self.every == 0 else None

    def on_pre_optimizer_step(self, args: TrainingArguments, state: TrainerState,
                              control: TrainerControl, **kwargs: Any) -> None:
        tracker = self._tracking(state)
        if tracker is not None:
            tracker.after_backward(state.global_step)

    def on_optimizer_step(self, args: TrainingArguments, state: TrainerState,
                          control: TrainerControl, **kwargs: Any) -> None:
        tracker = self._tracking(state)  # global_step is incremented only after this event
        if tracker is not None:
            tracker.after_step(state.global_step)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        if self.tracker is not None and self.json_path is not None:
            self.tracker.to_json(self.json_path)
