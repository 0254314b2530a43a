"""Shared fixtures and hypothesis profiles.

Profiles: ``fast`` (default) keeps the suite within minutes on 2 cores; ``thorough`` runs many more
examples. Select with the environment variable NORMSAT_HYPOTHESIS_PROFILE=thorough.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from torch import nn

from empirical.models import load_model

settings.register_profile(
    "fast", max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("NORMSAT_HYPOTHESIS_PROFILE", "fast"))

FAMILIES = ("bert", "roberta", "gpt2", "xlnet", "t5")


@pytest.fixture(scope="session")
def minilm() -> tuple[nn.Module, Any]:
    """The real pretrained all-MiniLM-L6-v2 (6 layers), shared by the whole session."""
    return load_model("minilm")


@pytest.fixture(scope="session")
def small_models() -> dict[str, tuple[nn.Module, Any]]:
    """Two-layer random-init models of every family, base width, built once per session."""
    return {family: load_model(family, random_init=True, num_layers=2) for family in FAMILIES}
