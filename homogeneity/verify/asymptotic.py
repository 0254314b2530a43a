"""Dominant-term proofs of a limit in c and of how fast the rest vanishes, with exact numbers.

An expression g(c) built from exact numbers, the positive symbol c, sums, products, powers,
``exp``, ``tanh``, ``erf`` and ``|·|`` is split into a *main part* P(c), algebraic in c, and an
exponentially small rest: |g(c) − P(c)| ≤ K·exp(−r·c) for every large c, with an exact rational
rate r (``None``: g(c) = P(c) for every large c). The main part is carried as a Puiseux series
in t = 1/c with exact coefficients and an exact truncation order, so the limit of g and the
leading term of g − lim g are read off its coefficients. Each step is a one-line inequality:

* a saturating argument u(c) = a·cᵐ + o(cᵐ) with m ≥ 1 satisfies |u| ≥ |a|·c/2 once c ≥ 1 is
  large, so tanh(u) = sign(a) + O(exp(−|a|·c)), erf(u) = sign(a) + O(exp(−a²·c/4)) (also for
  m ≥ 1/2), and exp(u) = O(exp(−|a|·c/2)) when a < 0;
* 1/(Σ exp(vⱼ) + positive numbers) ≤ exp(−vᵢ) = O(exp(−a·c/2)) when some vᵢ = a·cᵐ + … with
  a > 0, m ≥ 1 (softmax and sigmoid written as 1/Σ exp(zⱼ − zᵢ) and 1/(1 + exp(−z)));
* |u| = sign(a)·u once c is large, for u's leading coefficient a ≠ 0;
* sums keep the smaller rate; products, powers and quotients of parts bounded by powers of c
  halve it (a power of c times exp(−r·c) is below exp(−r·c/2) for large c).

Anything else (an argument that stays bounded but is not constant, exp of a growing argument, a
coefficient whose sign or zero-ness sympy cannot decide) raises :class:`Undecided` with the
reason: the proof then claims nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import sympy

__all__ = ["PRECISION", "Approximation", "Series", "Undecided", "approximate"]

C = sympy.Symbol("c", positive=True)

PRECISION = Fraction(6)
"""How many powers of 1/c below the leading term a truncated series keeps."""


class Undecided(Exception):
    """The dominant-term argument does not apply; the message says where and why."""


def _nonzero(value: sympy.Expr) -> bool:
    """Whether an exact coefficient is nonzero, decided by sympy or refused."""
    value = sympy.expand(value)
    if value == 0:
        return False
    decided = value.is_zero
    if decided is None:
        raise Undecided(f"sympy cannot decide whether the coefficient {value} is 0")
    return not decided


def _sign(value: sympy.Expr) -> int:
    if value.is_positive:
        return 1
    if value.is_negative:
        return -1
    raise Undecided(f"sympy cannot decide the sign of {value}")


@dataclass(frozen=True)
class Series:
    """Σ coefficient·t^exponent + O(t^order) in t = 1/c (``order`` ``None``: no rest at all).

    Terms are sorted by exponent, each coefficient exact and nonzero, each exponent below
    ``order``.

    >>> s = Series.of(C + 1) * Series.of(C - 1)      # c² − 1
    >>> [(str(e), v) for e, v in s.terms], s.order
    ([('-2', 1), ('0', -1)], None)
    >>> r = s.power(Fraction(-1, 2))                 # 1/√(c² − 1) = t + t³/2 + …
    >>> [(str(e), v) for e, v in r.terms][:2], str(r.order)
    ([('1', 1), ('3', 1/2)], '7')
    """

    terms: tuple[tuple[Fraction, sympy.Expr], ...]
    order: Fraction | None = None

    @classmethod
    def make(cls, pairs: Iterable[tuple[Fraction, sympy.Expr]], order: Fraction | None) -> Series:
        summed: dict[Fraction, sympy.Expr] = {}
        for exponent, value in pairs:
            if order is None or exponent < order:
                summed[exponent] = summed.get(exponent, sympy.Integer(0)) + value
        return cls(tuple((e, sympy.expand(v)) for e, v in sorted(summed.items()) if _nonzero(v)),
                   order)

    @classmethod
    def of(cls, expr: Any) -> Series:
        """An exact polynomial in c (or a number) as a series."""
        poly = sympy.Poly(expr, C)
        return cls.make(((Fraction(-m[0]), v) for m, v in poly.terms()), None)

    @property
    def zero(self) -> bool:
        """Exactly zero (no term and no rest)."""
        return not self.terms and self.order is None

    @property
    def valuation(self) -> Fraction:
        """The exponent of the first term (the order, when there is none): the series is
        O(t^valuation)."""
        if self.terms:
            return self.terms[0][0]
        assert self.order is not None, "an exact zero has no valuation"
        return self.order

    def lead(self) -> tuple[sympy.Expr, Fraction]:
        """The leading coefficient a and power m of c: the series is a·cᵐ·(1 + o(1))."""
        if not self.terms:
            raise Undecided("a main part vanishes to the expansion's precision: its leading term "
                            "is out of reach" if self.order is not None else
                            "a main part is exactly 0 where its leading term is needed")
        exponent, value = self.terms[0]
        return value, -exponent

    def __add__(self, other: Series) -> Series:
        order = _min(self.order, other.order)
        return Series.make([*self.terms, *other.terms], order)

    def __mul__(self, other: Series) -> Series:
        if self.zero or other.zero:
            return Series(())
        orders = []
        if self.order is not None:
            orders.append(self.order + other.valuation)
        if other.order is not None:
            orders.append(other.order + self.valuation)
        order = min(orders) if orders else None
        return Series.make(((e1 + e2, v1 * v2) for e1, v1 in self.terms for e2, v2 in other.terms),
                           order)

    def power(self, n: Fraction) -> Series:
        """The series of main^n: a·t^v·(1 + u) raised to n by the binomial series in u."""
        if n.denominator == 1 and n >= 0:
            out = Series.make([(Fraction(0), sympy.Integer(1))], None)
            for _ in range(int(n)):
                out = out * self
            return out
        value, power = self.lead()
        if n.denominator != 1 and _sign(value) < 0:
            raise Undecided(f"a fractional power {n} of a part with negative leading coefficient")
        v = -power
        scale = Series(((v * n, sympy.Pow(value, sympy.Rational(n.numerator, n.denominator))),))
        rest = Series.make(((e - v, c / value) for e, c in self.terms[1:]),
                           None if self.order is None else self.order - v)
        if rest.zero:
            return scale
        gap = rest.terms[0][0] if rest.terms else rest.order
        assert gap is not None and gap > 0
        keep = PRECISION if rest.order is None else min(PRECISION, rest.order)
        total = Series.make([(Fraction(0), sympy.Integer(1))], keep)
        term = Series.make([(Fraction(0), sympy.Integer(1))], keep)
        coefficient = sympy.Integer(1)
        rational_n = sympy.Rational(n.numerator, n.denominator)
        for j in range(1, int(keep / gap) + 1):
            coefficient = coefficient * (rational_n - j + 1) / j
            term = Series.make(term.terms, keep) * rest
            term = Series.make(term.terms, _min(term.order, keep))
            total = total + Series.make(((e, coefficient * c) for e, c in term.terms), term.order)
        return scale * Series.make(total.terms, keep)


def _min(a: Fraction | None, b: Fraction | None) -> Fraction | None:
    return b if a is None else a if b is None else min(a, b)


def _rate(*rates: Any) -> sympy.Rational | None:
    """The smaller of some rates (``None``, no rest, is larger than any)."""
    given = [r for r in rates if r is not None]
    return min(given) if given else None


@dataclass(frozen=True)
class Approximation:
    """g(c) = main(c) + O(exp(−rate·c)); ``main`` algebraic, given by its series in 1/c."""

    main: Series
    rate: sympy.Rational | None


def _argument(u: sympy.Expr, cache: dict[sympy.Expr, Approximation]
              ) -> tuple[Approximation, sympy.Expr | None, Fraction]:
    """An op's argument: its approximation, leading coefficient (``None`` if exactly 0) and power."""
    found = _approximate(u, cache)
    if found.main.zero:
        return found, None, Fraction(0)
    value, power = found.main.lead()
    return found, value, power


