"""The values a training run's architecture, optimizer and schedule may take, and the name of its
resume file, importing nothing heavy.

``normsat train`` and ``normsat grid`` list them in their help without loading torch;
:class:`empirical.training.runs.TrainConfig` checks a configuration against the same tuples.
"""

from __future__ import annotations

__all__ = ["ARCHITECTURES", "ARCHITECTURE_HELP", "OPTIMIZERS", "OPTIMIZER_HELP", "RESUME_FILE", "SCHEDULES",
           "SCHEDULE_HELP", "choices_help"]

ARCHITECTURE_HELP = {
    "post": "a BERT decoder (post-LN)",
    "pre": "GPT-2 (pre-LN)",
    "scale-invariant": "a bias-free 0-homogeneous LM",
    "t5": "T5's decoder (RMSNorm, no biases, relative positions)",
}
OPTIMIZER_HELP = {"sgd": "SGD (weight decay as an L2 term)", "adamw": "AdamW",
                  "adafactor": "Adafactor (T5's)"}
SCHEDULE_HELP = {"constant": "the lr throughout", "linear": "linear decay to 0", "sqrt": "lr/√t"}
"""What each choice is, for ``--help``: listed in the order of the tuples below, which they define."""
ARCHITECTURES = tuple(ARCHITECTURE_HELP)
OPTIMIZERS = tuple(OPTIMIZER_HELP)
SCHEDULES = tuple(SCHEDULE_HELP)
RESUME_FILE = "resume.safetensors"
"""What an unfinished run keeps beside its checkpoints to continue from (optimizer, schedule, batches)."""


def choices_help(described: dict[str, str], default: str) -> str:
    """``--help`` text naming every choice with its description, in one order.

    >>> choices_help({"a": "first", "b": "second"}, "b")
    'a: first; b: second (default: b)'
    """
    return "; ".join(f"{name}: {what}" for name, what in described.items()) + f" (default: {default})"
