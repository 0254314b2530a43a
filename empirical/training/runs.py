"""The small CPU language model behind ``normsat train``: build it, train it, evaluate it.

Three causal transformer LMs, random-init, trained on the built-in corpus:

- ``pre``: GPT-2 (pre-LN), from :class:`transformers.GPT2Config`.
- ``post``: BERT (post-LN, the architecture of BERT and of the paper's control runs) as a decoder
  with causal masking, from :class:`transformers.BertConfig` (``is_decoder=True``).
- ``t5``: T5's decoder as a causal LM (:class:`~empirical.training.t5.T5DecoderLM`: RMSNorm,
  no biases, ReLU feed-forward, relative position bias), the paper's √t architecture.
- ``scale-invariant``: :class:`ScaleInvariantLM`, whose loss is unchanged when every parameter is
  scaled (Li & Arora 2019): no biases, a LayerNorm without eps or affine after every sublayer,
  on queries and keys, and on the logits. :func:`confirm_scale_invariant` checks with
  :func:`homogeneity.analyze` that its logits are exactly 0-homogeneous before any training.

While training, a :class:`~empirical.training.norms.NormTracker` records every step (norm, θᵀ∇L, θᵀδ) and
a second one the log-spaced evaluation steps (the paper's consecutive-checkpoint cosines). At
those steps the model is evaluated on held-out sentences (loss, perplexity, next-token accuracy,
and per-layer similarity to its saturated version at c = 1000 and c = ∞) and saved as safetensors.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import safetensors.torch
import torch
import transformers
from torch import nn
from torch.nn import functional as F
from tqdm.auto import tqdm
from transformers.modeling_outputs import CausalLMOutput

from empirical.errors import EmpiricalError
from empirical.interrupts import Interrupted, deferred, interrupt_signal, signal_name
from empirical.locking import folder_lock
from empirical.measure.scaled import parameter_norm
from empirical.measure.similarity import representation_similarity
from empirical.models.corpus import Corpus, load_corpus
from empirical.models.loading import minilm_path
from empirical.models.provenance import model_record, versions
from empirical.outputs import Result, atomic_path, check_output_dir
from empirical.training.choices import ARCHITECTURES, OPTIMIZERS, SCHEDULES
from empirical.training.fits import fit_norm_growth
from empirical.training.norms import NormTracker
from empirical.training.resume import ResumeState, load_state, resume_path, save_state
from empirical.training.run_document import SCHEMA, check_run_document, read_run_file
from empirical.training.t5 import T5DecoderLM, t5_decoder_config
from empirical.validation import check_real, check_seed
from homogeneity import Grade, HomogeneityError, analyze
from homogeneity.report import HomogeneityReport
from homogeneity.validation import describe

__all__ = [
    "ARCHITECTURES",
    "OPTIMIZERS",
    "SATURATION_SCALES",
    "SCHEDULES",
    "CompactTokenizer",
    "ScaleInvariantLM",
    "TrainConfig",
    "TrainResult",
    "TrainingDiverged",
    "TrainingInterrupted",
    "build_model",
    "checkpoint_path",
    "confirm_scale_invariant",
    "evaluation_steps",
    "load_checkpoint",
    "read_run",
    "train",
]

MIN_STEPS = 3
"""Two-parameter laws need three points (one degree of freedom for the noise)."""
SATURATION_SCALES = (1000.0, math.inf)
"""The scales c of the saturation measurement: the paper's c = 1000 and the exact limit."""


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a run; bad values are refused at construction (:meth:`validate`).

    Attributes:
        arch: ``post`` (BERT decoder), ``pre`` (GPT-2), ``scale-invariant`` or ``t5`` (T5's decoder).
        layers, width, heads: transformer depth, hidden size and attention heads.
        steps: optimizer steps. lr: peak learning rate. schedule: ``constant``, ``linear``
            (decay to 0 at the last step) or ``sqrt`` (lr/√t, T5's inverse square root).
        weight_decay: decoupled for AdamW and Adafactor, an L2 term for SGD.
        optimizer: ``sgd``, ``adamw`` or ``adafactor`` (:class:`transformers.optimization.Adafactor`
            with ``lr`` as given: no relative step, no parameter scaling).
        batch_size, context: blocks per step and tokens per block (training text is packed).
        evaluations: how many log-spaced evaluation/checkpoint steps (step 0 comes on top).
        eval_sentences: held-out sentences for the saturation measurement (all held-out text is
            used for loss and accuracy).
        limit_similarity: measure each layer's cosine similarity between the hidden states at θ_t
            and at c·θ_t (c = 1000 and the exact limit) at every evaluation (the slow part).
        seed: seeds the initialization and the batch order.
    """

    arch: str = "pre"
    layers: int = 2
    width: int = 64
    heads: int = 2
    steps: int = 1000
    lr: float = 1e-3
    schedule: str = "constant"
    weight_decay: float = 0.0
    optimizer: str = "adamw"
    batch_size: int = 16
    context: int = 64
    evaluations: int = 10
    eval_sentences: int = 64
    limit_similarity: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        self.validate()  # at construction: a bad config never exists

    def validate(self) -> None:
        """Raise :class:`EmpiricalError` naming the first bad field, what it got and what it needs."""
        for name, allowed in (("arch", ARCHITECTURES), ("optimizer", OPTIMIZERS),
                              ("schedule", SCHEDULES)):
            value = getattr(self, name)
            if value not in allowed:
                raise EmpiricalError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        for name in ("layers", "width", "heads", "steps", "batch_size", "evaluations",
                     "eval_sentences"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise EmpiricalError(f"{name} must be a positive integer, got {describe(value)}")
        check_seed(self.seed)
        check_real(self.lr, "lr", low=0, low_open=True)
        check_real(self.weight_decay, "weight_decay", low=0)
        if not isinstance(self.limit_similarity, bool):
            raise EmpiricalError(f"limit_similarity must be True or False, got "
                                 f"{describe(self.limit_similarity)}")
        if self.steps < MIN_STEPS:
            raise EmpiricalError(f"steps must be at least {MIN_STEPS} (the fewest points a growth law "
                                 f"is fitted to), got {self.steps}")
        if isinstance(self.context, bool) or not isinstance(self.context, int) or self.context < 2:
            raise EmpiricalError(f"context must be at least 2 tokens (one prediction), got {self.context}")
        if self.width % self.heads:
            raise EmpiricalError(f"width must be divisible by heads, got width {self.width} and "
                                 f"{self.heads} heads")


class TrainingDiverged(EmpiricalError):
    """The training loss stopped being finite (the learning rate is too large for the model)."""


class TrainingInterrupted(Interrupted):
    """A run stopped by Ctrl-C or SIGTERM; :attr:`result` is the run as of its last checkpoint
    (``None`` if none was written), its :attr:`TrainResult.stopped` saying where and why."""

    def __init__(self, signum: int, result: TrainResult | None) -> None:
        super().__init__(signum)
        self.result = result


# -- tokens -------------------------------------------------------------------------------------


class CompactTokenizer:
    """MiniLM's WordPiece tokenizer with ids renumbered onto the pieces the training text uses.

    The built-in corpus uses about 2,700 of the 30,522 WordPiece ids. Keeping the full table would
    make the never-updated embedding rows dominate the parameter norm (and the softmax dominate CPU
    time); the renumbered vocabulary keeps the same segmentation. Held-out pieces the training text
    never used become ``[UNK]``. Called like a Hugging Face tokenizer (``input_ids`` only).

    Args:
        pieces: the MiniLM ids kept, in order of their new ids.
        base: the MiniLM tokenizer (loaded offline when omitted).
    """

    def __init__(self, pieces: Sequence[int], base: Any = None) -> None:
        self.base = base if base is not None else _minilm_tokenizer()
        self.pieces = tuple(int(p) for p in pieces)
        self._new_id = {piece: i for i, piece in enumerate(self.pieces)}
        specials = {"unk": self.base.unk_token_id, "pad": self.base.pad_token_id,
                    "cls": self.base.cls_token_id, "sep": self.base.sep_token_id}
        absent = [f"{name} ({piece})" for name, piece in specials.items() if piece not in self._new_id]
        if absent:
            raise EmpiricalError(f"expected the vocabulary to keep the special tokens' ids, got none "
                                 f"for {', '.join(absent)}")
        self.unk_token_id = self._new_id[self.base.unk_token_id]
        self.pad_token_id = self._new_id[self.base.pad_token_id]
        self.cls_token_id = self._new_id[self.base.cls_token_id]
        self.sep_token_id = self._new_id[self.base.sep_token_id]

    @classmethod
    def fit(cls, sentences: Sequence[str], base: Any = None) -> CompactTokenizer:
        """The special tokens, then every piece of ``sentences`` by decreasing count."""
        base = base if base is not None else _minilm_tokenizer()
        counts = Counter(i for ids in base(list(sentences), verbose=False)["input_ids"] for i in ids)
        specials = [base.pad_token_id, base.unk_token_id, base.cls_token_id, base.sep_token_id]
        rest = sorted((i for i in counts if i not in specials), key=lambda i: (-counts[i], i))
        return cls([*specials, *rest], base)

    def __len__(self) -> int:
        return len(self.pieces)

    def __call__(self, texts: Sequence[str], **options: Any) -> dict[str, list[list[int]]]:
        """Tokenize like the base tokenizer (same options), returning renumbered ``input_ids``."""
        ids = self.base(list(texts), **options)["input_ids"]
        return {"input_ids": [[self._new_id.get(i, self.unk_token_id) for i in row] for row in ids]}


def _minilm_tokenizer() -> Any:
    return transformers.AutoTokenizer.from_pretrained(minilm_path(), local_files_only=True,
                                                      trust_remote_code=False)


def _split(corpus: Corpus) -> tuple[list[str], list[str]]:
    """Every tenth sentence is held out (deterministic, spread over the whole corpus)."""
    sentences = list(corpus)
    return ([s for i, s in enumerate(sentences) if i % 10],
            [s for i, s in enumerate(sentences) if i % 10 == 0])


def _blocks(tokenizer: CompactTokenizer, sentences: Sequence[str], context: int) -> torch.Tensor:
    """Sentences ([CLS] … [SEP] each) packed into one stream and cut into rows of ``context`` ids."""
    stream = [i for ids in tokenizer(sentences, verbose=False)["input_ids"] for i in ids]
    rows = len(stream) // context
    if rows < 1:
        raise EmpiricalError(f"expected at least {context} tokens of text to make one block, got "
                             f"{len(stream)}; use a smaller context")
    return torch.tensor(stream[: rows * context]).view(rows, context)


# -- models -------------------------------------------------------------------------------------


def _normalize(x: torch.Tensor) -> torch.Tensor:
    """LayerNorm with no eps and no affine: exactly 0-homogeneous (the paper's Lemma 5)."""
    return F.layer_norm(x, x.shape[-1:], eps=0.0)


class _ScaleInvariantBlock(nn.Module):
    """h + N(attention(h)), then h + N(mlp(h)); N = :func:`_normalize`, no biases anywhere.

    The residual stream stays of degree 0; attention scores are cosines of normalized queries and
    keys (degree 0, so softmax is exactly 0-homogeneous, not only approximately).
    """

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(width, width, bias=False)
        self.key = nn.Linear(width, width, bias=False)
        self.value = nn.Linear(width, width, bias=False)
        self.output = nn.Linear(width, width, bias=False)
        self.up = nn.Linear(width, 4 * width, bias=False)
        self.down = nn.Linear(4 * width, width, bias=False)

    def forward(self, h: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        batch, length, width = h.shape

        def split(x: torch.Tensor) -> torch.Tensor:
            return x.view(batch, length, self.heads, width // self.heads).transpose(1, 2)

        q, k = _normalize(split(self.query(h))), _normalize(split(self.key(h)))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(width // self.heads)
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        mixed = (weights @ split(self.value(h))).transpose(1, 2).reshape(batch, length, width)
        h = h + _normalize(self.output(mixed))
        return h + _normalize(self.down(torch.relu(self.up(h))))


class ScaleInvariantLM(nn.Module):
    """A causal LM whose logits (hence loss) are exactly 0-homogeneous in all its parameters.

    Token and position embeddings are summed and normalized; each block adds normalized sublayer
    outputs; the logits are the normalized products of the last hidden state with the (tied) token
    embeddings. It answers like a Hugging Face causal LM (``logits``, ``hidden_states``).

    >>> config = transformers.PretrainedConfig(vocab_size=11, hidden_size=8, num_hidden_layers=1,
    ...                                        num_attention_heads=2, max_position_embeddings=6)
    >>> model = ScaleInvariantLM(config)
    >>> ids = torch.tensor([[1, 2, 3]])
    >>> scaled = {n: 7 * p.detach() for n, p in model.named_parameters()}
    >>> grown = torch.func.functional_call(model, scaled, (ids,))
    >>> torch.allclose(model(ids).logits, grown.logits, atol=1e-5)
    True
    """

    def __init__(self, config: transformers.PretrainedConfig) -> None:
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embedding = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.blocks = nn.ModuleList(
            _ScaleInvariantBlock(config.hidden_size, config.num_attention_heads)
            for _ in range(config.num_hidden_layers)
        )
        # GPT-2's initializer range: the loss ignores the scale, but ‖θ‖ sets the effective step
        # size η/‖θ‖² (nn.Embedding's N(0, 1) would make the embeddings dominate ‖θ‖ 50-fold).
        for parameter in self.parameters():
            nn.init.normal_(parameter, std=0.02)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                output_hidden_states: bool = False, return_dict: bool = True) -> CausalLMOutput:
        length = input_ids.shape[1]
        positions = torch.arange(length, device=input_ids.device)
        h = _normalize(self.token_embedding(input_ids) + self.position_embedding(positions))
        # Boolean masks (never a large finite constant): position i sees real tokens j ≤ i.
        allowed = torch.ones(length, length, dtype=torch.bool, device=input_ids.device).tril()
        if attention_mask is not None:
            allowed = allowed & attention_mask.bool()[:, None, None, :]
        states = [h]
        for block in self.blocks:
            h = block(h, allowed)
            states.append(h)
        logits = _normalize(h @ self.token_embedding.weight.transpose(0, 1))
        return CausalLMOutput(logits=logits, hidden_states=tuple(states) if output_hidden_states else None)


def build_model(config: TrainConfig, vocab_size: int, pad_id: int) -> nn.Module:
    """The random-init model of ``config.arch``, seeded with ``config.seed``, without dropout.

    The generator state is forked, so the caller's global torch random state is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        return _build_architecture(config, vocab_size, pad_id)


def _build_architecture(config: TrainConfig, vocab_size: int, pad_id: int) -> nn.Module:
    """The model of ``config.arch`` from the current random state."""
    sizes: dict[str, Any] = {
        "vocab_size": vocab_size, "pad_token_id": pad_id, "hidden_size": config.width,
        "num_hidden_layers": config.layers, "num_attention_heads": config.heads,
        "max_position_embeddings": config.context,
    }
    hf_config: transformers.PretrainedConfig
    if config.arch == "scale-invariant":
        return ScaleInvariantLM(transformers.PretrainedConfig(**sizes))
    if config.arch == "t5":
        return T5DecoderLM(t5_decoder_config(vocab_size, config.width, config.layers, config.heads, pad_id))
    if config.arch == "pre":
        hf_config = transformers.GPT2Config(
            vocab_size=vocab_size, n_embd=config.width, n_layer=config.layers, n_head=config.heads,
            n_positions=config.context, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
            bos_token_id=pad_id, eos_token_id=pad_id, pad_token_id=pad_id,
        )
    else:
        hf_config = transformers.BertConfig(
            **sizes, intermediate_size=4 * config.width, type_vocab_size=1, is_decoder=True,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        )
    return transformers.AutoModelForCausalLM.from_config(hf_config, attn_implementation="eager")


def confirm_scale_invariant(model: nn.Module, input_ids: torch.Tensor) -> HomogeneityReport:
    """:func:`homogeneity.analyze` of the logits; raise unless they are exactly 0-homogeneous.

    Raises:
        EmpiricalError: the logits have another degree or grade (e.g. a bias sneaked in), or the
            model cannot be traced.
    """
    try:
        report = analyze(model, input_ids)
    except HomogeneityError as err:
        raise EmpiricalError(f"cannot confirm scale invariance: {err}") from err
    logits = report.outputs.get("logits")
    if logits is None or logits.value != 0 or logits.grade is not Grade.EXACT:
        found = "no 'logits' output" if logits is None else (
            f"degree {logits.value} ({logits.grade.value}): {logits.reason}")
        raise EmpiricalError(f"expected the scale-invariant model's logits to be exactly "
                             f"0-homogeneous in its parameters, but homogeneity.analyze found {found}")
    return report


# -- training -----------------------------------------------------------------------------------


def evaluation_steps(steps: int, count: int) -> list[int]:
    """Step 0 and ``count`` log-spaced steps from 1 to ``steps`` (fewer when they coincide); the
    last step always comes last.

    >>> evaluation_steps(1000, 4)
    [0, 1, 10, 100, 1000]
    >>> evaluation_steps(3, 10)
    [0, 1, 2, 3]
    >>> evaluation_steps(50, 1)
    [0, 50]
    """
    spaced = np.unique(np.rint(np.geomspace(1, steps, count)).astype(int)) if count > 1 else [steps]
    return [0, *(int(s) for s in spaced)]


def checkpoint_path(out: str | Path, step: int) -> Path:
    """Where the checkpoint of ``step`` lives inside a run folder."""
    return Path(out) / "checkpoints" / f"step-{step:07d}.safetensors"


def _make_optimizer(config: TrainConfig, model: nn.Module) -> torch.optim.Optimizer:
    params = list(model.parameters())
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.lr, weight_decay=config.weight_decay)
    if config.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    return transformers.optimization.Adafactor(
        params, lr=config.lr, weight_decay=config.weight_decay, scale_parameter=False,
        relative_step=False, warmup_init=False,
    )


def _lr_factor(config: TrainConfig) -> Callable[[int], float]:
    """Multiplier of the peak lr after ``t`` completed steps (LambdaLR's convention)."""
    if config.schedule == "linear":
        return lambda t: 1.0 - t / config.steps
    if config.schedule == "sqrt":
        return lambda t: 1.0 / math.sqrt(t + 1)
    return lambda t: 1.0


def _next_token(model: nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean next-token cross-entropy over a batch of packed blocks, and the count of correct argmaxes."""
    logits = model(input_ids=ids).logits[:, :-1]
    targets = ids[:, 1:]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return loss, (logits.argmax(-1) == targets).sum()


@dataclass
class _Data:
    tokenizer: CompactTokenizer
    train: torch.Tensor
    heldout: torch.Tensor
    heldout_sentences: list[str]
    corpus: Corpus


def _prepare_data(config: TrainConfig, corpus: Corpus) -> _Data:
    train_text, heldout_text = _split(corpus)
    if not heldout_text or not train_text:
        raise EmpiricalError(f"expected a corpus of at least 2 sentences to hold one out, got {len(corpus)}")
    tokenizer = CompactTokenizer.fit(train_text)
    return _Data(tokenizer, _blocks(tokenizer, train_text, config.context),
                 _blocks(tokenizer, heldout_text, config.context), heldout_text, corpus)


def _evaluate(config: TrainConfig, model: nn.Module, data: _Data, step: int) -> dict[str, Any]:
    """Held-out loss, perplexity, accuracy, norm and (optionally) per-layer saturation at ``step``."""
    model.eval()
    total, correct = 0.0, 0
    with torch.no_grad():
        for rows in data.heldout.split(config.batch_size):
            loss, right = _next_token(model, rows)
            total += float(loss) * rows[:, 1:].numel()  # the mean over this batch's predictions
            correct += int(right)
    predictions = data.heldout[:, 1:].numel()
    loss_value = total / predictions
    result: dict[str, Any] = {
        "step": step, "loss": loss_value, "perplexity": math.exp(min(loss_value, 700.0)),
        "accuracy": correct / predictions, "norm": parameter_norm(model.parameters()),
    }
    if config.limit_similarity:
        sentences = data.heldout_sentences[: config.eval_sentences]
        saturation = {}
        for scale in SATURATION_SCALES:
            measured = representation_similarity(model, data.tokenizer, sentences, scale=scale)
            saturation["inf" if math.isinf(scale) else f"{scale:g}"] = dict(
                zip(measured.layers, measured.per_layer))
        result["saturation"] = saturation
    return result


@dataclass
class TrainResult(Result):
    """What a run produced: per-step records, log-spaced evaluations, checkpoint cosines, fits.

    Attributes:
        config: the run's :class:`TrainConfig`.
        records: :attr:`NormTracker.records` of every step (norm before the step's update, θᵀ∇L,
            θᵀδ, per-layer norms).
        checkpoints: records at the evaluation steps (cosine to the previous evaluation step: the
            paper's consecutive-checkpoint cosine, Figure 3).
        evaluations: held-out measurements at the evaluation steps.
        fits: the growth document of the norm against the step
            (:func:`empirical.training.fits.fit_norm_growth`: ``fits``, ``best``, ``best_by_aic``, ``n``,
            ``skipped``, ``layer_growth``), spread at the top level of :meth:`to_dict` as in
            ``normsat norms`` JSON.
        model: the model record (class, parameter count, configuration).
        homogeneity: for ``scale-invariant``, the confirmed degree and grade of the logits.
        vocabulary: the MiniLM ids kept, in order of their new ids (:class:`CompactTokenizer`).
        stopped: ``None`` for a finished run. For an unfinished one (``fits`` then empty, the records
            up to its last checkpoint): ``last_checkpoint``, the step it resumes from, and, if it
            was interrupted, ``at_step`` (the step under way) and ``signal`` (``SIGINT``,
            ``SIGTERM``); both ``None`` while the run is under way, or if it was killed.
        checkpoint_sha256: the SHA-256 of each checkpoint file written, by step (as a string):
            a resumed run checks the checkpoint it continues from against it.
    """

    config: TrainConfig
    records: list[dict[str, Any]]
    checkpoints: list[dict[str, Any]]
    evaluations: list[dict[str, Any]]
    fits: dict[str, Any]
    model: dict[str, Any]
    corpus: dict[str, Any]
    vocabulary: list[int]
    homogeneity: dict[str, Any] | None = None
    provenance: dict[str, Any] = field(default_factory=lambda: {"versions": versions()})
    stopped: dict[str, Any] | None = None
    checkpoint_sha256: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (schema ``normsat.train/2``)."""
        return {"schema": SCHEMA, "config": asdict(self.config), "stopped": self.stopped,
                "model": self.model, "corpus": self.corpus, "homogeneity": self.homogeneity, **self.fits,
                "evaluations": self.evaluations,
                "checkpoints": self.checkpoints, "records": self.records,
                "vocabulary": self.vocabulary, "checkpoint_sha256": self.checkpoint_sha256,
                "provenance": self.provenance}

    def table(self) -> str:
        """Plain text: one row per evaluation step (held-out loss, accuracy, ‖θ‖)."""
        rows = [f"{'step':>8}  {'loss':>8}  {'accuracy':>8}  {'norm':>10}"]
        rows += [f"{e['step']:>8}  {e['loss']:>8.4f}  {e['accuracy']:>8.4f}  {e['norm']:>10.4f}"
                 for e in self.evaluations]
        return "\n".join(rows)


def train(config: TrainConfig, out: str | Path | None = None, *, corpus: Corpus | None = None,
          progress: bool = False, device: str | torch.device = "cpu", resume: bool = False,
          before_writing: Callable[[], None] | None = None) -> TrainResult:
    """Train ``config``'s model, tracking norms at every step and evaluating at log-spaced steps.

    With ``out``, each evaluation step leaves a complete checkpoint in ``out/checkpoints/``, the
    run so far in ``out/train.json`` (:attr:`TrainResult.stopped` says it is unfinished) and the
    resume file (:mod:`empirical.training.resume`), each written atomically. The finished run's
    ``train.json`` is the caller's to write (``normsat train`` does, then deletes the resume file).
    ``out`` is locked for the length of the run (:func:`empirical.locking.folder_lock`): a second
    run on it is refused, naming this one's process.

    Args:
        config: the run (validated first).
        out: run folder (nothing is written when ``None``).
        corpus: the text (default: the whole built-in corpus).
        progress: a tqdm bar showing step, loss and norm.
        device: where the model trains (the batch order is drawn on the CPU, so a seed gives
            the same batches on every device).
        resume: continue the unfinished run in ``out`` from its last checkpoint: parameters,
            optimizer state, schedule, batch order and records are restored, so the run goes on as
            if it had not stopped (``config`` and the corpus must be the run's own). The
            checkpoint is checked against the SHA-256 and the norm the run recorded for it first.
        before_writing: called once every input is checked, right before the run writes its first
            file (``normsat train --overwrite`` deletes the replaced run's files there).

    Raises:
        TrainingInterrupted: Ctrl-C or SIGTERM; ``out/train.json`` then says where the run stopped.
        EmpiricalError: a bad configuration, an ``out`` that is a file, a scale-invariant model
            that :func:`homogeneity.analyze` does not confirm, a loss that stops being finite, or
            with ``resume`` a folder without an unfinished run of ``config``, or whose state
            (train.json, the resume file, the checkpoint) does not agree with itself.
        FolderInUse: another process is running in ``out``.
    """
    if resume and out is None:
        raise EmpiricalError("resume expected the run folder out of an unfinished run, got out=None")
    if out is None:
        return _train(config, None, corpus, progress, device, None, before_writing)
    folder = check_output_dir(out, what="the run folder")
    with folder_lock(folder, what="the run folder"):
        saved = _resumable(folder, config, device) if resume else None
        return _train(config, folder, corpus, progress, device, saved, before_writing)


def _train(config: TrainConfig, out: Path | None, corpus: Corpus | None, progress: bool,
           device: str | torch.device, saved: ResumeState | None,
           before_writing: Callable[[], None] | None) -> TrainResult:
    """:func:`train`, its folder locked and the state it resumes from (if any) read."""
    data = _prepare_data(config, corpus if corpus is not None else load_corpus(n=None))
    if saved is not None and saved.document["corpus"]["sha256"] != data.corpus.sha256:
        raise EmpiricalError(f"cannot resume the run in {out} on another corpus: it has sha256 "
                             f"{saved.document['corpus']['sha256'][:16]}…, got {data.corpus.sha256[:16]}…")
    data = replace(data, train=data.train.to(device), heldout=data.heldout.to(device))
    model = build_model(config, len(data.tokenizer), data.tokenizer.pad_token_id).to(device)
    homogeneity = None
    if config.arch == "scale-invariant":
        report = confirm_scale_invariant(model, data.train[:1])
        homogeneity = {"output": "logits", "degree": int(report.outputs["logits"].value),
                       "grade": report.outputs["logits"].grade.value}
    optimizer = _make_optimizer(config, model)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_factor(config))
    tracker, at_checkpoints = NormTracker(model), NormTracker(model)
    batches = torch.Generator().manual_seed(config.seed)
    wanted = evaluation_steps(config.steps, config.evaluations)
    evaluations: list[dict[str, Any]] = []
    checksums: dict[str, str] = {}
    first = 1
    if saved is not None and out is not None:
        _restore(saved, checkpoint_path(out, saved.step), model, optimizer, schedule, batches)
        checksums = dict(saved.document.get("checkpoint_sha256", {}))
        if saved.previous is not None:  # at step 0 no record has been made yet
            tracker.resume(saved.document["records"], saved.previous)
        at_checkpoints.resume(saved.document["checkpoints"])
        evaluations = list(saved.document["evaluations"])
        first = saved.step + 1

    def result(fits: dict[str, Any], stopped: dict[str, Any] | None, last: int) -> TrainResult:
        """The run through step ``last``."""
        return TrainResult(
            config=config, records=[r for r in tracker.records if r["step"] <= last],
            checkpoints=[r for r in at_checkpoints.records if r["step"] <= last],
            evaluations=[e for e in evaluations if e["step"] <= last], fits=fits,
            model=model_record(model), corpus=data.corpus.to_dict(),
            vocabulary=list(data.tokenizer.pieces), homogeneity=homogeneity, stopped=stopped,
            checkpoint_sha256={s: digest for s, digest in checksums.items() if int(s) <= last})

    saved_step = saved.step if saved is not None else None  # the last checkpoint fully written

    def checkpoint(step: int) -> None:
        nonlocal saved_step
        evaluations.append(_evaluate(config, model, data, step))
        at_checkpoints.record(step)
        if out is not None:
            with deferred():  # the checkpoint, the resume file and train.json land together
                with atomic_path(checkpoint_path(out, step)) as temporary:
                    safetensors.torch.save_model(model, str(temporary))
                    checksums[str(step)] = file_sha256(temporary)
                unfinished = result({}, {"last_checkpoint": step, "at_step": None, "signal": None}, step)
                save_state(resume_path(out), ResumeState(
                    step=step, document=unfinished.to_dict(), optimizer=optimizer.state_dict(),
                    schedule=schedule.state_dict(), generator=batches.get_state(),
                    previous=tracker.previous_parameters()))
                unfinished.to_json(Path(out) / "train.json")
                saved_step = step  # inside: a signal held back is raised after it
        saved_step = step

    step = first - 1
    if before_writing is not None:
        before_writing()
    try:
        if saved is None:
            checkpoint(0)
        bar = tqdm(range(first, config.steps + 1), desc=f"train {config.arch}", unit="step",
                   disable=not progress, initial=first - 1, total=config.steps)
        for step in bar:
            _train_step(config, model, data, optimizer, tracker, batches, step, device)
            schedule.step()
            if step in wanted:
                checkpoint(step)
            bar.set_postfix(loss=f"{tracker.records[-1]['loss']:.3f}",
                            norm=f"{tracker.records[-1]['norm']:.2f}", refresh=False)
        model.eval()
        # Every law with more points than parameters; the others are listed under "skipped".
        fits = fit_norm_growth(
            [r["step"] for r in tracker.records], [r["norm"] for r in tracker.records],
            {layer: [r["layers"][layer] for r in tracker.records] for layer in tracker.layer_names})
    except KeyboardInterrupt as err:
        raise _stopped(err, step, saved_step, out, result) from None
    return result(fits, None, config.steps)


def file_sha256(path: str | Path) -> str:
    """The SHA-256 hex digest of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(2**20):
            digest.update(block)
    return digest.hexdigest()


def _resumable(out: Path, config: TrainConfig, device: str | torch.device) -> ResumeState:
    """The resume file of the unfinished run in ``out``, once it, ``train.json`` and the checkpoint
    it continues from agree: the same step, the same configuration, and the checkpoint's SHA-256
    the one the run recorded. Nothing is written before (or by) these checks.

    Raises:
        EmpiricalError: naming the file that does not agree and how.
    """
    saved = load_state(resume_path(out), device)
    document, where = saved.document, resume_path(out)
    check_run_document(document, f"the resume file {where}")
    corpus = document["corpus"]
    if not isinstance(corpus, dict) or not isinstance(corpus.get("sha256"), str):
        raise EmpiricalError(f"expected corpus in the resume file {where} to be an object with the "
                             f"corpus' sha256, got {describe(corpus)}")
    if document["config"] != asdict(config):
        raise EmpiricalError(f"cannot resume the run in {out} with another configuration: it has "
                             f"{document['config']}, got {asdict(config)}")
    stopped = document["stopped"]
    ends = {name: document[name][-1]["step"] for name in ("checkpoints", "evaluations")
            if document[name]}
    if stopped is None or stopped["last_checkpoint"] != saved.step or \
            any(end != saved.step for end in ends.values()) or \
            (document["records"] and document["records"][-1]["step"] != saved.step):
        held = "is finished" if stopped is None else f"stopped after step {stopped['last_checkpoint']}"
        records = document["records"][-1]["step"] if document["records"] else "none"
        raise EmpiricalError(
            f"cannot resume from {where}: it is of step {saved.step}, but the run it holds {held}, "
            f"with records to step {records} and checkpoints to step "
            f"{ends.get('checkpoints', 'none')}; the file was edited or is damaged")
    if saved.step >= config.steps:
        raise EmpiricalError(f"cannot resume from {where}: it is of step {saved.step}, and the run "
                             f"has {config.steps} steps; the file was edited or is damaged")
    on_disk = read_run(out, unfinished=True)
    if on_disk["stopped"] is None or on_disk["stopped"]["last_checkpoint"] != saved.step:
        last = None if on_disk["stopped"] is None else on_disk["stopped"]["last_checkpoint"]
        raise EmpiricalError(f"cannot resume the run in {out}: {out / 'train.json'} says its last "
                             f"checkpoint is of step {last}, and {where} is of step {saved.step}")
    checkpoint = checkpoint_path(out, saved.step)
    if not checkpoint.is_file():
        raise EmpiricalError(f"cannot resume: the resume file is of step {saved.step}, but its "
                             f"checkpoint {checkpoint} is missing")
    recorded = {document.get("checkpoint_sha256", {}).get(str(saved.step)),
                on_disk.get("checkpoint_sha256", {}).get(str(saved.step))} - {None}
    if len(recorded) > 1:
        raise EmpiricalError(f"cannot resume the run in {out}: {out / 'train.json'} and {where} "
                             f"record different checksums for the checkpoint of step {saved.step}")
    actual = file_sha256(checkpoint)
    if recorded and actual not in recorded:
        raise EmpiricalError(f"cannot resume from the checkpoint {checkpoint}: its SHA-256 is "
                             f"{actual[:16]}…, and the run recorded {next(iter(recorded))[:16]}…; it "
                             "was replaced, truncated or changed since it was written")
    return saved


def _train_step(config: TrainConfig, model: nn.Module, data: _Data, optimizer: torch.optim.Optimizer,
                tracker: NormTracker, batches: torch.Generator, step: int,
                device: str | torch.device) -> None:
    """One optimizer step on a batch drawn from ``batches``, recorded by ``tracker``."""
    model.train()
    rows = data.train[torch.randint(len(data.train), (config.batch_size,), generator=batches).to(device)]
    loss, _right = _next_token(model, rows)
    if not torch.isfinite(loss):
        raise TrainingDiverged(f"the training loss is {float(loss.detach())} at step {step} (lr "
                               f"{config.lr:g}, {config.optimizer}); expected a finite loss, "
                               "try a smaller lr")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    tracker.after_backward(step, loss)
    optimizer.step()
    tracker.after_step(step)


def _restore(saved: ResumeState, checkpoint: Path, model: nn.Module, optimizer: torch.optim.Optimizer,
             schedule: torch.optim.lr_scheduler.LRScheduler, batches: torch.Generator) -> None:
    """Put the parameters, optimizer, schedule and batch order back as they were at ``saved.step``."""
    try:
        safetensors.torch.load_model(model, str(checkpoint))
    except (OSError, RuntimeError, safetensors.SafetensorError) as err:
        raise EmpiricalError(f"cannot resume from the checkpoint {checkpoint}: it is not a checkpoint "
                             f"of this run's model ({str(err).splitlines()[0][:200]})") from None
    recorded = saved.document["evaluations"][-1]["norm"] if saved.document["evaluations"] else None
    norm = parameter_norm(model.parameters())
    if recorded is not None and not math.isclose(norm, recorded, rel_tol=1e-6):
        raise EmpiricalError(f"cannot resume from the checkpoint {checkpoint}: its parameter norm is "
                             f"{norm:.6g}, but the run recorded {recorded:.6g} at step {saved.step}; "
                             "the file was replaced or changed")
    try:
        optimizer.load_state_dict(saved.optimizer)
        schedule.load_state_dict(saved.schedule)
        batches.set_state(saved.generator)
    except (KeyError, ValueError, TypeError, RuntimeError) as err:
        raise EmpiricalError(f"cannot resume from the resume file beside {checkpoint}: its optimizer, "
                             f"schedule or batch state does not fit this run ({err})") from None
    shapes = [tuple(p.shape) for group in optimizer.param_groups for p in group["params"]]
    for index, values in optimizer.state_dict()["state"].items():
        for name, value in values.items():
            if isinstance(value, torch.Tensor) and value.dim() == len(shapes[index]) \
                    and tuple(value.shape) != shapes[index]:
                raise EmpiricalError(f"cannot resume: the resume file's optimizer state {name!r} of "
                                     f"parameter {index} has shape {tuple(value.shape)}, the "
                                     f"parameter {shapes[index]}")


def _stopped(err: KeyboardInterrupt, step: int, saved_step: int | None, out: str | Path | None,
             result: Callable[[dict[str, Any], dict[str, Any] | None, int], TrainResult]
             ) -> TrainingInterrupted:
    """The interrupt of a run at ``step``; with ``out``, its ``train.json`` says where it stopped."""
    signum = interrupt_signal(err)
    if saved_step is None:  # not even step 0's checkpoint was written: nothing to keep
        return TrainingInterrupted(signum, None)
    stopped = {"last_checkpoint": saved_step, "at_step": step, "signal": signal_name(signum)}
    partial = result({}, stopped, saved_step)
    if out is not None:
        with deferred():  # a second Ctrl-C waits until this small file is in place
            partial.to_json(Path(out) / "train.json")
    return TrainingInterrupted(signum, partial)


def read_run(run: str | Path, *, unfinished: bool = False) -> dict[str, Any]:
    """The ``train.json`` document of a ``normsat train`` folder.

    Args:
        run: the run folder.
        unfinished: also accept a run that was interrupted (or is still under way).

    Raises:
        EmpiricalError: no ``train.json`` there, one that is too large, not strict JSON, of
            another schema or with a field out of form
            (:func:`~empirical.training.run_document.check_run_document`), or an unfinished run
            (unless ``unfinished``).
    """
    path = Path(run).expanduser() / "train.json"
    if not path.is_file():
        raise EmpiricalError(f"expected a normsat train folder holding train.json, got {Path(run)}")
    data = read_run_file(path)  # bounded, and every field a reader uses checked
    stopped = data.get("stopped")
    if stopped is not None and not unfinished:
        how = (f"interrupted by {stopped['signal']} at step {stopped['at_step']}" if stopped["signal"]
               else "under way, or killed")
        raise EmpiricalError(f"expected a finished run in {Path(run)}, got an unfinished one ({how}; "
                             f"checkpoints up to step {stopped['last_checkpoint']}); finish it with "
                             f"normsat train --out {Path(run)} --resume")
    return data


def load_checkpoint(run: str | Path, step: int) -> tuple[nn.Module, CompactTokenizer]:
    """The model of a ``normsat train`` folder at ``step`` (in eval mode) and its tokenizer."""
    folder = Path(run)
    meta = read_run(folder, unfinished=True)  # a checkpoint is complete even if its run is not
    path = checkpoint_path(folder, step)
    if not path.is_file():
        saved = sorted(p.name for p in (folder / "checkpoints").glob("*.safetensors"))
        raise EmpiricalError(f"no checkpoint of step {step} in {folder}; saved: {', '.join(saved)}")
    tokenizer = CompactTokenizer(meta["vocabulary"])
    model = build_model(TrainConfig(**meta["config"]), len(tokenizer), tokenizer.pad_token_id)
    safetensors.torch.load_model(model, str(path))
    return model.eval(), tokenizer
