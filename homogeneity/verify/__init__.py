"""Checks that a derived degree is right: numerically, by Euler's identity, and formally."""

from homogeneity.verify.euler import EulerCheck, check_euler
from homogeneity.verify.formal import SYMBOLIC_OPS, FormalProof, prove
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
    "ScalingCheck",
    "check_euler",
    "check_scaling",
    "classify_decay",
    "prove",
    "scaled_outputs",
]
