"""The values a training run's architecture, optimizer and schedule may take, importing nothing heavy.

``normsat train`` and ``normsat grid`` list them in their help without loading torch;
:class:`empirical.training.runs.TrainConfig` checks a configuration against the same tuples.
"""

from __future__ import annotations

__all__ = ["ARCHITECTURES", "OPTIMIZERS", "SCHEDULES"]

ARCHITECTURES = ("post", "pre", "scale-invariant", "t5")
OPTIMIZERS = ("sgd", "adamw", "adafactor")
SCHEDULES = ("constant", "linear", "sqrt")
