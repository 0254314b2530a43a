"""Every branch of every rule, called directly on degrees, with the answer derived by hand.

``test_degree_rules.py`` runs one traced network per rule against numbers; a rule usually has
several cases (each grade of each input, an optional argument left at its default, mixed degrees
where the rule compares them), and each gets its own row here. ``BRANCHES`` lists the cases of
every rule; the meta-test fails when a registered rule or one of its branches has no row.
Edges the random property tests rarely reach are checked against numbers at the end.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import sympy
import torch
import torch.nn.functional as F

import homogeneity
from homogeneity.degree import Degree, Grade, K
from homogeneity.rules import (
    RULES,
    register_rule,
    rule,
    rule_for,
    rule_table,
    rule_table_markdown,
    target_name,
)
from homogeneity.rules.activations import gelu, log_softmax, scaled_dot_product_attention, softmax
from homogeneity.rules.common import as_degree, first_undefined, is_zero, product, sum_of
from homogeneity.rules.elementwise import (
    add,
    clamp,
    comparison,
    elementwise_extremum,
    masked_fill,
    positively_homogeneous,
    pow_scalar,
    reciprocal,
    rsqrt,
    saturating,
    sqrt,
    transcendental,
    where,
)
from homogeneity.rules.normalization import (
    difference,
    layer_norm,
    native_layer_norm,
    reduction,
    rms_norm,
    variance,
)
from homogeneity.rules.products import (
    addmm,
    div,
    einsum,
    embedding,
    linear,
    matmul,
    mul,
    rounding_division,
)
from homogeneity.rules.routing import counting, scattering, top_k
from homogeneity.rules.shape import (
    concatenation,
    constant,
    indexing,
    pad,
    positions,
    rearrangement,
)
from homogeneity.verify import check_scaling

EXACT, APPROX, ASYM, NONE = Grade.EXACT, Grade.APPROXIMATE, Grade.ASYMPTOTIC, Grade.NONE


def E(value: Any) -> Degree:
    return Degree.exact(value, f"exact {value}")


def G(value: Any, grade: Grade) -> Degree:
    return Degree.of(value, grade, f"{grade} {value}")


UNDEFINED = Degree.none("an input without a degree")
# A mask whose degree depends on the symbolic input degree: not one unconditional case.
PIECEWISE = Degree.piecewise((E(0), sympy.Eq(K, 0)), (E(1), K > 0))


@dataclass(frozen=True)
class Row:
    """One case of one rule: ``call()`` must give ``degree`` (a value) with ``grade``.

    ``degree`` may also be a :class:`Degree`, compared case by case (symbolic inputs), or the
    string ``"same"``: the rule must hand back its input unchanged. ``reason`` is the explanation,
    or its beginning when it ends in "…".
    """

    rule: str
    branch: str
    call: Callable[[], Degree]
    degree: Any
    grade: Grade | None = None
    reason: str | None = None
    same_as: Degree | None = None


def same(rule: str, branch: str, call: Callable[[Degree], Degree], given: Degree) -> Row:
    return Row(rule, branch, lambda: call(given), "same", same_as=given)


ROWS = [
    # --- products -----------------------------------------------------------------------------
    Row("linear", "no bias: degrees add", lambda: linear(E(1), E(1)), 2, EXACT,
        "linear map: degrees add (1 + 1)"),
    Row("linear", "bias of the product's degree", lambda: linear(E(0), E(1), E(1)), 1, EXACT),
    Row("linear", "bias below the product's degree", lambda: linear(E(1), E(1), E(1)), 2, ASYM,
        "bias: the degree-1 term is lower order than the degree-2 term"),
    Row("linear", "symbolic input", lambda: linear(E(K), E(1), E(1)),
        Degree.piecewise((G(1, EXACT), sympy.Eq(K, 0)), (G(K + 1, ASYM), K > 0))),
    Row("addmm", "bias below the product's degree", lambda: addmm(E(1), E(1), E(1)), 2, ASYM),
    Row("addmm", "bias of the product's degree", lambda: addmm(E(1), E(0), E(1)), 1, EXACT),
    Row("addmm", "beta = 0 drops the bias", lambda: addmm(E(1), E(1), E(1), beta=0), 2, EXACT),
    Row("addmm", "grades take the weaker", lambda: addmm(E(1), G(0, APPROX), E(1)), 1, APPROX),
    Row("matmul", "degrees add", lambda: matmul(E(1), E(2)), 3, EXACT, "matrix product: degrees add (1 + 2)"),
    Row("matmul", "grades take the weaker", lambda: matmul(G(1, ASYM), G(1, APPROX)), 2, ASYM),
    Row("matmul", "an undefined factor", lambda: matmul(E(1), UNDEFINED), None, NONE,
        "an input without a degree"),
    Row("einsum", "degrees add over every operand", lambda: einsum("i,i,i->", [E(1), E(2), E(0)]),
        3, EXACT, "einsum 'i,i,i->': degrees add (1 + 2 + 0)"),
    Row("mul", "a number is a constant factor", lambda: mul(E(1), 2.5), 1, EXACT),
    Row("mul", "two tensors: degrees add", lambda: mul(E(1), G(2, APPROX)), 3, APPROX),
    Row("div", "degrees subtract", lambda: div(E(3), E(1)), 2, EXACT, "quotient: degrees subtract (3 − 1)"),
    Row("div", "by a number", lambda: div(E(1), 4.0), 1, EXACT),
    Row("div", "a number by a tensor", lambda: div(4.0, E(1)), -1, EXACT),
    Row("div", "grades take the weaker", lambda: div(G(1, APPROX), G(1, ASYM)), 0, ASYM),
    Row("div", "undefined numerator", lambda: div(UNDEFINED, E(1)), None, NONE, "an input without a degree"),
    Row("div", "undefined denominator", lambda: div(E(1), UNDEFINED), None, NONE,
        "an input without a degree"),
    Row("rounding_division", "constants", lambda: rounding_division(E(0), 2), 0, EXACT,
        "rounding division of constants"),
    Row("rounding_division", "constants keep their grade",
        lambda: rounding_division(G(0, APPROX), E(0)), 0, APPROX),
    Row("rounding_division", "a growing numerator", lambda: rounding_division(E(1), 2), None, NONE,
        "rounding division of a parameter-dependent tensor has no degree"),
    Row("rounding_division", "a growing divisor", lambda: rounding_division(E(0), E(1)), None, NONE),
    Row("rounding_division", "undefined input", lambda: rounding_division(UNDEFINED, 2), None, NONE,
        "an input without a degree"),
    Row("embedding", "fixed indices keep the table's degree", lambda: embedding(E(1), E(0)), 1, EXACT,
        "embedding rows keep the table's degree"),
    Row("embedding", "the table's grade is kept", lambda: embedding(G(1, ASYM), E(0)), 1, ASYM),
    Row("embedding", "growing indices", lambda: embedding(E(1), E(1)), None, NONE,
        "embedding indices depend on the scaled parameters"),
    Row("embedding", "approximately fixed indices", lambda: embedding(E(1), G(0, APPROX)), None, NONE),
    Row("embedding", "piecewise indices", lambda: embedding(E(1), PIECEWISE), None, NONE),
    # --- elementwise --------------------------------------------------------------------------
    Row("add", "equal degrees", lambda: add(E(1), E(1)), 1, EXACT, "sum of two terms of degree 1"),
    Row("add", "lower-degree second term", lambda: add(E(2), E(1)), 2, ASYM,
        "sum: the degree-1 term is lower order than the degree-2 term"),
    Row("add", "lower-degree first term", lambda: add(E(1), E(2)), 2, ASYM),
    Row("add", "grades take the weaker", lambda: add(G(1, APPROX), E(1)), 1, APPROX),
    Row("add", "alpha = 0 drops the second term", lambda: add(E(2), E(1), alpha=0), 2, EXACT),
    Row("add", "alpha != 0 keeps the second term", lambda: add(E(2), E(1), alpha=-1), 2, ASYM),
    Row("add", "a literal 0 is no term", lambda: add(E(2), 0), 2, EXACT),
    Row("add", "a literal constant is a degree-0 term", lambda: add(E(2), 1.5), 2, ASYM),
    Row("add", "an undefined term", lambda: add(E(1), UNDEFINED), None, NONE, "an input without a degree"),
    Row("add", "symbolic degree against a bias", lambda: add(E(K), E(1)),
        Degree.piecewise((G(1, EXACT), sympy.Eq(K, 1)), (G(K, ASYM), K > 1), (G(1, ASYM), sympy.Eq(K, 0)))),
    same("positively_homogeneous", "degree and grade kept", positively_homogeneous, G(3, ASYM)),
    Row("pow_scalar", "degree times p", lambda: pow_scalar(E(2), 3), 6, EXACT, "power 3: degree times 3"),
    Row("pow_scalar", "the grade is kept", lambda: pow_scalar(G(1, ASYM), 2), 2, ASYM),
    Row("pow_scalar", "symbolic degree", lambda: pow_scalar(E(K), 2), 2 * K, EXACT),
    Row("rsqrt", "degree -k/2", lambda: rsqrt(E(2)), -1, EXACT),
    Row("rsqrt", "odd degree gives a fraction", lambda: rsqrt(E(1)), sympy.Rational(-1, 2), EXACT),
    Row("sqrt", "degree k/2", lambda: sqrt(E(2)), 1, EXACT),
    Row("sqrt", "odd degree gives a fraction", lambda: sqrt(G(3, APPROX)), sympy.Rational(3, 2), APPROX),
    Row("reciprocal", "degree -k", lambda: reciprocal(G(2, ASYM)), -2, ASYM),
    Row("transcendental", "scale-invariant input", lambda: transcendental(E(0)), 0, EXACT,
        "a transcendental function of a scale-invariant input"),
    Row("transcendental", "scale-invariant input keeps its grade",
        lambda: transcendental(G(0, ASYM)), 0, ASYM),
    Row("transcendental", "growing input", lambda: transcendental(E(1)), None, NONE,
        "a transcendental function of an input of degree 1 is not homogeneous"),
    Row("transcendental", "shrinking input", lambda: transcendental(E(-1)), None, NONE,
        "a transcendental function of a shrinking input (degree -1 < 0)"),
    Row("transcendental", "a number to a tensor power (pow.Scalar)",
        lambda: transcendental(2.0, E(1)), None, NONE,
        "a transcendental function of an input of degree 1 is not homogeneous"),
    Row("transcendental", "a number to a constant power", lambda: transcendental(2.0, E(0)), 0, EXACT),
    Row("transcendental", "undefined input", lambda: transcendental(UNDEFINED), None, NONE,
        "an input without a degree"),
    Row("saturating", "growing input saturates", lambda: saturating(E(2)), 0, APPROX,
        "saturating function saturates: exponentially close to its limit"),
    Row("saturating", "asymptotic growing input", lambda: saturating(G(1, ASYM)), 0, APPROX),
    Row("saturating", "scale-invariant input", lambda: saturating(E(0)), 0, EXACT,
        "saturating function of a scale-invariant input"),
    Row("saturating", "scale-invariant input keeps its grade", lambda: saturating(G(0, ASYM)), 0, ASYM),
    Row("saturating", "with bounds (hardtanh)", lambda: saturating(E(1), -1.0, 1.0), 0, APPROX),
    Row("saturating", "shrinking input", lambda: saturating(E(-2)), None, NONE,
        "saturating function of a shrinking input (degree -2 < 0)"),
    Row("saturating", "symbolic degree", lambda: saturating(E(K)),
        Degree.piecewise((G(0, EXACT), sympy.Eq(K, 0)), (G(0, APPROX), K > 0))),
    Row("comparison", "with 0", lambda: comparison(E(1), 0), 0, EXACT,
        "comparison of terms of one degree (or with 0) is scale-free"),
    Row("comparison", "with 0.0", lambda: comparison(E(2), 0.0), 0, EXACT),
    Row("comparison", "two terms of one degree", lambda: comparison(E(1), E(1)), 0, EXACT),
    Row("comparison", "with 0, keeping the input's grade", lambda: comparison(G(1, ASYM), 0), 0, ASYM),
    Row("comparison", "two terms of different degrees", lambda: comparison(E(1), E(2)), 0, APPROX,
        "comparison of a growing input settles (a step)"),
    Row("comparison", "growing input against a fixed threshold", lambda: comparison(E(1), 0.3), 0,
        APPROX),
    Row("comparison", "growing input against a fixed threshold (asymptotic input)",
        lambda: comparison(G(1, ASYM), 0.3), 0, APPROX),
    Row("comparison", "scale-invariant inputs", lambda: comparison(E(0), 0.3), 0, EXACT,
        "comparison of scale-invariant inputs"),
    Row("comparison", "scale-invariant inputs keep the weakest grade",
        lambda: comparison(G(0, APPROX), G(0, ASYM)), 0, ASYM),
    Row("comparison", "unary logic", lambda: comparison(E(0)), 0, EXACT),
    Row("comparison", "an undefined operand", lambda: comparison(E(1), UNDEFINED), None, NONE,
        "an input without a degree"),
    Row("where", "both branches of one degree", lambda: where(E(0), E(1), E(1)), 1, EXACT),
    Row("where", "the mask's grade weakens the result", lambda: where(G(0, APPROX), E(1), E(1)), 1,
        APPROX),
    Row("where", "the branches' grade is kept", lambda: where(E(0), G(1, ASYM), E(1)), 1, ASYM),
    Row("where", "a literal 0 branch is no term", lambda: where(E(0), E(2), 0), 2, EXACT),
    Row("where", "a literal constant branch is lower order", lambda: where(E(0), E(2), 1.0), 2, ASYM),
    Row("where", "branches of different degrees", lambda: where(E(0), E(1), E(2)), 2, ASYM),
    Row("where", "a growing mask", lambda: where(E(1), E(1), E(1)), None, NONE,
        "where() with a mask that changes with the scaled parameters"),
    Row("where", "a piecewise mask", lambda: where(PIECEWISE, E(1), E(1)), None, NONE),
    Row("where", "a literal mask is a constant", lambda: where(True, E(1), E(1)), 1, EXACT),
    Row("masked_fill", "fill with 0", lambda: masked_fill(E(1), E(0), 0.0), 1, EXACT),
    # Hugging Face's additive mask constant is a fixed number, not a mask: lower order.
    Row("masked_fill", "fill with a moderate constant", lambda: masked_fill(E(1), E(0), -1e4), 1, ASYM),
    Row("masked_fill", "fill a scale-invariant input", lambda: masked_fill(E(0), E(0), -1e4), 0, EXACT),
    Row("masked_fill", "a growing mask", lambda: masked_fill(E(1), E(1), 0.0), None, NONE),
    Row("elementwise_extremum", "equal degrees", lambda: elementwise_extremum(E(1), E(1)), 1, EXACT,
        "min/max of two terms of the same degree"),
    Row("elementwise_extremum", "equal degrees, weaker grade",
        lambda: elementwise_extremum(E(1), G(1, APPROX)), 1, APPROX),
    Row("elementwise_extremum", "different degrees", lambda: elementwise_extremum(E(1), E(2)), None,
        NONE, "min/max of terms of degrees 1 and 2"),
    Row("elementwise_extremum", "undefined first", lambda: elementwise_extremum(UNDEFINED, E(1)),
        None, NONE, "an input without a degree"),
    Row("elementwise_extremum", "undefined second", lambda: elementwise_extremum(E(1), UNDEFINED),
        None, NONE, "an input without a degree"),
    Row("elementwise_extremum", "symbolic equal degrees",
        lambda: elementwise_extremum(E(K + 1), E(1 + K)), K + 1, EXACT),
    same("clamp", "clamp(min=0) is ReLU", lambda x: clamp(x, 0), G(2, ASYM)),
    same("clamp", "clamp(min=0.0) is ReLU", lambda x: clamp(x, 0.0), G(2, ASYM)),
    Row("clamp", "clamp to fixed bounds", lambda: clamp(E(1), 0, 1), None, NONE,
        "clamp to fixed bounds of an input of degree 1 is not homogeneous"),
    Row("clamp", "a nonzero lower bound", lambda: clamp(E(1), -1.0), None, NONE),
    Row("clamp", "an upper bound only", lambda: clamp(E(1), None, 0), None, NONE),
    Row("clamp", "a scale-invariant input", lambda: clamp(G(0, APPROX), -1, 1), 0, APPROX),
    # --- activations ---------------------------------------------------------------------------
    Row("softmax", "growing scores", lambda: softmax(E(2), -1), 0, APPROX,
        "softmax saturates: exponentially close to its limit"),
    Row("softmax", "growing scores with a lower-order term", lambda: softmax(G(2, ASYM), -1), 0, APPROX),
    Row("softmax", "scale-invariant scores", lambda: softmax(E(0), -1), 0, EXACT,
        "softmax of a scale-invariant input"),
    Row("softmax", "scale-invariant scores keep their grade", lambda: softmax(G(0, ASYM), -1, False),
        0, ASYM),
    Row("softmax", "shrinking scores", lambda: softmax(E(-1), -1), None, NONE,
        "softmax of a shrinking input (degree -1 < 0)"),
    same("softmax", "undefined scores", lambda x: softmax(x, -1), UNDEFINED),
    Row("log_softmax", "growing input", lambda: log_softmax(E(2), -1, False), 2, APPROX,
        "log-softmax/logsumexp is positively homogeneous up to an exponentially small error"),
    # log softmax(c²z + cb) = c²(z − max z) + (b − b at the max) + …: the lower-order term stays.
    Row("log_softmax", "growing input with a lower-order term", lambda: log_softmax(G(2, ASYM), -1),
        2, ASYM),
    Row("log_softmax", "scale-invariant input", lambda: log_softmax(G(0, APPROX), -1), 0, APPROX),
    Row("log_softmax", "shrinking input", lambda: log_softmax(E(-1), -1), None, NONE,
        "log-softmax/logsumexp of a shrinking input (degree -1 < 0)"),
    Row("gelu", "growing input", lambda: gelu(E(1)), 1, APPROX,
        "GELU/SiLU is positively homogeneous up to an exponentially small error"),
    Row("gelu", "tanh approximation", lambda: gelu(E(3), approximate="tanh"), 3, APPROX),
    Row("gelu", "growing input with a lower-order term", lambda: gelu(G(2, ASYM)), 2, ASYM),
    Row("gelu", "scale-invariant input", lambda: gelu(E(0)), 0, EXACT),
    Row("gelu", "shrinking input", lambda: gelu(E(-1)), None, NONE),
    Row("gelu", "symbolic degree", lambda: gelu(E(K)),
        Degree.piecewise((G(0, EXACT), sympy.Eq(K, 0)), (G(K, APPROX), K > 0))),
    Row("scaled_dot_product_attention", "growing scores: the values' degree",
        lambda: scaled_dot_product_attention(E(1), E(1), E(2)), 2, APPROX),
    Row("scaled_dot_product_attention", "scale-invariant scores",
        lambda: scaled_dot_product_attention(E(0), E(0), E(1)), 1, EXACT),
    Row("scaled_dot_product_attention", "an additive mask is lower order",
        lambda: scaled_dot_product_attention(E(1), E(1), E(1), E(0)), 1, APPROX),
    Row("scaled_dot_product_attention", "undefined scores",
        lambda: scaled_dot_product_attention(E(1), UNDEFINED, E(1)), None, NONE, "an input without a degree"),
    Row("scaled_dot_product_attention", "undefined value",
        lambda: scaled_dot_product_attention(E(1), E(1), UNDEFINED), None, NONE, "an input without a degree"),
    Row("scaled_dot_product_attention", "undefined mask",
        lambda: scaled_dot_product_attention(E(0), E(0), E(1), UNDEFINED), None, NONE,
        "an input without a degree"),
    # --- normalization and reductions -------------------------------------------------------------
    Row("layer_norm", "default eps, growing input", lambda: layer_norm(E(1), [3]), 0, ASYM,
        "layer norm: eps=1e-05 is lower order than the input's variance…"),
    Row("layer_norm", "eps = 0, growing input", lambda: layer_norm(E(2), [3], eps=0.0), 0, EXACT,
        "layer norm without eps is scale-invariant (Lemma 5)…"),
    Row("layer_norm", "eps = 0 keeps the input's grade", lambda: layer_norm(G(1, APPROX), [3], eps=0.0),
        0, APPROX),
    Row("layer_norm", "eps weakens an approximate input to asymptotic",
        lambda: layer_norm(G(1, APPROX), [3], eps=0.5), 0, ASYM),
    Row("layer_norm", "scale-invariant input", lambda: layer_norm(G(0, APPROX), [3], eps=0.5), 0, APPROX,
        "layer norm of a scale-invariant input…"),
    Row("layer_norm", "eps dominates a shrinking input", lambda: layer_norm(E(-1), [3], eps=0.5), -1,
        ASYM, "layer norm: eps=0.5 dominates the shrinking input's variance…"),
    Row("layer_norm", "eps = 0, shrinking input", lambda: layer_norm(E(-1), [3], eps=0.0), 0, EXACT),
    Row("layer_norm", "affine with eps", lambda: layer_norm(E(1), [3], E(1), E(1), 1e-5), 1, ASYM,
        "layer norm: eps=1e-05 is lower order than the input's variance; then γ·x + β: degree 1"),
    Row("layer_norm", "affine without eps", lambda: layer_norm(E(1), [3], E(1), E(1), 0.0), 1, EXACT),
    Row("layer_norm", "weight only", lambda: layer_norm(E(1), [3], E(1), None, 0.0), 1, EXACT),
    Row("layer_norm", "bias only: degree 1 over a degree-0 output",
        lambda: layer_norm(E(1), [3], None, E(1), 0.0), 1, ASYM),
    Row("layer_norm", "undefined input", lambda: layer_norm(UNDEFINED, [3]), None, NONE,
        "an input without a degree…"),
    Row("layer_norm", "symbolic input without eps", lambda: layer_norm(E(K), [3], eps=0.0), 0, EXACT),
    Row("native_layer_norm", "affine without eps",
        lambda: native_layer_norm(E(1), [3], E(1), E(1), 0.0), 1, EXACT),
    Row("native_layer_norm", "affine with eps", lambda: native_layer_norm(E(1), [3], E(1), E(1), 1e-5),
        1, ASYM),
    Row("native_layer_norm", "no affine", lambda: native_layer_norm(E(1), [3], None, None, 0.0), 0,
        EXACT),
    Row("rms_norm", "default eps (1e-6)", lambda: rms_norm(E(1), [3]), 0, ASYM,
        "RMS norm: eps=1e-06 is lower order than the input's variance…"),
    Row("rms_norm", "eps = 0.0 is no eps, not the default", lambda: rms_norm(E(1), [3], E(1), 0.0), 1,
        EXACT),
    Row("rms_norm", "given eps with a weight", lambda: rms_norm(E(1), [3], E(1), 0.5), 1, ASYM,
        "RMS norm: eps=0.5 is lower order than the input's variance…"),
    same("reduction", "degree and grade kept", lambda x: reduction(x, [-1], True), G(2, APPROX)),
    same("difference", "no prepend or append", lambda x: difference(x), G(1, ASYM)),
    Row("difference", "prepend of a lower degree", lambda: difference(E(1), 1, -1, E(0)), 1, ASYM),
    Row("difference", "append of the same degree", lambda: difference(E(1), 1, -1, None, E(1)), 1, EXACT),
    Row("difference", "append of a higher degree", lambda: difference(E(1), append=E(2)), 2, ASYM),
    Row("variance", "degree 2k", lambda: variance(E(1), [-1]), 2, EXACT, "power 2: degree times 2"),
    Row("variance", "the grade is kept", lambda: variance(G(3, APPROX)), 6, APPROX),
    # --- shape -----------------------------------------------------------------------------------
    same("rearrangement", "degree and grade kept", lambda x: rearrangement(x, [2, 6]), G(1, APPROX)),
    same("indexing", "fixed indices", lambda x: indexing(x, [None, E(0)]), G(2, ASYM)),
    same("indexing", "fixed index as a keyword", lambda x: indexing(x, -1, index=E(0)), G(2, ASYM)),
    Row("indexing", "growing indices", lambda: indexing(E(1), [E(1)]), None, NONE,
        "indices depend on the scaled parameters"),
    Row("indexing", "approximately fixed indices (integers: constant from some c on)",
        lambda: indexing(E(1), 0, G(0, APPROX)), 1, APPROX),
    Row("top_k", "a degree-0 input keeps its grade", lambda: top_k(G(0, APPROX), 2), 0, APPROX),
    Row("top_k", "values and positions of different degrees", lambda: top_k(E(1), 2), None, NONE,
        "top-k values of degree 1 and positions of degree 0 in one node"),
    Row("top_k", "an input without degree", lambda: top_k(UNDEFINED, 2), None, NONE),
    Row("counting", "counts of fixed positions keep their grade", lambda: counting(G(0, APPROX), 3), 0,
        APPROX, "counts of positions that do not change with c"),
    Row("counting", "weighted counts take the weights' degree", lambda: counting(E(0), E(2)), 2, EXACT),
    Row("counting", "the positions' grade weakens the weights'", lambda: counting(G(0, ASYM), E(2)), 2, ASYM),
    Row("counting", "growing positions", lambda: counting(E(1)), None, NONE,
        "indices depend on the scaled parameters"),
    same("counting", "positions without degree", lambda x: counting(x), UNDEFINED),
    Row("counting", "weights without degree", lambda: counting(E(0), UNDEFINED), None, NONE),
    Row("scattering", "a source of x's degree", lambda: scattering(E(1), 0, E(0), E(1)), 1, EXACT,
        "scattered entries of two terms of degree 1"),
    Row("scattering", "a source of a lower degree", lambda: scattering(E(2), 0, E(0), E(1)), 2, ASYM,
        "scattered entries: the degree-1 term is lower order than the degree-2 term"),
    Row("scattering", "alpha = 0 adds no term", lambda: scattering(E(1), 0, E(0), E(3), 0), 1, EXACT),
    Row("scattering", "a literal 0 value", lambda: scattering(E(1), 0, E(0), 0), 1, EXACT),
    Row("scattering", "a nonzero value is a constant term", lambda: scattering(E(1), 0, E(0), 2.0), 1, ASYM),
    Row("scattering", "approximately fixed indices weaken the grade",
        lambda: scattering(E(1), 0, G(0, APPROX), E(1)), 1, APPROX,
        "scattered entries of two terms of degree 1"),
    Row("scattering", "growing indices", lambda: scattering(E(1), 0, E(1), E(1)), None, NONE,
        "indices depend on the scaled parameters"),
    same("scattering", "indices without degree", lambda x: scattering(E(1), 0, x, E(1)), UNDEFINED),
    Row("indexing", "piecewise indices", lambda: indexing(E(1), [PIECEWISE]), None, NONE),
    Row("indexing", "a growing index before a fixed one", lambda: indexing(E(1), [E(1), E(0)]), None,
        NONE),
    Row("indexing", "growing index as a keyword", lambda: indexing(E(1), -1, index=E(1)), None, NONE),
    Row("indexing", "an undefined index", lambda: indexing(E(1), [[E(0), UNDEFINED]]), None, NONE,
        "an input without a degree"),
    Row("positions", "of a growing input", lambda: positions(E(2), -1), 0, EXACT,
        "positions are invariant under positive scaling"),
    Row("positions", "the input's grade", lambda: positions(G(1, APPROX)), 0, APPROX),
    same("positions", "undefined input", lambda x: positions(x), UNDEFINED),
    Row("concatenation", "pieces of one degree", lambda: concatenation([E(1), E(1)], -1), 1, EXACT,
        "concatenation of two terms of degree 1"),
    Row("concatenation", "pieces of different degrees", lambda: concatenation([E(1), E(0)]), 1, ASYM),
    Row("concatenation", "one piece", lambda: concatenation([G(2, APPROX)]), 2, APPROX),
    same("pad", "zero padding", lambda x: pad(x, [1, 1]), G(1, APPROX)),
    same("pad", "explicit zero fill", lambda x: pad(x, [1, 1], "constant", 0.0), G(1, APPROX)),
    same("pad", "no fill value", lambda x: pad(x, [1, 1], "constant", None), G(1, APPROX)),
    Row("pad", "a nonzero fill is a constant term", lambda: pad(E(1), [1, 1], "constant", 2.0), 1, ASYM,
        "padding: the degree-0 term is lower order than the degree-1 term"),
    Row("pad", "a nonzero fill as constant_pad_nd's value", lambda: pad(E(1), [1, 1], 3.0), 1, ASYM),
    Row("pad", "a nonzero fill of a scale-invariant input", lambda: pad(E(0), [1, 1], 3.0), 0, EXACT),
    Row("constant", "factories and shape queries", lambda: constant((2, 3), dtype=torch.float32), 0,
        EXACT, "factory or shape query: independent of parameter values"),
]

BRANCHES: dict[str, int] = {
    # rule → how many distinct cases its maths has (each needs at least one row)
    "linear": 4, "addmm": 4, "matmul": 3, "einsum": 1, "mul": 2, "div": 6, "rounding_division": 5,
    "embedding": 5, "add": 10, "positively_homogeneous": 1, "pow_scalar": 3, "rsqrt": 2, "sqrt": 2,
    "top_k": 3, "reciprocal": 1, "transcendental": 7, "saturating": 7, "comparison": 11, "where": 9,
    "masked_fill": 4, "elementwise_extremum": 6, "clamp": 6, "softmax": 6, "log_softmax": 4, "gelu": 6,
    "scaled_dot_product_attention": 6, "layer_norm": 13, "native_layer_norm": 3, "rms_norm": 3,
    "reduction": 1, "difference": 4, "variance": 2, "rearrangement": 1, "indexing": 8,
    "positions": 3, "concatenation": 3, "pad": 6, "constant": 1, "counting": 6, "scattering": 8,
}


def _by_input_degree(degree: Degree) -> list[tuple[Any, Grade]]:
    """(value, grade) at the input degrees k = 0..4: piecewise degrees compared by meaning."""
    table = []
    for k in range(5):
        (case,) = [c for c in degree.cases if bool(sympy.sympify(c.condition).subs(K, k))]
        table.append((sympy.sympify(case.value).subs(K, k), case.grade))
    return table


def _rows_of(rule_name: str) -> list[Row]:
    return [r for r in ROWS if r.rule == rule_name]


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.rule}: {r.branch}" for r in ROWS])
def test_rule_case(row: Row) -> None:
    result = row.call()
    if row.degree == "same":
        assert result is row.same_as
        return
    if isinstance(row.degree, Degree):
        assert _by_input_degree(result) == _by_input_degree(row.degree), result
        return
    assert result.grade is row.grade, result.reason
    if row.grade is NONE:
        assert result.value is sympy.nan
    else:
        assert result.single and result.value == sympy.sympify(row.degree), result
    if row.reason is not None and row.reason.endswith("…"):
        assert result.reason.startswith(row.reason[:-1]), result.reason
    elif row.reason is not None:
        assert result.reason == row.reason


def test_every_branch_of_every_rule_has_its_own_case() -> None:
    rules = {fn.__name__ for fn in RULES.values()}
    assert rules == set(BRANCHES), "rules and the branch table disagree"
    for name, count in BRANCHES.items():
        branches = {r.branch for r in _rows_of(name)}
        assert len(branches) >= count, f"{name}: {count} cases in its maths, rows for {sorted(branches)}"
    assert len({(r.rule, r.branch) for r in ROWS}) == len(ROWS), "two rows name the same case"


# --- building blocks ---------------------------------------------------------------------------


def test_as_degree_passes_degrees_and_makes_literals_constants() -> None:
    d = E(2)
    assert as_degree(d) is d
    literal = as_degree(1.5)
    assert (literal.value, literal.grade, literal.reason) == (0, EXACT, "literal 1.5")
    assert as_degree(None).reason == "literal None"


@pytest.mark.parametrize(("value", "expected"), [
    (0, True), (0.0, True), (-0.0, True), (1, False), (1e-300, False), (False, False), (True, False),
    (None, False), ("0", False), (E(0), False),
])
def test_is_zero_means_the_literal_number_zero(value: Any, expected: bool) -> None:
    assert is_zero(value) is expected


def test_first_undefined_finds_the_first_degree_without_any_case() -> None:
    other = Degree.none("second")
    assert first_undefined([E(1), UNDEFINED, other]) is UNDEFINED
    assert first_undefined([E(1), G(1, ASYM)]) is None
    assert first_undefined([]) is None
    partly = Degree.piecewise((Degree.none("k = 0"), sympy.Eq(K, 0)), (E(1), K > 0))
    assert first_undefined([partly]) is None


def test_product_reason_lists_the_degrees_and_keeps_the_undefined_factors_reason() -> None:
    assert product(E(1), G(2, APPROX), what="bilinear").reason == "bilinear: degrees add (1 + 2)"
    assert product(E(1), E(K)).reason == "product: degrees add (1 + k)"
    assert product(E(1), UNDEFINED, Degree.none("later")).reason == "an input without a degree"
    assert product(2.0, 3).value == 0


def test_sum_of_drops_literal_zeros() -> None:
    assert sum_of(0, 0.0).reason == "sum of zeros"
    assert sum_of().value == 0 and sum_of().grade is EXACT
    d = G(2, APPROX)
    assert sum_of(d, 0) is d and sum_of(0, d) is d
    assert sum_of(E(2), E(1)).reason == "sum: the degree-1 term is lower order than the degree-2 term"
    mixed = sum_of(E(1), E(1), E(2), what="total")
    assert (mixed.value, mixed.grade) == (2, ASYM)
    assert mixed.reason == "total: the degree-1 term is lower order than the degree-2 term"


def test_normalization_of_a_symbolic_input_explains_every_case_alike() -> None:
    # With eps, LN(c^k z) is exact for k = 0 and asymptotic for k > 0: two cases, one explanation.
    out = layer_norm(E(K), [3], E(1), E(1), 0.5)
    assert [(c.value, c.grade) for c in out.cases] == [(1, EXACT), (1, ASYM)]
    assert {c.reason for c in out.cases} == {"normalization; then γ·x + β: degree 1"}


# --- registry ------------------------------------------------------------------------------------


def test_register_rule_rejects_what_cannot_be_called() -> None:
    with pytest.raises(TypeError, match="a rule must be callable, got int"):
        register_rule(torch.ops.aten.special_erfinv.default, 3)  # type: ignore[arg-type]
    assert rule_for(torch.ops.aten.special_erfinv.default) is None


def test_rule_decorator_registers_one_function_for_every_target() -> None:
    first, second = torch.ops.aten.special_erfinv.default, torch.ops.aten.special_ndtri.default

    def undocumented(x: Degree) -> Degree:
        return x

    try:
        assert rule(first, second)(undocumented) is undocumented
        assert rule_for(first) is undocumented and rule_for(second) is undocumented
        # A rule without a docstring has an empty summary in the table.
        assert rule_table([first]) == [("aten.special_erfinv.default", "undocumented", "")]
    finally:
        RULES.pop(first, None)
        RULES.pop(second, None)


def test_rule_for_and_rule_table_rows() -> None:
    assert rule_for(torch.ops.aten.relu.default) is positively_homogeneous
    assert rule_for(operator.getitem) is rearrangement
    rows = rule_table([torch.ops.aten.var.dim, torch.ops.aten.relu.default])
    assert rows == [
        ("aten.relu.default", "positively_homogeneous",
         "g(cz) = c·g(z) for c > 0 (−z, |z|, ReLU, leaky ReLU): degree and grade kept (Lemma 2)."),
        ("aten.var.dim", "variance", "Var(cᵏz) = c²ᵏ Var(z): degree 2k."),
    ]
    # A summary spanning lines is joined into one with spaces; later paragraphs are left out.
    (softmax_row,) = rule_table([torch.ops.aten.softmax.int])
    assert softmax_row[2] == ("softmax(cᵏz) − softmax(z) ≤ exp(−Θ(‖z‖)) (Lemma 7, Theorem 5): "
                              "approximate 0 for k ≠ 0.")
    (gelu_row,) = rule_table([torch.ops.aten.gelu.default])
    assert gelu_row[2] == ("GELU(z) = z·Φ(z) and SiLU(z) = z·σ(z) are approximately ReLU: degree k, "
                           "approximate (k ≠ 0).")
    (where_row,) = rule_table([torch.ops.aten.where.self])
    assert where_row[2] == ("where(m, a, b) = m·a + (1 − m)·b for a 0/1 mask m: the Sum rule over "
                            "the two branches.")
    (transcendental_row,) = rule_table([torch.ops.aten.exp.default])
    assert transcendental_row[2] == ("exp, log, sin, cos, bᶻ: of a scale-invariant input, "
                                     "scale-invariant; otherwise undefined.")
    (log_softmax_row,) = rule_table([torch.ops.aten.log_softmax.int])
    assert log_softmax_row[2].startswith("log softmax(cᵏz) = cᵏ(z − max z) − log Σ exp(cᵏ(z − max z)) "
                                         "and logsumexp(cᵏz) = cᵏ max z")
    assert len(rule_table()) == len(RULES)


def test_rule_table_markdown_groups_ops_by_rule() -> None:
    lines = rule_table_markdown().splitlines()
    assert lines[:2] == ["| rule | ops | maths | proved lemma |", "|---|---|---|---|"]
    assert len(lines) == 2 + len(BRANCHES)
    (var_row,) = [line for line in lines if line.startswith("| `variance` |")]
    assert var_row == ("| `variance` | `aten.var.correction`, `aten.var.default`, `aten.var.dim` | "
                       "Var(cᵏz) = c²ᵏ Var(z): degree 2k. | Var(cᵏz) = c²ᵏ Var(z): degree 2k, the input's "
                       "grade |")
    names = [line.split("`")[1] for line in lines[2:]]
    assert names == sorted(names)
    (abs_row,) = [line for line in lines if line.startswith("| `positively_homogeneous` |")]
    assert "∣z∣" in abs_row and "|z|" not in abs_row


def test_rule_table_markdown_shows_a_rule_without_docstring_or_lemma_as_such(monkeypatch) -> None:
    """A rule registered without a proof (histc has neither rule nor lemma) says so in its row."""

    def bare(x: Degree) -> Degree:
        return x

    monkeypatch.setitem(RULES, torch.ops.aten.histc.default, bare)
    (row,) = [line for line in rule_table_markdown().splitlines() if line.startswith("| `bare` |")]
    assert row == f"| `bare` | `{target_name(torch.ops.aten.histc.default)}` |  | none |"


# --- edges the random tests rarely reach, against numbers -----------------------------------------


class Net(torch.nn.Module):
    """forward(x) = fn(x, *ps) with fixed float64 parameters."""

    def __init__(self, fn: Callable[..., torch.Tensor], *ps: list[float]) -> None:
        super().__init__()
        self.fn = fn
        self.ps = torch.nn.ParameterList(torch.nn.Parameter(torch.tensor(p, dtype=torch.float64))
                                         for p in ps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x, *self.ps)


X = torch.tensor([[0.2, -0.7, 1.1], [0.9, 0.4, -1.3]], dtype=torch.float64)


@pytest.mark.parametrize(("name", "fn", "degree", "grade"), [
    # GELU and log-softmax of c²z + c·b: the bias survives their linear tails (polynomial error).
    ("gelu of a biased input", lambda x, a, b: F.gelu(x * a * a + b), 2, ASYM),
    ("log-softmax of a biased input", lambda x, a, b: torch.log_softmax(x * a * a + b, -1), 2, ASYM),
    # A fixed fill of moderate size is not a mask: a degree-0 term, lower order (polynomial error).
    ("masked_fill with -4", lambda x, a, b: (x * a).masked_fill(x > 0.5, -4.0) + b, 1, ASYM),
    # x·a crosses the threshold 0.3 only for c > 1: the step settles, exponentially (here at once).
    ("threshold crossed at a small scale", lambda x, a, b: (x * a > 0.3).double() * b, 1, APPROX),
])
def test_edge_inputs_match_numerical_scaling(name: str, fn: Callable[..., torch.Tensor], degree: int,
                                             grade: Grade) -> None:
    model = Net(fn, [0.2, 0.25, 0.5], [0.3, -0.2, 0.1])
    report = homogeneity.analyze(model, X)
    assert (report.degree, report.grade) == (degree, grade), report.weakenings
    (check,) = check_scaling(model, X, report=report)
    assert check.matches, (check.measured, check.changes)


def test_target_names_read_as_written_in_code() -> None:
    assert target_name(torch.ops.aten.add.Tensor) == "aten.add.Tensor"
    assert target_name(operator.getitem) == "operator.getitem"
    assert target_name(operator.mul) == "operator.mul"
    assert target_name("size") == "size"  # a call_method node's target: a method name, no module
    (row,) = rule_table([operator.getitem])
    assert row[:2] == ("operator.getitem", "rearrangement")
