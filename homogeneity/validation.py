"""Checks of the values a user hands to a public function, shared by all three packages.

Each check raises the calling package's own exception (``error``), naming the argument, what it
expected and what arrived, so that a wrong type or value is refused where it enters instead of
surfacing later as a TypeError deep inside torch, or as a silently wrong number. ``homogeneity``
imports neither other package, so the checks live here and take the exception class to raise.

>>> check_number(0.5, "rtol", low=0)
0.5
>>> check_number(-1, "rtol", low=0)
Traceback (most recent call last):
homogeneity.errors.HomogeneityError: expected rtol to be a number ≥ 0, got -1
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from homogeneity.errors import HomogeneityError

__all__ = [
    "check_integer",
    "check_number",
    "check_real_model",
    "check_sequence",
    "check_weights",
    "describe",
    "operand_dtype_error",
]

_MATMUL_OPS = frozenset({"mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "conv1d", "conv2d",
                         "conv3d", "convolution", "addbmm"})
"""Ops whose operands eager PyTorch requires to share one dtype (it refuses int times float)."""


def describe(value: Any) -> str:
    """A short description of ``value`` for an error message: its repr, cut, and its type.

    >>> describe("3"), describe(float("nan"))
    ("'3' (str)", 'nan (float)')
    """
    text = repr(value)
    return f"{text[:60]}{'…' if len(text) > 60 else ''} ({type(value).__name__})"


def _bounds(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    def shown(bound: float) -> str:
        return str(bound) if isinstance(bound, int) else f"{bound:g}"

    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '≥'} {shown(low)}")
    if high is not None:
        parts.append(f"{'<' if high_open else '≤'} {shown(high)}")
    return (" " + " and ".join(parts)) if parts else ""


def check_number(value: Any, name: str, *, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False, infinite: bool = False,
                 error: type[Exception] = HomogeneityError) -> float:
    """``value`` as a float if it is a real number within the bounds; otherwise raise ``error``.

    Args:
        value: what the user passed (a Python or NumPy real number, or a one-element real tensor).
        name: the argument's name, for the message.
        low: the smallest value allowed (``low_open``: excluded).
        high: the largest value allowed (``high_open``: excluded).
        infinite: whether +∞ is a meaning of its own here (e.g. the exact limit); NaN never is,
            and -∞ is refused by ``low`` if there is one.
        error: the exception class to raise (the calling package's own).

    >>> check_number(float("inf"), "scale", low=1, infinite=True)
    inf
    >>> check_number(True, "eps")
    Traceback (most recent call last):
    homogeneity.errors.HomogeneityError: expected eps to be a real number, got True (bool)
    """
    expected = (f"expected {name} to be a number{_bounds(low, high, low_open, high_open)}"
                f"{' or inf' if infinite else ''}")
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex() \
            and value.dtype != torch.bool:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(f"expected {name} to be a real number, got {describe(value)}")
    number = float(value)
    if math.isnan(number) or (math.isinf(number) and not (infinite and number > 0)):
        raise error(f"{expected}, got {value!r}")
    if (low is not None and (number < low or (low_open and number == low))) or \
            (high is not None and (number > high or (high_open and number == high))):
        raise error(f"{expected}, got {value!r}")
    return number


def check_integer(value: Any, name: str, *, low: int | None = None, high: int | None = None,
                  error: type[Exception] = HomogeneityError) -> int:
    """``value`` as an int if it is an integer (Python, NumPy, or a one-element integer tensor)
    within [low, high].

    A float is refused, even an integral one: a fractional value must never be truncated (two
    different steps would become one), and 8.0 tokens is a float where a count was meant.

    >>> check_integer(3, "step", low=0)
    3
    >>> check_integer(2.5, "step", low=0)
    Traceback (most recent call last):
    homogeneity.errors.HomogeneityError: expected step to be an integer ≥ 0, got 2.5
    """
    expected = f"expected {name} to be an integer{_bounds(low, high, False, False)}"
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex() \
            and value.dtype != torch.bool:
        value = value.item()
    if isinstance(value, float):
        raise error(f"{expected}, got {value!r}")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{expected}, got {describe(value)}")
    integer = int(value)
    if (low is not None and integer < low) or (high is not None and integer > high):
        raise error(f"{expected}, got {value!r}")
    return integer


def check_sequence(value: Any, name: str, *, what: str = "items",
                   error: type[Exception] = HomogeneityError) -> list[Any]:
    """``value`` as a list if it is a sequence (or another finite iterable) but not a bare string.

    A bare string would be read character by character: ``layers="embeddings"`` is eleven layers
    named by one letter each, none of which exists.

    >>> check_sequence(("a", "b"), "layers")
    ['a', 'b']
    >>> check_sequence("encoder", "layers", what="layer names")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    homogeneity.errors.HomogeneityError: ... got the bare string 'encoder' (wrap it in a list: ['encoder'])
    """
    if isinstance(value, str | bytes):
        raise error(f"expected {name} to be a list of {what}, got the bare string {value!r} "
                    f"(wrap it in a list: [{value!r}])")
    if isinstance(value, Mapping) or not isinstance(value, Iterable) or isinstance(value, torch.Tensor):
        raise error(f"expected {name} to be a list of {what}, got {describe(value)}")
    return list(value)


def check_real_model(model: nn.Module, inputs: Sequence[Any] = (),
                     error: type[Exception] = HomogeneityError) -> None:
    """Refuse complex parameters, buffers or input tensors: degrees, limits and cosines here are
    of real networks, and a complex value would be measured by its real part alone.

    >>> check_real_model(nn.Linear(2, 2), [torch.ones(2, dtype=torch.complex64)])
    Traceback (most recent call last):
    homogeneity.errors.HomogeneityError: expected real tensors, got the complex64 input 0 of Linear
    """
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        for name, tensor in named:
            if tensor.is_complex():
                raise error(f"expected real tensors, got the {str(tensor.dtype).removeprefix('torch.')} "
                            f"{kind} '{name}' of {type(model).__name__}")
    for index, tensor in enumerate(inputs):
        if isinstance(tensor, torch.Tensor) and tensor.is_complex():
            raise error(f"expected real tensors, got the {str(tensor.dtype).removeprefix('torch.')} "
                        f"input {index} of {type(model).__name__}")


def check_weights(model: nn.Module, what: str, error: type[Exception] = HomogeneityError) -> None:
    """Refuse a model whose parameters live on the meta device (an architecture without weights)
    for ``what``, a computation that reads the weights' values.

    >>> with torch.device("meta"):
    ...     empty = nn.Linear(2, 2)
    >>> check_weights(empty, "a saturated limit")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    homogeneity.errors.HomogeneityError: expected a model with weights for a saturated limit, got Linear ...
    """
    if any(p.is_meta for p in [*model.parameters(), *model.buffers()]):
        raise error(f"expected a model with weights for {what}, got {type(model).__name__} on the "
                    "meta device (no values: load it on cpu or cuda)")


def operand_dtype_error(program: torch.export.ExportedProgram) -> str | None:
    """Where the exported graph multiplies an integer tensor with a floating one, as eager PyTorch
    refuses to (``nn.Linear`` on ``torch.long`` inputs): a message naming the input and the op, or
    None. The exporter's fake tensors let such a graph through, and analysing it would silently
    treat the integers as if cast."""
    user_inputs = set(program.graph_signature.user_inputs)
    for node in program.graph.nodes:
        if node.op != "call_function" or getattr(node.target, "__name__", "").split(".")[0] \
                not in _MATMUL_OPS:
            continue
        operands = [arg for arg in node.args if isinstance(arg, torch.fx.Node)
                    and isinstance(arg.meta.get("val"), torch.Tensor)]
        kinds = {arg.meta["val"].is_floating_point() for arg in operands}
        if len(kinds) < 2:
            continue
        integer = next(arg for arg in operands if not arg.meta["val"].is_floating_point())
        source = f"the input '{integer.name}'" if integer.name in user_inputs else \
            f"node '{integer.name}'"
        dtypes = ", ".join(str(arg.meta["val"].dtype).removeprefix("torch.") for arg in operands)
        return (f"expected floating inputs where the model multiplies by its weights, got "
                f"{source} of dtype {str(integer.meta['val'].dtype).removeprefix('torch.')} "
                f"at {node.target} ({dtypes}); eager PyTorch refuses this too: cast it with .float()")
    return None
