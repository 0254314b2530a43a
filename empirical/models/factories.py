"""Models built by the user's own code: ``module.path:Factory``, the model argument of every command.

A factory is a callable without arguments returning one of:

- a model (an ``nn.Module``);
- ``(model, tokenizer)``: what the corpus measurements need;
- ``(model, args)`` or ``(model, args, kwargs)``: example inputs, what ``degree`` traces.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from empirical.errors import EmpiricalError

__all__ = ["Made", "check_factory_options", "is_factory", "make", "resolve"]

_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def is_factory(spec: str) -> bool:
    """Whether ``spec`` reads as ``module.path:Factory`` and is not an existing file or folder.

    >>> is_factory("my_models:build"), is_factory("minilm"), is_factory("./models/x")
    (True, False, False)
    """
    return bool(_SPEC.match(spec)) and not Path(spec).exists()


@dataclass(frozen=True)
class Made:
    """What a factory returned: the model, and a tokenizer or example inputs if it gave them."""

    model: nn.Module
    tokenizer: Any = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def resolve(spec: str) -> Any:
    """Import ``module.path:Factory`` and return the factory without calling it, so that a typo
    is refused before any work.

    Raises:
        EmpiricalError: the module or attribute does not exist, the module raises as it is
            imported (a syntax error included), or the attribute is not callable.
    """
    module_name, _, attr = spec.partition(":")
    try:
        factory: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise EmpiricalError(f"cannot load the model factory {spec!r}: {err}") from err
    except Exception as err:  # the user's module failed as it ran (a SyntaxError included)
        raise EmpiricalError(f"cannot load the model factory {spec!r}: importing {module_name} raised "
                             f"{type(err).__name__}: {str(err).strip()}") from err
    try:
        for part in attr.split("."):
            factory = getattr(factory, part)
    except AttributeError as err:
        raise EmpiricalError(f"cannot load the model factory {spec!r}: {err}") from err
    if not callable(factory):
        raise EmpiricalError(f"expected {spec} to be callable, got {type(factory).__name__}")
    return factory


def check_factory_options(spec: str, *, random_init: bool, num_layers: int | None) -> None:
    """Refuse options a factory's model cannot honour: it is used as the factory builds it.

    One rule for every command and for :func:`empirical.models.loading.load_model`.
    """
    if random_init or num_layers is not None:
        raise EmpiricalError(
            f"a model from {spec} is used as the factory builds it; random_init and num_layers "
            "apply to named models and folders only (CLI: --random-init, --num-layers)"
        )


def make(spec: str) -> Made:
    """Import ``module.path:Factory`` and call it.

    Raises:
        EmpiricalError: the module or attribute does not exist, the factory raised, or it returned
            something other than the forms listed in this module's docstring.
    """
    factory = resolve(spec)
    try:
        made = factory()
    except Exception as err:  # the user's code: its failure is bad input, not a bug in normsat
        raise EmpiricalError(
            f"the model factory {spec} raised {type(err).__name__}: {str(err).strip()}; expected it to build "
            "and return a model"
        ) from err
    if isinstance(made, nn.Module):
        return Made(made)
    if isinstance(made, tuple) and len(made) in (2, 3) and isinstance(made[0], nn.Module):
        second = made[1]
        if isinstance(second, tuple | list):
            kwargs = made[2] if len(made) == 3 else {}
            if isinstance(kwargs, dict):
                return Made(made[0], args=tuple(second), kwargs=dict(kwargs))
        elif len(made) == 2 and callable(second):
            return Made(made[0], tokenizer=second)
    shape = type(made).__name__ if not isinstance(made, tuple) else \
        f"({', '.join(type(item).__name__ for item in made)})"
    raise EmpiricalError(
        f"expected {spec} to return (model, args), (model, args, kwargs), (model, tokenizer) or "
        f"a model, got {shape}"
    )
