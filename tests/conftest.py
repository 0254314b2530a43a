"""Shared fixtures and hypothesis profiles.

Profiles: ``fast`` (default, the same examples every run) keeps the suite within minutes on 2 cores;
``thorough`` runs many more examples, new ones each run. Select it with the environment variable
NORMSAT_HYPOTHESIS_PROFILE=thorough.
"""

from __future__ import annotations

import importlib.util
import locale
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import transformers
from hypothesis import HealthCheck, settings
from torch import nn

from empirical.models.loading import load_model

# The fast profile draws the same examples on every run (CI must not pass or fail by chance);
# the thorough one explores new ones each time.
settings.register_profile(
    "fast", max_examples=20, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("NORMSAT_HYPOTHESIS_PROFILE", "fast"))

# Under pytest-xdist the workers share the cores: each takes its share of torch's threads rather
# than all of them (oversubscribed threads make every worker slower).
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

@pytest.fixture(scope="session")
def load_script() -> Callable[[Path, str], ModuleType]:
    """Loads a script of the repository (not a package module) as a module, by path and name."""
    def load(path: Path, name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    """The C locale's ASCII encoding for text files opened without one (as on a bare server)."""
    previous = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, previous)


FAMILIES = ("bert", "roberta", "gpt2", "xlnet", "t5")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``gpu`` need a CUDA device: skipped on machines without one."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def minilm() -> tuple[nn.Module, Any]:
    """The real pretrained all-MiniLM-L6-v2 (6 layers), shared by the whole session."""
    return load_model("minilm")


@pytest.fixture(scope="session")
def small_models() -> dict[str, tuple[nn.Module, Any]]:
    """Two-layer random-init models of every family, base width, built once per session."""
    return {family: load_model(family, random_init=True, num_layers=2) for family in FAMILIES}


@pytest.fixture(scope="session")
def ball_pass() -> Callable[..., Any]:
    """A limit's graph run in ball arithmetic at ``bits`` on keyword inputs ``batch`` of
    ``entries`` batch entries, as the refinement runs it: the model's own tensors, the outputs
    the limit keeps."""
    from torch.utils import _pytree as pytree

    from saturated.precision import run_balls

    def run(limit: Any, batch: dict[str, Any], entries: int, bits: int = 128) -> Any:
        program = limit.program(**batch)
        tensors = {**dict(limit.model.named_buffers()), **dict(limit.model.named_parameters())}
        inputs = [leaf for leaf in pytree.tree_leaves(batch) if isinstance(leaf, torch.Tensor)]
        return run_balls(program, tensors, inputs, mask_threshold=1e9, bits=bits, entries=entries,
                         keep=limit._keep(program))
    return run


TINY_BERT = {"vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 2,
             "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 32}
"""A BERT small enough for CLI tests in a fraction of a second, with BERT's vocabulary size."""


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a seeded two-layer TINY_BERT (safetensors, config, no tokenizer files)."""
    folder = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    transformers.BertModel(transformers.BertConfig(**TINY_BERT)).save_pretrained(folder)
    return folder
