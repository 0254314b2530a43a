"""Parameter norms, directions and projections over training: :class:`NormTracker`.

The paper's picture of training (Merrill et al. 2021, §3 and §5): the parameter norm ‖θ_t‖ grows
(like √t for T5), the direction θ_t/‖θ_t‖ converges (consecutive checkpoints have cosine near 1),
and the gradient projection θᵀ∇L decides whether the norm keeps growing: a gradient step
δ = −η∇L changes the squared norm by 2θᵀδ + ‖δ‖² = −2η θᵀ∇L + η²‖∇L‖².

A tracker records, per step: the total ℓ2 norm; the norm per layer (the ``layer.N`` / ``h.N`` /
``block.N`` / ``layers.N`` modules, plus ``embeddings`` and ``other``); the norm per parameter
group; θᵀ∇L; θᵀδ for the update the optimizer actually made; and the cosine between the parameter
vector and the one at the previous recorded step, in total and per layer.

Cost: in a training run, the parameters (and the gradients) are copied once per call into a
flat float64 buffer with one fused ``torch._foreach_copy_``; per-parameter norms come from one
``torch._foreach_norm``, per-layer dot products from one ``torch.dot`` per layer slice (parameters
are ordered layer by layer). The tracker keeps one flat vector (θ at the last record) and one
scratch buffer of the same size that trade roles, never a copy of the model, and allocates
nothing per step. float64 makes δ = θ_after − θ_before exact for float32 parameters and keeps
cosines near 1 meaningful. Over checkpoints, the previous checkpoint's own tensors serve as θ_prev
and sums run in float64 chunk by chunk, so no checkpoint is ever copied whole.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from empirical.errors import EmpiricalError
from empirical.models.provenance import model_record, versions
from empirical.outputs import save_figure, write_text
from empirical.training.fits import fit_norm_growth, growth_curve
from empirical.training.probe import SaturationProbe, probe_scalars
from empirical.validation import check_measurable, check_step
from homogeneity.validation import describe

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "DEFAULT_GROUPS",
    "NormTracker",
    "ScalarWriter",
    "layer_labels",
    "layer_of",
    "plot_records",
    "record_scalars",
    "render_records",
]

SCHEMA = "normsat.norms/1"

#: Parameter groups of Hugging Face BERT / RoBERTa / GPT-2 / T5 / XLNet names. A parameter belongs
#: to the *first* group with a matching glob (so LayerNorm biases are norm layers, not biases);
#: parameters matching none form the group ``other``. ``lm_head`` counts as an embedding: tied to
#: the input embedding, it is the same tensor, and a checkpoint may store it under either name.
DEFAULT_GROUPS: dict[str, tuple[str, ...]] = {
    "norm layers": ("*LayerNorm*", "*layer_norm*", "*layernorm*", "*ln_*", "*.norm.*", "*_norm.*"),
    "embeddings": ("*embed*", "*wte.*", "*wpe.*", "shared.*", "*word_emb*", "*mask_emb*",
                   "lm_head.*"),
    "biases": ("*.bias", "*_bias"),
    "attention": ("*attention*", "*Attention*", "*attn*"),
    "feed-forward": ("*intermediate*", "*.output.dense*", "*mlp*", "*DenseReluDense*", "*.ff.*",
                     "*ffn*", "*feed_forward*"),
}

# The first ``<stack>.<index>`` in a name: BERT/RoBERTa/XLNet ``layer.N``, GPT-2 ``h.N``,
# T5 ``block.N`` (its inner ``layer.0`` comes after and is ignored), Llama-style ``layers.N``.
_LAYER = re.compile(r"(?:^|\.)(?:layer|layers|h|block|blocks)\.(\d+)(?=\.|$)")


def layer_of(name: str) -> str:
    """The layer a parameter belongs to: the module path up to its block index, else a coarse name.

    >>> layer_of("bert.encoder.layer.3.attention.self.query.weight")
    'bert.encoder.layer.3'
    >>> layer_of("encoder.block.1.layer.0.SelfAttention.q.weight")
    'encoder.block.1'
    >>> layer_of("transformer.wte.weight"), layer_of("transformer.ln_f.bias")
    ('embeddings', 'other')
    """
    match = _LAYER.search(name)
    if match:
        return name[: match.end()]
    if any(fnmatchcase(name, pattern) for pattern in DEFAULT_GROUPS["embeddings"]):
        return "embeddings"
    return "other"


def layer_labels(layers: Sequence[str]) -> dict[str, str]:
    """How tables and figures name the layers of :func:`layer_of`: as the similarity measure
    numbers hidden states, so layer 1 is the first block (the module path's index 0); with several
    stacks, each block's stack is named.

    >>> layer_labels(["embeddings", "blocks.0", "blocks.1", "other"])
    {'embeddings': 'embeddings', 'blocks.0': 'layer 1', 'blocks.1': 'layer 2', 'other': 'other'}
    >>> layer_labels(["encoder.block.0", "decoder.block.0"])
    {'encoder.block.0': 'encoder layer 1', 'decoder.block.0': 'decoder layer 1'}
    """
    blocks = {layer: _LAYER.search(layer) for layer in layers}
    stacks = {layer[: match.start()] for layer, match in blocks.items() if match}
    labels = {}
    for layer, match in blocks.items():
        if match is None:
            labels[layer] = layer
            continue
        stack = layer[: match.start()].rpartition(".")[2]
        prefix = f"{stack} " if len(stacks) > 1 and stack else ""
        labels[layer] = f"{prefix}layer {int(match.group(1)) + 1}"
    return labels


def _group_of(name: str, groups: Mapping[str, Sequence[str]]) -> str:
    for group, patterns in groups.items():
        if any(fnmatchcase(name, pattern) for pattern in patterns):
            return group
    return "other"


def _ordered_layers(layers: Sequence[str]) -> list[str]:
    """Embeddings, then each stack's blocks by index (stacks in order of appearance), then other."""
    stacks: dict[str, None] = dict.fromkeys(layer.rpartition(".")[0] for layer in layers)
    stack_rank = {stack: i for i, stack in enumerate(stacks)}

    def key(layer: str) -> tuple[int, int]:
        if layer == "embeddings":
            return (-1, 0)
        if layer == "other":
            return (len(stack_rank), 0)
        stack, _dot, index = layer.rpartition(".")
        return (stack_rank[stack], int(index))

    return sorted(set(layers), key=key)


def _none_if_nan(value: float) -> float | None:
    return None if math.isnan(value) or math.isinf(value) else value


def _cosine(dot: torch.Tensor, sq_a: torch.Tensor, sq_b: torch.Tensor) -> list[float | None]:
    """Cosines from dot products and squared norms; ``None`` where a vector is zero."""
    cos = dot / (sq_a * sq_b).sqrt()
    return [_none_if_nan(c) for c in cos.clamp(-1.0, 1.0).reshape(-1).tolist()]


# float64 temporaries of 512 KiB: they stay in cache, and stay below glibc's mmap threshold (an
# 8 MiB chunk cost an mmap, page faults and munmap per chunk: a scan ran ~30x slower).
_CHUNK = 1 << 16


def _chunked_sums(
    tensors: Sequence[torch.Tensor], previous: Sequence[torch.Tensor] | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-tensor ‖a‖² and a·b in float64, chunk by chunk: no full float64 copy is ever made.

    Products of float32 (or lower) values are exact in float64, so a·b is the exact dot product up
    to float64 summation error: cosines stay meaningful very near 1.
    """
    sq: list[float] = []
    dot: list[float] | None = None if previous is None else []
    with torch.no_grad():
        for i, tensor in enumerate(tensors):
            a = tensor.detach().reshape(-1)
            b = None if previous is None else previous[i].detach().reshape(-1)
            sq_i = dot_i = 0.0
            for start in range(0, a.numel(), _CHUNK):
                a64 = a[start:start + _CHUNK].to(torch.float64)
                sq_i += float(torch.dot(a64, a64))
                if b is not None:
                    dot_i += float(torch.dot(a64, b[start:start + _CHUNK].to(torch.float64)))
            sq.append(sq_i)
            if dot is not None:
                dot.append(dot_i)
    device = tensors[0].device
    return (torch.tensor(sq, dtype=torch.float64, device=device),
            None if dot is None else torch.tensor(dot, dtype=torch.float64, device=device))


#: The prefix of every scalar a tracker or callback hands to a dashboard.
PREFIX = "normsat/"


class ScalarWriter(Protocol):
    """What :class:`NormTracker` writes to: ``torch.utils.tensorboard.SummaryWriter`` or any object
    with this method (a W&B or MLflow adapter is three lines)."""

    def add_scalar(self, tag: str, scalar_value: float, global_step: int) -> Any: ...


def record_scalars(record: Mapping[str, Any], prefix: str = PREFIX) -> dict[str, float]:
    """The dashboard scalars of one record, tag → value; ``None`` values (not measured) are left out.

    Tags: ``norm``, ``grad_norm``, ``grad_projection`` (θᵀ∇L), ``update_norm``,
    ``update_projection`` (θᵀδ), ``cosine_prev``, ``loss``, and ``layer/<layer>`` (norm per layer),
    each after ``prefix``.

    >>> record_scalars({"step": 3, "norm": 2.0, "cosine_prev": None, "layers": {"h.0": 1.5}})
    {'normsat/norm': 2.0, 'normsat/layer/h.0': 1.5}
    """
    scalars = {f"{prefix}{name}": float(record[name])
               for name in ("norm", "grad_norm", "grad_projection", "update_norm", "update_projection",
                            "cosine_prev", "loss")
               if record.get(name) is not None}
    for layer, value in (record.get("layers") or {}).items():
        if value is not None:
            scalars[f"{prefix}layer/{layer}"] = float(value)
    return scalars


class NormTracker:
    """Record norms, per-layer and per-group norms, projections and direction changes over steps.

    In a training loop, call :meth:`after_backward` once the gradients exist and :meth:`after_step`
    once the optimizer has updated the parameters; without gradients (e.g. over checkpoints), call
    :meth:`record`. Steps must increase. The tracker reads parameters and never changes them.

    Args:
        model: the module whose parameters are tracked (``named_parameters()``, so tied weights
            count once), or a state dict name → tensor that fixes the names and shapes (for
            checkpoints, see :meth:`record`).
        groups: parameter groups, name → glob patterns over parameter names; a parameter belongs
            to the first group it matches, and unmatched ones to ``other``. ``None``:
            :data:`DEFAULT_GROUPS`.
        writer: if given, each record is written to it once complete (after :meth:`after_step`,
            or at once by :meth:`record`) as the scalars of :func:`record_scalars`, at the record's
            step: a ``torch.utils.tensorboard.SummaryWriter`` or any object with ``add_scalar``.
        prefix: the tags' prefix for ``writer``.
        probe: a :class:`~empirical.training.probe.SaturationProbe` run by :meth:`after_step` at
            its steps (the step after the update: the state the update made), written to
            ``writer`` with the norms; it needs ``model`` to be a module.

    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    >>> tracker = NormTracker(model, groups={"weights": ["*.weight"]})
    >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> for step in range(3):
    ...     loss = model(torch.ones(2, 3)).pow(2).mean()
    ...     loss.backward()
    ...     tracker.after_backward(step, loss)
    ...     optimizer.step()
    ...     optimizer.zero_grad()
    ...     tracker.after_step(step)
    >>> [r["step"] for r in tracker.records], sorted(tracker.records[0]["groups"])
    ([0, 1, 2], ['other', 'weights'])
    >>> r = tracker.records[1]
    >>> abs(r["update_projection"] + 0.1 * r["grad_projection"]) < 1e-6  # SGD: δ = −η∇L
    True
    """

    def __init__(
        self,
        model: nn.Module | Mapping[str, torch.Tensor],
        groups: Mapping[str, Sequence[str]] | None = None,
        *,
        writer: ScalarWriter | None = None,
        prefix: str = PREFIX,
        probe: SaturationProbe | None = None,
    ) -> None:
        self.probe = probe
        if writer is not None and not callable(getattr(writer, "add_scalar", None)):
            raise EmpiricalError(f"NormTracker expected a writer with an add_scalar method (e.g. a "
                                 f"SummaryWriter), got {type(writer).__name__}")
        self.writer = writer
        self.prefix = prefix
        if isinstance(model, nn.Module):
            check_measurable(model, "a NormTracker (it reads the parameters)")
        elif not isinstance(model, Mapping) or not all(
                isinstance(t, torch.Tensor) and not t.is_meta for t in model.values()):
            raise EmpiricalError(f"NormTracker expected a model or a state dict of tensors with values, "
                                 f"got {describe(model)}")
        self._model = model if isinstance(model, nn.Module) else None
        named = list(model.named_parameters()) if isinstance(model, nn.Module) else list(model.items())
        if not named:
            raise EmpiricalError("NormTracker expected a model with parameters, got none")
        groups = DEFAULT_GROUPS if groups is None else groups
        if not isinstance(groups, Mapping) or not all(
                isinstance(name, str) and isinstance(patterns, str | Sequence)
                for name, patterns in groups.items()):
            raise EmpiricalError(f"groups expected a mapping of name → list of glob patterns, got "
                                 f"{describe(groups)}")
        if any(isinstance(patterns, str) for patterns in groups.values()):
            raise EmpiricalError("groups expected name → list of glob patterns, got a bare string "
                                 "pattern; wrap it in a list")
        layer_by_name = {name: layer_of(name) for name, _ in named}
        self.layer_names: list[str] = _ordered_layers(list(layer_by_name.values()))
        # Parameters in layer order, so that each layer is one slice of the flat vector.
        named.sort(key=lambda item: self.layer_names.index(layer_by_name[item[0]]))
        self.names: list[str] = [name for name, _ in named]
        self.shapes: list[torch.Size] = [tensor.shape for _, tensor in named]
        # A state dict only fixes names and shapes: holding its tensors would keep one checkpoint
        # more in memory than a scan needs.
        self._params: list[torch.Tensor] = [tensor for _, tensor in named] if self._model else []
        group_by_name = {name: _group_of(name, groups) for name in self.names}
        # A group the caller named "other" is the same group as the unmatched parameters: one name.
        self.group_names: list[str] = [g for g in dict.fromkeys([*groups, "other"])
                                       if g in group_by_name.values()]
        device = named[0][1].device
        self._layer_index = torch.tensor([self.layer_names.index(layer_by_name[n]) for n in self.names],
                                         device=device)
        self._group_index = torch.tensor([self.group_names.index(group_by_name[n]) for n in self.names],
                                         device=device)
        self._sizes = [tensor.numel() for _, tensor in named]
        layer_ends = torch.zeros(len(self.layer_names), dtype=torch.long).index_add_(
            0, self._layer_index.cpu(), torch.tensor(self._sizes)).cumsum(0).tolist()
        self._layer_slices = [slice(start, end) for start, end in zip([0, *layer_ends], layer_ends)]
        self.records: list[dict[str, Any]] = []
        # θ at the last recorded step: in a training run a flat float64 copy (the parameters change
        # in place), in a scan the checkpoint's own tensors (they do not). A second flat buffer of
        # the same size is the scratch space of the current step; the two swap roles, so nothing
        # is allocated per step.
        self._buffers: list[tuple[torch.Tensor, list[torch.Tensor]]] = []
        self._previous: torch.Tensor | list[torch.Tensor] | None = None
        self._previous_sq: torch.Tensor | None = None  # per-parameter ‖θ_prev‖²
        self._awaiting_step: int | None = None  # step whose after_backward awaits its after_step

    # -- measurements ---------------------------------------------------------------------------

    def _load(self, tensors: Sequence[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Copy ``tensors`` into the flat float64 buffer that does not hold the previous θ."""
        if not self._buffers:
            for _ in range(2):
                flat = torch.empty(sum(self._sizes), dtype=torch.float64, device=tensors[0].device)
                views = [v.view(shape) for v, shape in zip(flat.split(self._sizes), self.shapes)]
                self._buffers.append((flat, views))
        flat, views = next(b for b in self._buffers if b[0] is not self._previous)
        torch._foreach_copy_(views, [t.detach() for t in tensors])
        return flat, views

    def _layer_dots(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """a·b over each layer's slice of two flat vectors."""
        return torch.stack([torch.dot(a[part], b[part]) for part in self._layer_slices])

    def _sum_by(self, index: torch.Tensor, count: int, per_parameter: torch.Tensor) -> torch.Tensor:
        return torch.zeros(count, dtype=torch.float64, device=per_parameter.device).index_add_(
            0, index.to(per_parameter.device), per_parameter)

    def _observe(self, step: int, sq: torch.Tensor, layer_dot: torch.Tensor | None) -> dict[str, Any]:
        """Append the record of ``step`` from per-parameter ‖θ‖² and per-layer θ·θ_prev."""
        layer_sq = self._sum_by(self._layer_index, len(self.layer_names), sq)
        group_sq = self._sum_by(self._group_index, len(self.group_names), sq)
        cosine: float | None = None
        layer_cosine: dict[str, float | None] | None = None
        if layer_dot is not None and self._previous_sq is not None:
            previous_sq = self._sum_by(self._layer_index, len(self.layer_names), self._previous_sq)
            cosine = _cosine(layer_dot.sum(), layer_sq.sum(), previous_sq.sum())[0]
            layer_cosine = dict(zip(self.layer_names, _cosine(layer_dot, layer_sq, previous_sq)))
        self._previous_sq = sq
        record: dict[str, Any] = {
            "step": int(step),
            "loss": None,
            "norm": math.sqrt(float(sq.sum())),
            "layers": dict(zip(self.layer_names, layer_sq.sqrt().tolist())),
            "groups": dict(zip(self.group_names, group_sq.sqrt().tolist())),
            "grad_norm": None,
            "grad_projection": None,
            "layer_grad_projection": None,
            "update_norm": None,
            "update_projection": None,
            "cosine_prev": cosine,
            "layer_cosine_prev": layer_cosine,
        }
        self.records.append(record)
        return record

    def _check_step(self, step: int) -> None:
        if self.records and step <= self.records[-1]["step"]:
            raise EmpiricalError(f"NormTracker expected steps to increase, got step {step} after "
                                 f"step {self.records[-1]['step']}")

    def _observe_parameters(self, step: int) -> torch.Tensor:
        """Record the tracked parameters; returns their flat float64 vector (kept as previous)."""
        if not self._params:
            raise EmpiricalError("this NormTracker was built from a state dict and has no parameters "
                                 "of its own; pass the state dict to record(step, state_dict)")
        self._check_step(step)
        with torch.no_grad():
            flat, views = self._load(self._params)
            sq = torch.stack(torch._foreach_norm(views)).square()
            if isinstance(self._previous, torch.Tensor):
                layer_dot: torch.Tensor | None = self._layer_dots(flat, self._previous)
            elif self._previous is not None:
                layer_dot = self._by_layer(_chunked_sums(views, self._previous)[1])
            else:
                layer_dot = None
            self._observe(step, sq, layer_dot)
        self._previous = flat
        return flat

    def _by_layer(self, per_parameter: torch.Tensor | None) -> torch.Tensor | None:
        if per_parameter is None:
            return None
        return self._sum_by(self._layer_index, len(self.layer_names), per_parameter)

    def record(self, step: int, state_dict: Mapping[str, torch.Tensor] | None = None) -> dict[str, Any]:
        """Record norms and direction change at ``step`` without gradients.

        Args:
            step: the training step; steps must increase.
            state_dict: parameters to measure instead of the tracked ones (a checkpoint); it must
                hold every tracked name with the same shape (extra entries are ignored). Its
                tensors are kept, not copied, until the next record: do not change them in place.

        Returns:
            The new record (also appended to :attr:`records`).
        """
        step = check_step(step)
        self._check_not_awaiting("record")
        if state_dict is None:
            self._observe_parameters(step)
            self._write(self.records[-1])
            return self.records[-1]
        tensors = self._matching(state_dict)
        self._check_step(step)
        previous = self._previous
        if isinstance(previous, torch.Tensor):
            previous = list(previous.split(self._sizes))
        sq, dot = _chunked_sums(tensors, previous)
        self._previous = tensors
        record = self._observe(step, sq, self._by_layer(dot))
        self._write(record)
        return record

    def previous_parameters(self) -> torch.Tensor | None:
        """A copy of the flat float64 θ the next record compares with (``None`` before the first
        record, or for a tracker built from a state dict): what :meth:`resume` needs to continue."""
        return self._previous.clone() if isinstance(self._previous, torch.Tensor) else None

    def resume(self, records: Sequence[Mapping[str, Any]], previous: torch.Tensor | None = None) -> None:
        """Continue an interrupted run's tracking, as if this tracker had recorded ``records``.

        Args:
            records: the records made so far (the next step must come after the last one).
            previous: :meth:`previous_parameters` of the tracker that made them; default: the
                tracked parameters as they are now (right for a tracker whose last record measured
                the parameters the run continues from).
        """
        self._check_not_awaiting("resume")
        if not self._params:
            raise EmpiricalError("resume needs a NormTracker built from a model, got one built from "
                                 "a state dict")
        if previous is not None and previous.numel() != sum(self._sizes):
            raise EmpiricalError(f"resume expected previous parameters of {sum(self._sizes)} values "
                                 f"(this model's), got {previous.numel()}")
        self.records = [dict(record) for record in records]
        with torch.no_grad():
            source = self._params if previous is None else list(
                previous.to(self._params[0].device).split(self._sizes))
            flat, views = self._load([s.view(shape) for s, shape in zip(source, self.shapes)])
            self._previous, self._previous_sq = flat, torch.stack(torch._foreach_norm(views)).square()

    def _matching(self, state_dict: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
        tensors = []
        for name, shape in zip(self.names, self.shapes):
            tensor = state_dict.get(name)
            if tensor is None:
                raise EmpiricalError(f"state dict does not match the architecture: tensor {name!r} "
                                     f"(shape {tuple(shape)}) is missing")
            if tensor.shape != shape:
                raise EmpiricalError(f"state dict does not match the architecture: tensor {name!r} "
                                     f"has shape {tuple(tensor.shape)}, expected {tuple(shape)}")
            tensors.append(tensor)
        return tensors

    def _check_not_awaiting(self, what: str) -> None:
        if self._awaiting_step is not None:
            raise EmpiricalError(f"NormTracker.{what}: after_backward({self._awaiting_step}) is "
                                 f"still waiting for after_step({self._awaiting_step})")

    def after_backward(self, step: int, loss: torch.Tensor | float | None = None) -> None:
        """Record norms, θᵀ∇L and ‖∇L‖ once the gradients of ``step`` exist (before the update).

        Parameters without a gradient contribute nothing to θᵀ∇L and ‖∇L‖.

        Args:
            step: the training step; steps must increase.
            loss: the step's scalar loss (tensor or float), recorded as a float.
        """
        step = check_step(step)
        self._check_not_awaiting("after_backward")
        loss_value: float | None = None
        if loss is not None:
            if isinstance(loss, torch.Tensor) and loss.numel() != 1:
                raise EmpiricalError(f"after_backward expected a scalar loss, got a tensor of shape "
                                     f"{tuple(loss.shape)}; reduce it (e.g. .mean()) first")
            if (isinstance(loss, torch.Tensor) and not loss.is_floating_point()) or \
                    isinstance(loss, bool) or not isinstance(loss, torch.Tensor | numbers.Real):
                # a string would be parsed by float(), a complex loss cut to its real part
                shown = f"a {loss.dtype} tensor" if isinstance(loss, torch.Tensor) else describe(loss)
                raise EmpiricalError(f"after_backward expected the loss as a real number or a floating "
                                     f"scalar tensor, got {shown}")
            loss_value = float(loss.detach() if isinstance(loss, torch.Tensor) else loss)
        flat = self._observe_parameters(step)
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self._params]
        with torch.no_grad():
            flat_grad, _views = self._load(grads)  # the scratch buffer: θ now is the previous one
            layer_projection = self._layer_dots(flat, flat_grad)
            self.records[-1].update(
                loss=loss_value,
                grad_norm=float(flat_grad.norm()),
                grad_projection=float(layer_projection.sum()),
                layer_grad_projection=dict(zip(self.layer_names, layer_projection.tolist())),
            )
        self._awaiting_step = int(step)

    def after_step(self, step: int) -> None:
        """Record θᵀδ and ‖δ‖ for the update δ the optimizer made at ``step``.

        θ is the parameter vector measured by :meth:`after_backward` for this step; the record's
        norm stays the one before the update (the one the gradient was taken at).

        Raises:
            EmpiricalError: if :meth:`after_backward` was not called for ``step``.
        """
        step = check_step(step)
        if self._awaiting_step != step:
            expected = ("no step is waiting" if self._awaiting_step is None
                        else f"step {self._awaiting_step} is waiting")
            raise EmpiricalError(f"after_step({step}) expected after_backward({step}) first; "
                                 f"{expected}")
        theta = self._previous
        assert isinstance(theta, torch.Tensor)  # after_backward left the flat θ
        with torch.no_grad():
            delta, _views = self._load(self._params)
            delta.sub_(theta)
            self.records[-1].update(update_norm=float(delta.norm()),
                          update_projection=float(torch.dot(theta, delta)))
        self._awaiting_step = None
        self._write(self.records[-1])
        if self.probe is not None and self._model is not None and self.probe.due(step + 1):
            probed = self.probe.measure(self._model, step + 1)
            if self.writer is not None:
                for tag, value in probe_scalars(probed, self.prefix).items():
                    self.writer.add_scalar(tag, value, step + 1)

    def _write(self, record: Mapping[str, Any]) -> None:
        if self.writer is not None:
            for tag, value in record_scalars(record, self.prefix).items():
                self.writer.add_scalar(tag, value, record["step"])

    # -- output ---------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Records, layers, groups and provenance as a JSON-ready dict."""
        return {
            "schema": SCHEMA,
            "model": model_record(self._model) if self._model is not None else None,
            "layers": self.layer_names,
            "groups": self.group_names,
            "records": self.records,
            "versions": versions(),
        }

    def to_json(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` as strict JSON (no NaN) to ``path``; returns the path."""
        out = Path(path)
        try:  # fail before touching the file
            text = json.dumps(self.to_dict(), indent=2, allow_nan=False)
        except ValueError as err:
            raise EmpiricalError(f"to_json expected finite numbers (no NaN or infinity) in the "
                                 f"records, got: {err}") from err
        return write_text(text + "\n", out)  # atomic: a crash never leaves half a file

    def plot(self, path: str | Path, *, title: str = "") -> Path:
        """Plot total norm (with the best growth law drawn over it, once there are enough records
        to fit one: :func:`empirical.training.fits.fit_norm_growth`), per-layer norms and per-layer
        consecutive cosine to ``path`` (the format its extension names)."""
        if not self.records:
            raise EmpiricalError("plot expected at least one record, got none")
        steps = [r["step"] for r in self.records]
        growth = fit_norm_growth(steps, [r["norm"] for r in self.records])
        return plot_records(self.records, path, fitted=growth_curve(growth, steps[0], steps[-1]),
                            title=title)


def plot_records(
    records: Sequence[Mapping[str, Any]],
    path: str | Path,
    *,
    fitted: tuple[str, Sequence[float], Sequence[float]] | None = None,
    title: str = "",
) -> Path:
    """Write :func:`render_records` to ``path`` (the format its extension names); returns the path."""
    return save_figure(render_records(records, fitted=fitted, title=title), path)


def render_records(
    records: Sequence[Mapping[str, Any]],
    *,
    fitted: tuple[str, Sequence[float], Sequence[float]] | None = None,
    title: str = "",
) -> Figure:
    """A figure of three panels: total norm (with a fitted curve), per-layer norms (paper Fig. 2
    right) and per-layer cosine between consecutive records (Fig. 3 right).

    Args:
        records: :attr:`NormTracker.records` or the ``records`` of a JSON result.
        fitted: ``(label, steps, norms)`` of a fitted law, drawn over the total norm.
        title: figure title.
    """
    # A bare Figure renders with Agg and leaves pyplot's global backend and state alone.
    from matplotlib.figure import Figure

    if not records:
        raise EmpiricalError("plot expected at least one record, got none")
    steps = [r["step"] for r in records]
    fig = Figure(figsize=(13.0, 3.8), dpi=110)
    total, per_layer, cosine = fig.subplots(1, 3)
    total.plot(steps, [r["norm"] for r in records], "o", markersize=3, label="‖θ‖")
    if fitted is not None:
        label, fit_steps, fit_norms = fitted
        total.plot(fit_steps, fit_norms, "-", color="C3", label=label)
    total.set_xlabel("step")
    total.set_ylabel("parameter norm ‖θ‖")
    # The corner the curve leaves empty, below a rising curve's end or above a falling one's
    # ("best" put the two-line fit label over the first steps of a curve that levels off).
    rising = records[-1]["norm"] >= records[0]["norm"]
    total.legend(fontsize="x-small", loc="lower right" if rising else "upper right")
    labels = layer_labels(list(records[0]["layers"]))
    for index, layer in enumerate(records[0]["layers"]):
        color = f"C{index % 10}"
        per_layer.plot(steps, [r["layers"][layer] for r in records], color=color, label=labels[layer])
        cos = [(r["step"], r["layer_cosine_prev"][layer]) for r in records
               if r["layer_cosine_prev"] is not None and r["layer_cosine_prev"][layer] is not None]
        if cos:
            cosine.plot(*zip(*cos), color=color, marker=".", label=labels[layer])
    per_layer.set_xlabel("step")
    per_layer.set_ylabel("parameter norm per layer")  # the parameters' norm, not a LayerNorm
    per_layer.legend(fontsize="x-small")
    cosine.set_xlabel("step")
    cosine.set_ylabel(r"cos($\theta_t$, $\theta_{\mathrm{prev}}$) per layer")
    cosine.legend(fontsize="x-small", loc="center left", bbox_to_anchor=(1.02, 0.5))
    for ax in (total, per_layer, cosine):
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
