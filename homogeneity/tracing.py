"""The one place where models become graphs: `torch.export` with the settings analyses need.

Every interpretation in the library (degrees, exact limits) reads the ATen-level graph this
module returns. Hugging Face models are exported with ``use_cache=False`` and eager attention,
so that the softmax of attention is a visible node rather than hidden inside a fused kernel.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from homogeneity.errors import HomogeneityError

__all__ = [
    "export_model",
    "export_ready",
    "node_module_path",
    "normalize_module_path",
    "parameter_names",
]


@contextmanager
def export_ready(model: nn.Module) -> Iterator[nn.Module]:
    """Temporarily put ``model`` in the state analyses trace: eval mode, no KV cache, eager attention.

    Everything changed is restored on exit, also when the body raises; parameters are never touched.

    >>> m = nn.Linear(2, 2).train()
    >>> with export_ready(m):
    ...     m.training
    False
    >>> m.training
    True
    """
    training = {name: module.training for name, module in model.named_modules()}
    config = getattr(model, "config", None)
    saved_cache = getattr(config, "use_cache", None)
    saved_attn = getattr(config, "_attn_implementation", None)
    try:
        model.eval()
        if config is not None:
            if saved_cache is not None:
                config.use_cache = False
            if saved_attn not in (None, "eager") and hasattr(model, "set_attn_implementation"):
                model.set_attn_implementation("eager")  # type: ignore[operator]
        yield model
    finally:
        if config is not None:
            if saved_cache is not None:
                config.use_cache = saved_cache
            if saved_attn not in (None, "eager") and hasattr(model, "set_attn_implementation"):
                model.set_attn_implementation(saved_attn)  # type: ignore[operator]
        for name, module in model.named_modules():
            module.training = training[name]


@contextmanager
def _module_stack_recorder(model: nn.Module) -> Iterator[list[str]]:
    """Record which modules are inside a forward call, so a failure can name the innermost one."""
    stack: list[str] = []
    handles = []
    for name, module in model.named_modules():
        label = f"{name or '<root>'} ({type(module).__name__})"

        def enter(_m: nn.Module, _a: Any, _label: str = label) -> None:
            stack.append(_label)

        def leave(_m: nn.Module, _a: Any, _o: Any) -> None:
            if stack:
                stack.pop()

        handles.append(module.register_forward_pre_hook(enter))
        handles.append(module.register_forward_hook(leave))
    try:
        yield stack
    finally:
        for handle in handles:
            handle.remove()


def export_model(
    model: nn.Module, args: tuple[Any, ...] = (), kwargs: Mapping[str, Any] | None = None
) -> torch.export.ExportedProgram:
    """Export ``model`` called on ``args``/``kwargs`` to an ATen-level graph.

    Args:
        model: any ``nn.Module``; Hugging Face models are exported in eval mode with
            ``use_cache=False`` and eager attention (see :func:`export_ready`).
        args: positional example inputs.
        kwargs: keyword example inputs.

    Returns:
        The ``torch.export.ExportedProgram``; ``node.meta["nn_module_stack"]`` names each node's
        module and the graph signature names each parameter.

    Raises:
        HomogeneityError: the exporter failed; the message names the innermost module that was
            running and suggests the settings that usually fix Hugging Face models.

    >>> ep = export_model(nn.Sequential(nn.Linear(3, 4), nn.ReLU()), (torch.randn(2, 3),))
    >>> sorted(parameter_names(ep).values())
    ['0.bias', '0.weight']
    """
    if not isinstance(model, nn.Module):
        raise HomogeneityError(f"expected an nn.Module to export, got {type(model).__name__}")
    kwargs = dict(kwargs or {})
    if _accepts(model, "use_cache") and getattr(model, "config", None) is not None:
        # Some models (T5) return a cache object even with config.use_cache=False.
        kwargs.setdefault("use_cache", False)
    with export_ready(model), _module_stack_recorder(model) as stack:
        try:
            return torch.export.export(model, tuple(args), kwargs, strict=False)
        except Exception as err:
            where = stack[-1] if stack else f"<root> ({type(model).__name__})"
            hint = ""
            if getattr(model, "config", None) is not None:
                hint = (
                    " Hugging Face models usually export with attn_implementation='eager' and"
                    " use_cache=False (set when loading, or pass use_cache=False in the call)."
                )
            raise HomogeneityError(
                f"torch.export could not trace {type(model).__name__}: it failed inside module "
                f"{where} with {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
                f". Example inputs: {_describe_inputs(args, kwargs)}.{hint}"
            ) from err


def _accepts(model: nn.Module, name: str) -> bool:
    try:
        return name in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def _describe_inputs(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """Dtypes and shapes of the example inputs, so shape mismatches are easy to spot."""

    def describe(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
        return type(value).__name__

    parts = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items()]
    return ", ".join(parts) or "none"


def parameter_names(program: torch.export.ExportedProgram) -> dict[str, str]:
    """Map each parameter placeholder of an exported graph to the parameter's qualified name."""
    return dict(program.graph_signature.inputs_to_parameters)


def node_module_path(node: torch.fx.Node) -> str:
    """The dotted path of the innermost module a graph node was traced in ('' for the root).

    >>> ep = export_model(nn.Sequential(nn.Linear(3, 4)), (torch.randn(2, 3),))
    >>> [node_module_path(n) for n in ep.graph.nodes if n.op == "call_function"]
    ['0']
    """
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path, _cls = list(stack.values())[-1]
    # Non-strict export writes paths like "L['self'].encoder.layer[0]"; normalize to "encoder.layer.0".
    return normalize_module_path(str(path))


@functools.lru_cache(maxsize=4096)
def normalize_module_path(path: str) -> str:
    """A raw ``nn_module_stack`` path as a dotted module name.

    >>> normalize_module_path("L['self'].encoder.layer[0]")
    'encoder.layer.0'
    """
    for prefix in ("L['self'].", "L['self']"):
        if path.startswith(prefix):
            path = path[len(prefix):]
    return path.replace("[", ".").replace("]", "").replace("'", "").strip(".")
