"""The claim API and hypothesis strategies for users' tests; imports empirical.measure and models."""

from empirical.claims.api import (
    PROFILE,
    assert_homogeneous,
    assert_matches,
    assert_saturated,
    model_batch,
    profile,
    register_profile,
    scales,
    sentences,
    special_tokens,
    token_sequences,
)

__all__ = [
    "PROFILE",
    "assert_homogeneous",
    "assert_matches",
    "assert_saturated",
    "model_batch",
    "profile",
    "register_profile",
    "scales",
    "sentences",
    "special_tokens",
    "token_sequences",
]
