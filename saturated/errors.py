"""The exception every error of the saturated package derives from."""


class SaturationError(Exception):
    """A limit that cannot be computed, or is not determined, for a given model or input.

    Messages say what was expected, what arrived, and where (node, op, module path).
    """
