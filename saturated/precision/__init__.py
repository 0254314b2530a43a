"""Decisions float64 cannot settle, made in ball arithmetic at rising precision.

The fast path (:mod:`saturated.interpreter`) decides in float32 and float64 against rigorous
rounding bounds; those bounds grow with depth (by about √n per linear layer of width n), and past
a few blocks they can exceed the coefficients they judge. The batch entries left undetermined are
run again here, by the same exported graph, on leading coefficients held as balls (a midpoint and
a rigorous radius) at 128, 256, 512, … bits up to a cap (``Settings.max_precision``). A ball is
float64 terms summing to its midpoint plus a radius, so that matrix products
(:mod:`~saturated.precision.products`) and elementwise ops (:mod:`~saturated.precision.expansions`)
run on whole float64 arrays; python-flint's ``arb`` serves the few scalars per row that need a
function (a norm's inverse square root, GELU of a fixed input) and the rows of scores that a
proved maximum does not settle. Each level runs only the entries the one before left undetermined; a
decision is made only where the balls prove it, and each one left records why
(:class:`~saturated.precision.interpreter.BallPass`).
"""

from saturated.precision.interpreter import BallPass, run_balls

__all__ = ["BallPass", "precisions", "run_balls"]

FIRST_PRECISION = 128
"""The first precision tried, in bits (float64 has 53)."""


def precisions(cap: int) -> list[int]:
    """The precisions tried, in bits: 128, 256, … up to ``cap`` (none for a cap below 128).

    >>> precisions(1000), precisions(64)
    ([128, 256, 512, 1000], [])
    """
    levels: list[int] = []
    bits = FIRST_PRECISION
    while bits <= cap:
        levels.append(bits)
        if bits == cap:
            break
        bits = min(2 * bits, cap)
    return levels
