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

import math

from saturated.precision.interpreter import BallPass, run_balls

__all__ = ["FIRST_PRECISION", "BallPass", "next_precision", "precisions", "run_balls"]

FIRST_PRECISION = 128
"""The first precision tried, in bits (float64 has 53)."""

_SPARE = 32
"""Bits beyond what a given-up pass's loss says the whole graph needs."""


def precisions(cap: int) -> list[int]:
    """The precisions tried when every pass runs to its end, in bits: 128, 256, … up to ``cap``
    (none for a cap below 128).

    >>> precisions(1000), precisions(64)
    ([128, 256, 512, 1000], [])
    """
    levels: list[int] = []
    bits: int | None = FIRST_PRECISION if cap >= FIRST_PRECISION else None
    while bits is not None:
        levels.append(bits)
        bits = next_precision(bits, cap)
    return levels


def next_precision(bits: int, cap: int, reached: float | None = None, needed: float | None = None
                   ) -> int | None:
    """The precision after a pass at ``bits`` (None past the cap), rounded up to 32 bits:

    * for a pass given up on its own loss (:mod:`~saturated.precision.loss`), the bits ``needed``
      that loss says the whole graph needs, and a few more for the last decisions' margins;
    * for a pass given up a share ``reached`` of the way through the graph by a decision it could
      not make: a ball's radius grows by about the same number of bits per layer at any precision
      (a linear layer's |W|·r), so a pass that lost its ``bits`` over that share needs about
      ``bits / reached``, and a few more; at least half as many again (a pass given up near the
      end may have lost only part of its bits);
    * otherwise twice as many.

    >>> next_precision(128, 1024), next_precision(128, 1024, 0.8), next_precision(128, 1024, 0.4)
    (256, 192, 352)
    >>> next_precision(1024, 1024), next_precision(512, 600, 0.1), next_precision(128, 1024, 0.3, 150.0)
    (None, 600, 192)
    """
    if bits >= cap:
        return None
    if needed is not None:
        wanted = max(needed + _SPARE, bits + 1)
    elif reached is not None:
        wanted = max(bits / max(reached, 1 / 64) + _SPARE, 1.5 * bits)
    else:
        wanted = 2 * bits
    return min(cap, 32 * math.ceil(wanted / 32))
