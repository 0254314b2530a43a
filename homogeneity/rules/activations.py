"""Rules for the transformer's nonlinearities: softmax, attention, GELU (Appendix A.3)."""

from __future__ import annotations

from typing import Any

import torch

from homogeneity.degree import Degree
from homogeneity.rules.common import as_degree, first_undefined, function_of, product, sum_of
from homogeneity.rules.registry import rule

__all__: list[str] = []

aten = torch.ops.aten


@rule(aten.softmax.int, aten._softmax.default, aten._safe_softmax.default)
def softmax(x: Degree, dim: Any, *dtype: Any) -> Degree:
    """softmax(cᵏz) − softmax(z) ≤ exp(−Θ(‖z‖)) (Lemma 7, Theorem 5): approximate 0 for k ≠ 0.

    Scores cᵏz plus lower-order terms (biases, a fixed additive mask) still saturate
    exponentially on the argmax of z, so asymptotic inputs give approximate outputs too.
    """
    return function_of(x, "softmax", limit="constant")


@rule(aten.log_softmax.int, aten._log_softmax.default, aten.logsumexp.default)
def log_softmax(x: Degree, dim: Any, *options: Any) -> Degree:
    """log softmax(cᵏz) = cᵏ(z − max z) − log Σ exp(cᵏ(z − max z)) and logsumexp(cᵏz) =
    cᵏ max z + log Σ exp(cᵏ(z − max z)): with a unique maximum the log term vanishes
    exponentially fast, so the degree is k, approximate (k ≠ 0)."""

    return function_of(x, "log-softmax/logsumexp", limit="linear")


@rule(aten.gelu.default, aten.silu.default)
def gelu(x: Degree, *, approximate: str = "none") -> Degree:
    """GELU(z) = z·Φ(z) and SiLU(z) = z·σ(z) are approximately ReLU: degree k, approximate (k ≠ 0).

    |z·Φ(cz) − z·1[z > 0]| ≤ |z|·exp(−c²z²/2) (and z·σ(cz) likewise), exponentially small;
    with ReLU's degree k kept (Lemma 2). A scale-invariant input stays scale-invariant.
    """

    return function_of(x, "GELU/SiLU", limit="linear")


@rule(aten.scaled_dot_product_attention.default)
def scaled_dot_product_attention(
    query: Degree, key: Degree, value: Degree, attn_mask: Any = None, dropout_p: Any = 0.0,
    is_causal: Any = False, *, scale: Any = None, enable_gqa: Any = False,
) -> Degree:
    """softmax(QKᵀ·s + M)·V: the scores' softmax is approximately 0-homogeneous (Theorem 6),
    so the output has V's degree; an additive mask M is a lower-order term inside the softmax."""
    mask = as_degree(attn_mask)
    undefined = first_undefined([query, key, value, mask])
    if undefined is not None:
        return undefined
    scores = sum_of(product(query, key, what="attention scores"), attn_mask, what="masked scores")
    return product(softmax(scores, -1), value, what="attention-weighted values")