def _bounded(found: Approximation, fn: Any, name: str) -> Approximation:
    """fn of an argument that is eventually a constant b: fn(b), the rest Lipschitz-small."""
    terms = found.main.terms
    if found.main.order is None and (not terms or (len(terms) == 1 and terms[0][0] == 0)):
        constant = terms[0][1] if terms else sympy.Integer(0)
        return Approximation(Series.make([(Fraction(0), fn(constant))], None), found.rate)
    raise Undecided(f"{name} of an argument that stays bounded but is not constant: its "
                    "limit is not a saturation")


def _saturating(name: str, value: sympy.Expr, power: Fraction, least: Fraction) -> None:
    if power < least:
        raise Undecided(f"{name} of an argument growing like c^{power}: its rest vanishes like "
                        f"exp(-c^{power}), not exponentially in c")


def _positive_terms(expr: sympy.Expr) -> bool:
    return all(a.is_positive or isinstance(a, sympy.exp)
               or (isinstance(a, sympy.Mul) and all(f.is_positive or isinstance(f, sympy.exp)
                                                    for f in a.args))
               for a in expr.args)


def _approximate(expr: sympy.Expr, cache: dict[sympy.Expr, Approximation]) -> Approximation:
    if expr in cache:
        return cache[expr]
    if not expr.has(C):
        found = Approximation(Series.make([(Fraction(0), expr)], None), None)
    elif expr == C or expr.is_polynomial(C):
        found = Approximation(Series.of(expr), None)
    elif isinstance(expr, sympy.Add):
        parts = [_approximate(a, cache) for a in expr.args]
        total = parts[0].main
        for p in parts[1:]:
            total = total + p.main
        found = Approximation(total, _rate(*(p.rate for p in parts)))
    elif isinstance(expr, sympy.Mul):
        parts = [_approximate(a, cache) for a in expr.args]
        product = parts[0].main
        for p in parts[1:]:
            product = product * p.main
        rate = _rate(*(p.rate for p in parts))
        found = Approximation(product, None if rate is None else rate / 2)
    elif isinstance(expr, sympy.Pow):
        found = _power(expr, cache)
    elif isinstance(expr, sympy.exp):
        arg, value, power = _argument(expr.args[0], cache)
        if value is None or power <= 0:
            found = _bounded(arg, sympy.exp, "exp")
        elif _sign(value) > 0:
            raise Undecided(f"exp of a growing argument ({expr}) outside a normalizing sum")
        else:
            _saturating("exp", value, power, Fraction(1))
            found = Approximation(Series(()), -value / 2)
    elif isinstance(expr, sympy.tanh | sympy.erf):
        name = type(expr).__name__
        arg, value, power = _argument(expr.args[0], cache)
        if value is None or power <= 0:
            found = _bounded(arg, type(expr), name)
        else:
            _saturating(name, value, power, Fraction(1) if name == "tanh" else Fraction(1, 2))
            rate = abs(value) if name == "tanh" else value**2 / 4
            found = Approximation(Series.make([(Fraction(0), sympy.Integer(_sign(value)))], None),
                                  sympy.nsimplify(rate))
    elif isinstance(expr, sympy.Abs):
        arg, value, _ = _argument(expr.args[0], cache)
        sign = 0 if value is None else _sign(value)
        found = Approximation(Series.make(((e, sign * v) for e, v in arg.main.terms), arg.main.order),
                              arg.rate)
    else:
        raise Undecided(f"no dominant-term rule for {type(expr).__name__} ({expr})")
    cache[expr] = found
    return found


