"""The one place where models become graphs: `torch.export` with the settings analyses need.

Every interpretation in the library (degrees, exact limits) reads the ATen-level graph this
module returns. Hugging Face models are exported with ``use_cache=False`` and eager attention,
so that the softmax of attention is a visible node rather than hidden inside a fused kernel.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn

from homogeneity.errors import HomogeneityError
from homogeneity.validation import check_real_model, operand_dtype_error

__all__ = [
    "configured_positions",
    "export_model",
    "export_progress",
    "export_ready",
    "node_module_path",
    "normalize_module_path",
    "parameter_names",
    "positional",
    "target_name",
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
    # Mixture-of-experts layers: the batched implementation gathers each token's experts' weights
    # by index (visible ops); the grouped one hides them in an opaque custom op.
    saved_experts = getattr(config, "_experts_implementation", None)
    try:
        model.eval()
        if config is not None:
            if saved_cache is not None:
                config.use_cache = False
            if saved_attn not in (None, "eager") and hasattr(model, "set_attn_implementation"):
                model.set_attn_implementation("eager")  # type: ignore[operator]
            if saved_experts not in (None, "eager", "batched_mm"):
                config._experts_implementation = "batched_mm"
        yield model
    finally:
        if config is not None:
            if saved_experts not in (None, "eager", "batched_mm"):
                config._experts_implementation = saved_experts
            if saved_cache is not None:
                config.use_cache = saved_cache
            if saved_attn not in (None, "eager") and hasattr(model, "set_attn_implementation"):
                model.set_attn_implementation(saved_attn)  # type: ignore[operator]
        for name, module in model.named_modules():
            module.training = training[name]


_MODULE_LISTENER: ContextVar[Callable[[int, int], None] | None] = ContextVar("module_listener",
                                                                            default=None)


@contextmanager
def export_progress(listener: Callable[[int, int], None]) -> Iterator[None]:
    """Within this block, :func:`export_model` calls ``listener(0, total)`` as it starts and
    ``listener(done, total)`` each time the traced forward enters a module for the first time
    (``done`` of the model's ``total`` modules): an export takes seconds to tens of seconds, most
    of it tracing the forward module by module, so a progress bar can move while it runs. Modules
    the forward never calls are never counted.

    >>> seen = []
    >>> with export_progress(lambda done, total: seen.append((done, total))):
    ...     _ = export_model(nn.Sequential(nn.Linear(3, 4), nn.ReLU()), (torch.randn(2, 3),))
    >>> seen
    [(0, 3), (1, 3), (2, 3), (3, 3)]
    """
    token = _MODULE_LISTENER.set(listener)
    try:
        yield
    finally:
        _MODULE_LISTENER.reset(token)


@contextmanager
def _module_stack_recorder(model: nn.Module) -> Iterator[list[str]]:
    """Record which modules are inside a forward call, so a failure can name the innermost one,
    and tell the :func:`export_progress` listener each module entered for the first time."""
    stack: list[str] = []
    handles = []
    listener, entered = _MODULE_LISTENER.get(), set()
    modules = dict(model.named_modules())
    if listener is not None:
        listener(0, len(modules))  # the exporter's seconds of setup come before the first module
    for name, module in modules.items():
        label = f"{name or '<root>'} ({type(module).__name__})"

        def enter(_m: nn.Module, _a: Any, _label: str = label) -> None:
            stack.append(_label)
            if listener is not None and _label not in entered:
                entered.add(_label)
                listener(len(entered), len(modules))

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
    model: nn.Module, args: tuple[Any, ...] = (), kwargs: Mapping[str, Any] | None = None,
    dynamic: bool = False,
) -> torch.export.ExportedProgram:
    """Export ``model`` called on ``args``/``kwargs`` to an ATen-level graph.

    Args:
        model: any ``nn.Module``; Hugging Face models are exported in eval mode with
            ``use_cache=False`` and eager attention (see :func:`export_ready`).
        args: positional example inputs.
        kwargs: keyword example inputs.
        dynamic: export one graph for every batch size and sequence length: dimension 0 of every
            tensor input is one batch dimension, dimension 1 of inputs with at least two
            dimensions a sequence dimension (shared by inputs of equal length), each from 1 up to
            what the model allows. Tensor keyword inputs are passed by position
            (:func:`positional`), as ``torch.export`` takes dynamic shapes reliably only there;
            parameter names and module paths stay those of ``model``. The graph's user inputs are
            the tensor inputs, positional ones first, then keyword ones in the order given.

    Returns:
        The ``torch.export.ExportedProgram``; ``node.meta["nn_module_stack"]`` names each node's
        module and the graph signature names each parameter.

    Raises:
        HomogeneityError: the exporter failed (the message names the innermost module that was
            running and suggests the settings that usually fix Hugging Face models), a parameter,
            buffer or input is complex, or the graph multiplies an integer input with a float
            weight (eager PyTorch refuses that; the exporter does not).

    >>> ep = export_model(nn.Sequential(nn.Linear(3, 4), nn.ReLU()), (torch.randn(2, 3),))
    >>> sorted(parameter_names(ep).values())
    ['0.bias', '0.weight']
    """
    if not isinstance(model, nn.Module):
        raise HomogeneityError(f"expected an nn.Module to export, got {type(model).__name__}")
    if not isinstance(args, tuple | list) or not isinstance(kwargs, Mapping | None) \
            or not isinstance(dynamic, bool):
        raise HomogeneityError(f"expected args as a tuple, kwargs as a mapping and dynamic as a bool, got "
                               f"{type(args).__name__}, {type(kwargs).__name__} and {type(dynamic).__name__}")
    kwargs = dict(kwargs or {})
    check_real_model(model, pytree.tree_leaves((args, kwargs)))
    if _accepts(model, "use_cache") and getattr(model, "config", None) is not None:
        # Some models (T5) return a cache object even with config.use_cache=False.
        kwargs.setdefault("use_cache", False)
    cls, shapes = None, ()
    if dynamic:
        cls, args, shapes = positional(model, tuple(args), kwargs)
        kwargs = {}
    with (export_ready(model), _module_stack_recorder(model) as stack, _in_class(model, cls),
          _without_stack_traces()):
        try:
            # Without grad: a no_grad region inside forward (rotary embeddings) is then not a
            # higher-order op wrapping a submodule, but plain nodes of the graph.
            with torch.no_grad():
                program = (_export_dynamic(model, tuple(args), shapes) if dynamic else
                           torch.export.export(model, tuple(args), kwargs, strict=False))
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
    mixed = operand_dtype_error(program)
    if mixed is not None:
        raise HomogeneityError(f"cannot trace {type(model).__name__}: {mixed}")
    return program


def positional(model: nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any]
               ) -> tuple[type, tuple[torch.Tensor, ...], tuple[Any, ...]]:
    """A subclass of ``model``'s class whose ``forward`` takes every tensor input by position, the
    tensor inputs in that order, and their dynamic shapes.

    :func:`export_model` puts the model in that class only while it exports (so that anything the
    model records about itself, such as Hugging Face's output hooks, stays with the model):
    parameters, buffers and submodules are untouched, so names and module paths are its own.

    Raises:
        HomogeneityError: an input that is neither a tensor nor a constant (nested tensors).
    """
    tensors = [value for value in args if isinstance(value, torch.Tensor)]
    names = [name for name, value in kwargs.items() if isinstance(value, torch.Tensor)]
    fixed = {name: value for name, value in kwargs.items() if not isinstance(value, torch.Tensor)}
    if len(tensors) != len(args) or any(isinstance(v, (list, tuple, dict)) for v in fixed.values()):
        raise HomogeneityError("dynamic export takes tensor positional inputs and tensor or "
                               "constant keyword inputs only")
    tensors += [kwargs[name] for name in names]
    count = len(args)
    base = type(model)

    def forward(self: nn.Module, *inputs: torch.Tensor) -> Any:
        return base.forward(self, *inputs[:count], **dict(zip(names, inputs[count:])), **fixed)

    cls = type(base.__name__, (base,), {"forward": forward, "__module__": base.__module__,
                                         "__qualname__": base.__qualname__})
    batch = {t.shape[0] for t in tensors if t.dim()}
    limit = configured_positions(model)
    lengths: dict[int, Any] = {}
    shapes = []
    # A dimension of size 1 in the example is fixed by the exporter (it specializes sizes 0 and 1):
    # marked dynamic, the export fails and has to run again with it fixed (twice the time of a
    # one-sentence call). It stays fixed, and other sizes take the per-shape graphs.
    for tensor in tensors:
        dims: dict[int, Any] = {}
        if tensor.dim() and batch == {tensor.shape[0]} and tensor.shape[0] > 1:
            dims[0] = torch.export.Dim("batch", min=1)
        if tensor.dim() >= 2 and tensor.shape[1] > 1:
            size = int(tensor.shape[1])
            # The configured position limit up front: else the exporter finds it, fails, and
            # suggests it, and a second export (about 2 s on MiniLM) applies it.
            bound = {"max": limit} if limit is not None and size <= limit else {}
            lengths.setdefault(size, torch.export.Dim(f"length{len(lengths)}", min=1, **bound))
            dims[1] = lengths[size]
        shapes.append(dims or None)
    return cls, tuple(tensors), (tuple(shapes),)


def configured_positions(model: nn.Module) -> int | None:
    """The sequence length a Hugging Face config allows (position embeddings), if it names one."""
    config = getattr(model, "config", None)
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    return limit if isinstance(limit, int) and limit > 0 else None


@contextmanager
def _without_stack_traces() -> Iterator[None]:
    """Tracing without recording a Python stack trace per node: nothing here reads them (errors
    name modules from ``nn_module_stack``), and collecting them is about a sixth of an export."""
    saved = torch.fx.config.do_not_emit_stack_traces
    torch.fx.config.do_not_emit_stack_traces = True
    try:
        yield
    finally:
        torch.fx.config.do_not_emit_stack_traces = saved


@contextmanager
def _in_class(model: nn.Module, cls: type | None) -> Iterator[None]:
    """``model`` as an instance of ``cls`` (a subclass of its own) inside the block."""
    if cls is None:
        yield
        return
    original = model.__class__
    model.__class__ = cls
    try:
        yield
    finally:
        model.__class__ = original


def _export_dynamic(model: nn.Module, args: tuple[Any, ...], shapes: tuple[Any, ...]
                    ) -> torch.export.ExportedProgram:
    """Export with dynamic shapes; where the model bounds a dimension (position embeddings),
    once more with the bounds the exporter suggests.

    Without the fake-tensor dispatch cache: with symbolic sizes an op's cache entry costs more to
    make and check than the op it saves (a dynamic export takes about 1.6 to 1.9 times as long with
    it); a static export gains from it, and keeps it."""
    with torch._dynamo.config.patch(fake_tensor_cache_enabled=False):
        try:
            return torch.export.export(model, args, dynamic_shapes=shapes, strict=False)
        except torch._dynamo.exc.UserError as err:
            message = str(err)
            if "Suggested fixes:" not in message:
                raise
            # The fixes end at the first blank line; the parser reads every line after the heading.
            head, fixes = message.split("Suggested fixes:", 1)
            fixes = fixes.strip("\n").split("\n\n", 1)[0]
            refined = torch.export.dynamic_shapes.refine_dynamic_shapes_from_suggested_fixes(
                f"{head}Suggested fixes:\n{fixes}", shapes)
            return torch.export.export(model, args, dynamic_shapes=refined, strict=False)


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
    if not isinstance(node, torch.fx.Node):
        raise HomogeneityError(f"expected a torch.fx.Node, got {type(node).__name__}")
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


def target_name(target: Any) -> str:
    """The readable name of a graph target: ``aten.add.Tensor``, ``operator.getitem``.

    >>> import operator
    >>> target_name(torch.ops.aten.add.Tensor), target_name(operator.getitem)
    ('aten.add.Tensor', 'operator.getitem')
    """
    if getattr(target, "__module__", None) == "_operator":
        return f"operator.{target.__name__}"
    return str(target)
