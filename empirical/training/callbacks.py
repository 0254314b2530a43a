"""A Hugging Face ``Trainer`` callback recording norms with :class:`~empirical.training.norms.NormTracker`."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import CallbackHandler

from empirical.errors import EmpiricalError
from empirical.outputs import check_output
from empirical.training.norms import PREFIX, NormTracker, record_scalars
from empirical.training.probe import SaturationProbe, probe_scalars
from empirical.validation import check_count

__all__ = ["NormCallback"]


class NormCallback(TrainerCallback):
    """Track the parameter norm, θᵀ∇L and θᵀδ of every ``every``-th optimizer step of a ``Trainer``.

    Records have the same fields as :attr:`NormTracker.records`. Step ``N`` is the state after
    ``N`` optimizer updates (what ``checkpoint-N`` holds); θᵀ∇L uses the gradients the optimizer
    receives (accumulated, and clipped if ``max_grad_norm`` is set). ``loss`` is ``None``: the
    Trainer does not hand the per-step loss to callbacks.

    In the dashboards: each time the Trainer logs (``logging_steps``), the callback adds the
    newest complete record (:func:`~empirical.training.norms.record_scalars`: total and per-layer
    norm, θᵀ∇L, θᵀδ, the cosine to the previous record, under ``prefix``) to the Trainer's
    ``logs``, so every integration in ``report_to`` (TensorBoard, W&B, MLflow, …) and
    ``state.log_history`` show it; ``<prefix>step`` is the record's step. At global step S that
    is the record of step S − 1 (θ before the S-th update, and that update) when ``every`` is 1. A
    record already logged is not logged again. Integrations read ``logs`` in the order of the
    Trainer's callbacks, so the callback moves itself ahead of the reporting integrations when
    the Trainer first calls it.

    Args:
        groups: parameter groups for :class:`NormTracker` (``None``: the default groups).
        every: record every ``every``-th optimizer step (starting with step 0).
        json_path: if given, the records are written there as JSON when training ends.
        log: add the records to the Trainer's logs (``False``: only :attr:`records`).
        prefix: the prefix of the logged names.
        probe: a :class:`~empirical.training.probe.SaturationProbe`, run at the end of each of its
            steps (global step S: after S updates); its scalars join the next logs.

    >>> NormCallback(every=2).records  # filled during ``Trainer.train()``; see docs/norms.md
    []
    """

    def __init__(
        self,
        groups: Mapping[str, Sequence[str]] | None = None,
        *,
        every: int = 1,
        json_path: str | Path | None = None,
        log: bool = True,
        prefix: str = PREFIX,
        probe: SaturationProbe | None = None,
    ) -> None:
        every = check_count(every, "every (record every so many steps)")
        if json_path is not None:  # refused now, not when training ends
            json_path = check_output(json_path, what="json_path")
        self.groups = groups
        self.every = every
        self.json_path = json_path
        self.log = log
        self.prefix = prefix
        self.tracker: NormTracker | None = None
        self._logged_step: int | None = None
        self.probe = probe
        self._probed: dict[str, float] = {}

    @property
    def records(self) -> list[dict[str, Any]]:
        """The records so far (empty before training starts)."""
        return self.tracker.records if self.tracker is not None else []

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        self._go_before_integrations()
        model = kwargs.get("model")
        if model is None:
            raise EmpiricalError("NormCallback expected the Trainer to pass its model to callbacks")
        self.tracker = NormTracker(model, self.groups)
        self._logged_step = None

    def on_init_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        self._go_before_integrations()

    def _go_before_integrations(self) -> None:
        """Move this callback ahead of the reporting integrations in the calling Trainer's list.

        The handler calling this event is found on the call stack (its ``call_event``); moving an
        element to an earlier index during its loop neither repeats nor skips a callback.
        """
        if not self.log:
            return
        frame = sys._getframe(1)
        while frame is not None and not isinstance(frame.f_locals.get("self"), CallbackHandler):
            frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return
        callbacks: list[Any] = frame.f_locals["self"].callbacks
        first = next((i for i, cb in enumerate(callbacks)
                      if type(cb).__module__.startswith("transformers.integrations")), None)
        mine = next((i for i, cb in enumerate(callbacks) if cb is self), None)
        if first is not None and mine is not None and first < mine:
            callbacks.insert(first, callbacks.pop(mine))

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:
        model = kwargs.get("model")
        if self.probe is not None and model is not None and self.probe.due(state.global_step):
            record = self.probe.measure(model, state.global_step)
            self._probed.update(probe_scalars(record, self.prefix))

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not self.log or logs is None or self.tracker is None:
            return
        scalars, self._probed = self._probed, {}
        complete = [r for r in self.tracker.records if r["update_projection"] is not None]
        if complete and complete[-1]["step"] != self._logged_step:
            record = complete[-1]
            self._logged_step = record["step"]
            scalars |= {f"{self.prefix}step": record["step"], **record_scalars(record, self.prefix)}
        if not scalars:
            return
        logs.update(scalars)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(scalars)  # the Trainer stored a copy before calling us

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
