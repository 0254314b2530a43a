"""The value a tensor takes in the refinement: its leading coefficient in c as balls.

A :class:`Lead` stands for v(c) = a·c^d + o(c^d), per element, with a an exact real number
enclosed in a ball (float64 terms and a radius, :mod:`~saturated.precision.expansions`, or a
python-flint ``arb`` where an op needed one): the leading order of :class:`~saturated.terms.Term`
(``orders=1``). A coefficient that is exactly 0 says only that the element is o(c^d). Masking
constants (the −3.4·10³⁸ models add to attention scores) are a sign per element of a part of
degree +∞, as in :func:`saturated.terms.lift`.

Values that only move (parameters, embedding rows, their reshapes) stay float tensors, exact by
construction, until arithmetic needs them as balls: a vocabulary table is never converted whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from saturated.precision.balls import balls_of
from saturated.precision.identity import of_values
from saturated.precision.products import balls_of_split, split

__all__ = ["Lead", "lift_exact"]


@dataclass
class Lead:
    """a·c^degree + o(c^degree) per element (see the module docstring).

    Attributes:
        degree: d.
        exact: the coefficients as a float64 tensor when they are floats exactly (None otherwise).
        array: the coefficients as a numpy object array of ``arb`` balls, for the ops that need
            them (made from ``exact`` or ``split`` on demand).
        infinite: per element, the sign of a part of degree +∞ (a masking constant), or None.
        ids: per element, a class: two elements with one class are equal at every order
            (:mod:`saturated.precision.identity`); None where no equality is known.
        lead_ids: classes of the leading coefficients alone, where they say more than ``ids``
            (after a sum whose lower-degree side is dropped from the lead).
        lower: the next part below the lead, kept by sums and moves so that hard attention can
            split a tie at the leading order (a position bias under growing scores); None
            where it is not tracked.
        above: with ``lower``, the classes of everything above it (the sum's higher-degree
            operand): where two elements share one, they differ by their lower parts alone.
        zeros: where the elements are zero at every order (hard-attention weights off their
            maximum), or None; a matrix product's classes skip those terms.
        split: the coefficients as float64 terms and a radius
            (:mod:`~saturated.precision.expansions`), the form ops compute in.
        ties: hard-attention weights only: where a row's weight is split over positions whose
            scores are equal at the leading order in a way no tracked order decides (the
            coefficients hold an even split); a product with values that are equal at those
            positions has a known lead, any other use is undetermined.
    """

    degree: float
    exact: Tensor | None = None
    array: np.ndarray | None = None
    infinite: Tensor | None = None
    ids: np.ndarray | None = None
    lead_ids: np.ndarray | None = None
    lower: Lead | None = None
    above: np.ndarray | None = None
    zeros: np.ndarray | None = None
    ties: np.ndarray | None = None
    split: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        if self.exact is not None:
            return tuple(self.exact.shape)
        if self.array is None:
            assert self.split is not None
            return tuple(self.split.shape[1:])
        return tuple(self.array.shape)

    @property
    def classes(self) -> np.ndarray | None:
        """The elements' classes (from the exact values where known), or None."""
        if self.ids is None and self.exact is not None:
            self.ids = of_values(self.exact)
        return self.ids

    @property
    def lead_classes(self) -> np.ndarray | None:
        """Classes of the leading coefficients (equal at every order implies equal leads)."""
        return self.lead_ids if self.lead_ids is not None else self.classes

    @property
    def balls(self) -> np.ndarray:
        """The coefficients as balls."""
        if self.array is None:
            if self.exact is not None:
                self.array = balls_of(self.exact)
            else:
                assert self.split is not None
                self.array = balls_of_split(self.split)
        return self.array

    def operand(self, bits: int) -> np.ndarray:
        """The coefficients as float64 terms and a radius for a matrix product (a product's own
        result, exact floats, or the balls split)."""
        if self.exact is not None:
            return split(self.exact.numpy(), bits)
        if self.array is None and self.split is not None:
            return self.split
        return split(self.balls, bits)


def lift_exact(value: Tensor | float | int | bool, mask_threshold: float) -> Lead:
    """A value that does not depend on c, as a lead of degree 0; entries at least
    ``mask_threshold`` in magnitude become a part of degree +∞ (see :func:`saturated.terms.lift`).

    >>> lift_exact(torch.tensor([1.0, -3e38]), 1e9).infinite.tolist()
    [0, -1]
    """
    tensor = value if isinstance(value, Tensor) else torch.tensor(float(value))
    tensor = tensor.detach().to(torch.float64)
    huge = tensor.abs() >= mask_threshold
    if not bool(huge.any()):
        return Lead(0.0, exact=tensor)
    return Lead(0.0, exact=torch.where(huge, 0.0, tensor),
                infinite=torch.sign(tensor).where(huge, 0).to(torch.int8))
