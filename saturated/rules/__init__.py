"""The limit rules, one family of ops per module; importing this package registers every rule.

Where a new rule goes: an op that only moves or casts entries in :mod:`~saturated.rules.shape`,
sums and elementwise products in :mod:`~saturated.rules.elementwise`, linear maps in
:mod:`~saturated.rules.products`, selections in :mod:`~saturated.rules.selection`, elementwise
nonlinearities in :mod:`~saturated.rules.activations`, softmax in :mod:`~saturated.rules.softmax`,
top-k, sorting, arg-extrema and scatters of routers in :mod:`~saturated.rules.routing`, reductions
and normalizations in :mod:`~saturated.rules.normalization`; helpers more than one family uses in
:mod:`~saturated.rules.common`. Users add rules with :func:`register_rule`.
"""

from saturated.rules import (
    activations,
    elementwise,
    normalization,
    products,
    routing,
    selection,
    shape,
    softmax,
)
from saturated.rules.registry import RULES, TIE_AWARE, UNKNOWN_DEGREE_AWARE, Rule, Settings, register_rule

__all__ = ["FAMILIES", "RULES", "TIE_AWARE", "UNKNOWN_DEGREE_AWARE", "Rule", "Settings", "register_rule"]

FAMILIES = (shape, elementwise, products, selection, activations, softmax, routing, normalization)
"""The rule modules, one family of ops each; importing them is what fills :data:`RULES`."""
