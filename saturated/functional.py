"""Limit functions: what softmax, sigmoid, tanh, GELU and SiLU become as their input grows without bound.

For an input x of positive degree in c (value ≈ a·cᵈ with d > 0), these are the limits of the
ordinary functions evaluated at c·x, c → ∞:

* softmax(c·x) → :func:`hardmax` (uniform over the maximal positions),
* sigmoid(c·x) → :func:`step`, tanh(c·x) → :func:`sign`,
* GELU(c·x)/c and SiLU(c·x)/c → ReLU(x) (:func:`relu_limit`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from homogeneity.validation import describe
from saturated.errors import SaturationError
from saturated.validation import check_dim, check_operands, check_rtol, check_scores

__all__ = ["default_rtol", "hard_attention", "hardmax", "relu_limit", "sign", "step", "tie_set"]


def default_rtol(dtype: torch.dtype) -> float:
    """The default tie tolerance of :func:`hardmax`: 64 units of rounding of ``dtype``.

    Scores that are mathematically equal but computed in different orders (e.g. in a padded batch
    and one sentence at a time) differ by a few units of rounding; 64 covers that for dot products
    of the sizes found in transformers, and is still far below any margin a trained head relies on.

    >>> default_rtol(torch.float64) < 1e-13 < default_rtol(torch.float32) < 1e-5
    True
    """
    return 64 * torch.finfo(dtype if dtype.is_floating_point else torch.float32).eps


def _check_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    """The mask as given (it may be smaller than the scores and broadcast); all True if None."""
    if mask is None:
        return torch.ones((), dtype=torch.bool, device=scores.device)
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
        got = f"dtype {mask.dtype}" if isinstance(mask, Tensor) else describe(mask)
        raise SaturationError(f"expected a boolean mask (True where attention is allowed), got {got}")
    if mask.device != scores.device:
        raise SaturationError(f"expected the mask on the scores' device {scores.device}, got {mask.device}")
    try:
        fits = torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape
    except RuntimeError:
        fits = False
    if not fits:
        raise SaturationError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to scores of shape "
            f"{tuple(scores.shape)}"
        )
    return mask


def tie_set(scores: Tensor, dim: int = -1, mask: Tensor | None = None,
            rtol: float | None = None, nan_rows_empty: bool = False,
            bound: Tensor | None = None) -> Tensor:
    """Boolean tensor of the allowed positions whose score is maximal within the tie tolerance.

    A position j is tied with the row maximum m when ``scores[j] >= m - rtol * s`` where s is the
    largest absolute allowed score of the row (so ties are judged relative to the row's scale, and
    exactly equal scores tie even when they are all zero). Fully masked rows have no position,
    and neither have rows whose allowed scores are all −∞ (−∞ is how a score is masked);
    so have rows with a NaN score at an allowed position if ``nan_rows_empty``, which otherwise
    raises.

    With ``bound`` (an absolute bound on each score's rounding error, broadcasting to the scores)
    the set is every position that may hold the exact maximum: scores[j] + bound[j] ≥
    maxᵢ(scores[i] − bound[i]); ``rtol`` then widens it only if given.

    >>> tie_set(torch.tensor([2.0, 1.9, 1.0]), bound=torch.tensor([0.1, 0.1, 0.1])).tolist()
    [True, True, False]

    >>> tie_set(torch.tensor([2.0, 1.0, 2.0])).tolist()
    [True, False, True]
    """
    check_scores(scores)
    check_dim(dim, scores)
    rtol = check_rtol(rtol)
    allowed = _check_mask(scores, mask)
    if scores.shape[dim] == 0:  # rows without positions: nothing is maximal
        return torch.zeros(scores.shape, dtype=torch.bool, device=scores.device)
    finite = scores.is_floating_point() and math.isfinite(float(scores.sum()))
    if not (finite or nan_rows_empty) and bool((torch.isnan(scores) & allowed).any()):
        raise SaturationError("hardmax received NaN scores at allowed positions")
    tol = (0.0 if bound is not None else default_rtol(scores.dtype)) if rtol is None else rtol
    if bound is not None:
        bound = bound.to(scores.dtype)
        scores_low, scores = scores - bound, scores + bound
    if finite:
        # Masked positions pushed to ∓∞ by adding a (small, broadcast) tensor: a third of the
        # cost of where() on attention-sized scores.
        block = torch.zeros(allowed.shape, dtype=scores.dtype, device=scores.device).masked_fill(
            ~allowed, math.inf)
        high_side, low_side = scores - block, scores + block
        top = (high_side if bound is None else scores_low - block).amax(dim=dim, keepdim=True)
    else:
        low = torch.finfo(scores.dtype).min if scores.dtype.is_floating_point else -(2**62)
        top = torch.where(allowed, scores if bound is None else scores_low, low).amax(dim=dim, keepdim=True)
    # A NaN allowed score makes top NaN, and every comparison with it false.
    threshold = top
    if tol:
        if finite:
            scale = torch.maximum(top.abs(), low_side.amin(dim=dim, keepdim=True).abs())  # largest |allowed|
        else:  # infinite scores are compared exactly; the tolerance follows the finite ones
            scale = torch.where(allowed & scores.isfinite(), scores.abs(), 0).amax(dim=dim, keepdim=True)
        threshold = torch.where(top.isinf(), top, top - tol * scale)
    if finite:  # a fully masked row (top = −∞) has no position
        return high_side >= threshold.masked_fill(top == -math.inf, math.inf)
    # A row whose allowed scores are all −∞ is masked by its scores: no position either.
    return allowed & (scores >= threshold) & (top > -math.inf)


def hardmax(scores: Tensor, dim: int = -1, mask: Tensor | None = None,
            rtol: float | None = None) -> Tensor:
    """The limit of softmax(c·scores) as c → ∞: uniform weight on the maximal positions.

    Args:
        scores: attention scores (any floating dtype).
        dim: the dimension normalized over.
        mask: boolean, True where attention is allowed (the convention of PyTorch's
            ``scaled_dot_product_attention``); masked positions never receive weight.
        rtol: tie tolerance relative to the row's largest absolute score, a finite number ≥ 0
            (default :func:`default_rtol`); ``0`` ties only exactly equal scores.

    Returns:
        Weights of the same shape, summing to 1 along ``dim``. A fully masked row, by ``mask`` or
        by scores that are all −∞, is all zeros: the exact limit's convention for a query that
        may attend nowhere (softmax itself would be NaN there).

    Raises:
        SaturationError: scores that are not a real tensor, a ``dim`` it does not have, a
            negative, NaN or infinite ``rtol``, NaN scores at allowed positions, or a mask that is
            not boolean or does not broadcast to the scores.

    >>> hardmax(torch.tensor([1.0, 3.0, 3.0, -2.0]))
    tensor([0.0000, 0.5000, 0.5000, 0.0000])
    >>> hardmax(torch.tensor([[1.0, 3.0], [2.0, 5.0]]), mask=torch.tensor([[True, False], [False, False]]))
    tensor([[1., 0.],
            [0., 0.]])
    >>> hardmax(torch.tensor([-math.inf, -math.inf]))
    tensor([0., 0.])
    """
    tied = tie_set(scores, dim, mask, rtol).to(scores.dtype if scores.is_floating_point()
                                              else torch.float32)
    count = tied.sum(dim=dim, keepdim=True)
    return tied / count.clamp_min(1)


def hard_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                   rtol: float | None = None) -> Tensor:
    """Saturated dot-product attention: ``hardmax(q kᵀ) v`` (the 1/√d factor cannot change an argmax).

    Args:
        q: queries ``(..., n, d)``.
        k: keys ``(..., m, d)``.
        v: values ``(..., m, e)``.
        mask: boolean ``(..., n, m)``, True where query i may attend to key j.
        rtol: tie tolerance of :func:`hardmax`.

    Returns:
        ``(..., n, e)``: each query's average of the values at its maximal keys (zeros for a query
        that may attend nowhere).

    >>> q = torch.tensor([[1.0, 0.0]])
    >>> k = torch.tensor([[2.0, 0.0], [2.0, 5.0], [-1.0, 0.0]])
    >>> v = torch.tensor([[1.0], [3.0], [10.0]])
    >>> hard_attention(q, k, v)
    tensor([[2.]])
    """
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        check_scores(tensor, name)
    check_operands(q=q, k=k, v=v)
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2 or q.shape[-1] != k.shape[-1] \
            or k.shape[-2] != v.shape[-2]:
        raise SaturationError(
            f"expected q (..., n, d), k (..., m, d) and v (..., m, e), got shapes {tuple(q.shape)}, "
            f"{tuple(k.shape)} and {tuple(v.shape)}")
    return hardmax(q @ k.transpose(-2, -1), mask=mask, rtol=rtol) @ v


def step(x: Tensor) -> Tensor:
    """The limit of sigmoid(c·x): 1 where x > 0, 0 where x < 0; undefined at 0.

    Raises:
        SaturationError: some entry is exactly 0, where sigmoid(c·0) = 1/2 for every c but any
            perturbation of lower order decides the limit.

    >>> step(torch.tensor([-2.0, 0.5]))
    tensor([0., 1.])
    """
    if (x == 0).any():
        raise SaturationError("step (the limit of sigmoid) is not determined at 0")
    return (x > 0).to(x.dtype)


def sign(x: Tensor) -> Tensor:
    """The limit of tanh(c·x): ±1 by the sign of x; undefined at 0 (see :func:`step`).

    >>> sign(torch.tensor([-2.0, 0.5]))
    tensor([-1.,  1.])
    """
    if (x == 0).any():
        raise SaturationError("sign (the limit of tanh) is not determined at 0")
    return torch.sign(x)


def relu_limit(x: Tensor) -> Tensor:
    """The limit of GELU(c·x)/c and of SiLU(c·x)/c: ReLU(x), exactly (GELU(y) − ReLU(y) → 0).

    >>> relu_limit(torch.tensor([-2.0, 0.5]))
    tensor([0.0000, 0.5000])
    """
    return torch.relu(x)
