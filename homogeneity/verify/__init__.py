"""Checks that a derived degree is right: numerically, by Euler's identity, formally, and each
rule against its proved lemma."""

from homogeneity.verify.euler import EulerCheck, check_euler
from homogeneity.verify.formal import SYMBOLIC_OPS, FormalProof, prove
from homogeneity.verify.lemmas import LemmaResult, check_lemmas, lemma_rows, lemma_targets
from homogeneity.verify.scaling import (
    DEFAULT_SCALES,
    ScalingCheck,
    check_scaling,
    classify_decay,
    scaled_outputs,
)

__all__ = [
    "DEFAULT_SCALES",
    "SYMBOLIC_OPS",
    "EulerCheck",
    "FormalProof",
    "LemmaResult",
    "ScalingCheck",
    "check_euler",
    "check_lemmas",
    "check_scaling",
    "classify_decay",
    "lemma_rows",
    "lemma_targets",
    "prove",
    "scaled_outputs",
]
