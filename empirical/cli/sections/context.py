"""What a report section receives and returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from torch import nn

from empirical.models.corpus import Corpus, load_corpus
from empirical.models.loading import load_model

__all__ = ["ReportContext", "Section"]


@dataclass
class ReportContext:
    """What sections share: where to write, and the default model pair and corpus, loaded once."""

    out: Path
    model: str = "minilm"
    sentences: int = 100
    seed: int = 0
    progress: bool = True
    corpus_path: str | None = None
    load_options: dict[str, Any] = field(default_factory=dict)
    """Further :func:`~empirical.models.loading.load_model` options: num_layers, dtype, device, tokenizer."""
    train_dir: str | None = None
    """A ``normsat train`` folder for the training section (None: the section makes a short run)."""

    @cached_property
    def corpus(self) -> Corpus:
        return load_corpus(self.corpus_path, n=self.sentences)

    @cached_property
    def pretrained(self) -> tuple[nn.Module, Any]:
        return load_model(self.model, **self.load_options)

    @cached_property
    def random_init(self) -> tuple[nn.Module, Any]:
        return load_model(self.model, random_init=True, seed=self.seed, **self.load_options)

    def figure(self, name: str) -> Path:
        """Path of a figure file inside the report folder."""
        return self.out / name


@dataclass
class Section:
    """A titled piece of the report: Markdown text (figures linked by file name) and JSON data."""

    key: str
    title: str
    markdown: str
    data: dict[str, Any] = field(default_factory=dict)
