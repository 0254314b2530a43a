"""The values a training run's architecture, optimizer and schedule may take, and the name of its
resume file, importing nothing heavy.

``normsat train`` and ``normsat grid`` list them in their help without loading torch;
:class:`empirical.training.runs.TrainConfig` checks a configuration against the same tuples.
"""

from __future__ import annotations

__all__ = ["ARCHITECTURES", "OPTIMIZERS", "RESUME_FILE", "SCHEDULES"]

ARCHITECTURES = ("post", "pre", "scale-invariant", "t5")
OPTIMIZERS = ("sgd", "adamw", "adafactor")
SCHEDULES = ("constant", "linear", "sqrt")
RESUME_FILE = "resume.safetensors"
"""What an unfinished run keeps beside its checkpoints to continue from (optimizer, schedule, batches)."""
