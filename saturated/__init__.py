"""The exact saturated (c → ∞) limit of traced networks."""

from saturated.errors import SaturationError

__all__ = ["SaturationError"]
