"""The exact saturated (c → ∞) limit of traced networks, and saturated reference networks."""

from saturated.bounds import certify_bound, format_thresholds, scale_to_saturate, scale_to_saturate_map
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
    "certify_bound",
    "compare_layers",
    "format_thresholds",
    "hard_attention",
    "hardmax",
    "majority_head",
    "previous_token_head",
    "register_rule",
    "relu_limit",
    "saturate",
    "scale_to_saturate",
    "scale_to_saturate_map",
    "sign",
    "step",
]
