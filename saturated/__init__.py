"""The exact saturated (c → ∞) limit of traced networks, and saturated reference networks."""

from saturated.compare import LayerComparison, compare_layers
from saturated.errors import SaturationError
from saturated.functional import hard_attention, hardmax, relu_limit, sign, step
from saturated.modules import HardAttention, majority_head, previous_token_head
from saturated.rules import RULES, Settings, register_rule
from saturated.saturate import SaturatedModel, SaturatedOutput, saturate
from saturated.terms import Term

__all__ = [
    "RULES",
    "HardAttention",
    "LayerComparison",
    "SaturatedModel",
    "SaturatedOutput",
    "SaturationError",
    "Settings",
    "Term",
    "compare_layers",
    "hard_attention",
    "hardmax",
    "majority_head",
    "previous_token_head",
    "register_rule",
    "relu_limit",
    "saturate",
    "sign",
    "step",
]
