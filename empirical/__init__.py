"""Measurements on real transformers: saturation similarity, models, corpora, training, reports.

The names below are imported on first use, so ``import empirical`` stays fast: each loads the
sub-package it lives in (``models``, ``measure``, ``training``) only when it is asked for.

>>> import empirical
>>> sorted(empirical.__all__) == sorted(dir(empirical))
True
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from empirical.errors import EmpiricalError
    from empirical.measure.heads import HeadAtlas, head_atlas
    from empirical.measure.similarity import SimilarityResult, representation_similarity
    from empirical.models.builtin import MODEL_NAMES
    from empirical.models.corpus import Corpus, load_corpus
    from empirical.models.loading import load_model
    from empirical.training.callbacks import NormCallback
    from empirical.training.checkpoints import scan_checkpoints
    from empirical.training.norms import NormTracker
    from empirical.training.runs import TrainConfig, train

__all__ = [
    "MODEL_NAMES",
    "Corpus",
    "EmpiricalError",
    "HeadAtlas",
    "NormCallback",
    "NormTracker",
    "SimilarityResult",
    "TrainConfig",
    "head_atlas",
    "load_corpus",
    "load_model",
    "representation_similarity",
    "scan_checkpoints",
    "train",
]

_WHERE = {
    "MODEL_NAMES": "empirical.models.builtin",
    "Corpus": "empirical.models.corpus",
    "EmpiricalError": "empirical.errors",
    "HeadAtlas": "empirical.measure.heads",
    "NormCallback": "empirical.training.callbacks",
    "NormTracker": "empirical.training.norms",
    "SimilarityResult": "empirical.measure.similarity",
    "TrainConfig": "empirical.training.runs",
    "head_atlas": "empirical.measure.heads",
    "load_corpus": "empirical.models.corpus",
    "load_model": "empirical.models.loading",
    "representation_similarity": "empirical.measure.similarity",
    "scan_checkpoints": "empirical.training.checkpoints",
    "train": "empirical.training.runs",
}


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use (PEP 562)."""
    if name not in _WHERE:
        raise AttributeError(f"module 'empirical' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return list(__all__)