def _power(expr: sympy.Pow, cache: dict[sympy.Expr, Approximation]) -> Approximation:
    base, exponent = expr.args
    if not exponent.is_Rational:
        raise Undecided(f"a power with exponent {exponent}")
    n = Fraction(int(exponent.p), int(exponent.q))
    if n < 0 and isinstance(base, sympy.Add) and _positive_terms(base):
        for term in base.args:
            factor = term if isinstance(term, sympy.exp) else next(
                (f for f in getattr(term, "args", ()) if isinstance(f, sympy.exp)), None)
            if factor is None:
                continue
            _, value, power = _argument(factor.args[0], cache)
            if value is not None and power >= 1 and _sign(value) > 0:
                # 0 < (Σ positive terms)^n ≤ exp(vᵢ)^n, and vᵢ ≥ a·c/2 for large c.
                return Approximation(Series(()), -exponent * value / 2)
    found = _approximate(base, cache)
    if (n < 0 or n.denominator != 1) and found.main.zero:
        raise Undecided(f"{expr}: a negative or fractional power of a part that is 0 to "
                        "every order")
    rate = found.rate if n.denominator == 1 and n in (0, 1) else (
        None if found.rate is None else found.rate / 2)
    return Approximation(found.main.power(n), rate)


def approximate(expr: sympy.Expr, cache: dict[sympy.Expr, Approximation] | None = None
                ) -> Approximation:
    """The main part and exponential rate of ``expr`` as c → ∞ (c positive, everything else exact).

    Raises:
        Undecided: the dominant-term argument does not cover the expression.

    >>> found = approximate(sympy.tanh(3 * C) * C + 1)       # c·sign(3) + 1 + O(exp(−c·3/2))
    >>> [(str(e), v) for e, v in found.main.terms], found.rate
    ([('-1', 1), ('0', 1)], 3/2)
    >>> found = approximate(1 / (1 + sympy.exp(C**2 - C)))    # a sigmoid of a falling argument
    >>> found.main.zero, found.rate
    (True, 1/2)
    """
    return _approximate(sympy.sympify(expr), {} if cache is None else cache)
