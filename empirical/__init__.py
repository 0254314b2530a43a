"""Measurements on real transformers: saturation similarity, models, corpora, reports."""

from empirical.corpus import Corpus, load_corpus
from empirical.errors import EmpiricalError
from empirical.heads import HeadAtlas, head_atlas
from empirical.models import MODEL_NAMES, load_model
from empirical.similarity import SimilarityResult, representation_similarity

__all__ = [
    "MODEL_NAMES",
    "Corpus",
    "EmpiricalError",
    "HeadAtlas",
    "SimilarityResult",
    "head_atlas",
    "load_corpus",
    "load_model",
    "representation_similarity",
]
