"""The exact saturated (c → ∞) limit of traced networks, and saturated reference networks.

Certified saturation bounds and scales are in :mod:`saturated.bounds`; the limits as plain tensor
functions in :mod:`saturated.functional`; the rule table's families in :mod:`saturated.rules`.
"""

from saturated.compare import LayerComparison, compare_layers
from saturated.errors import SaturationError
from saturated.functional import hard_attention, hardmax
from saturated.modules import HardAttention, majority_head, previous_token_head
from saturated.rules import RULES, Settings, register_rule
from saturated.saturate import SaturatedModel, SaturatedOutput, saturate

__all__ = [
    "RULES",
    "HardAttention",
    "LayerComparison",
    "SaturatedModel",
    "SaturatedOutput",
    "SaturationError",
    "Settings",
    "compare_layers",
    "hard_attention",
    "hardmax",
    "majority_head",
    "previous_token_head",
    "register_rule",
    "saturate",
]
