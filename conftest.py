"""Every test and doctest session keeps exported graphs in a directory of its own (removed at the
end), never in the user's cache (see :mod:`saturated.export_cache`)."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if "NORMSAT_CACHE_DIR" not in os.environ:
        os.environ["NORMSAT_CACHE_DIR"] = tempfile.mkdtemp(prefix="normsat-exports-")
        config.stash[_OWN] = os.environ["NORMSAT_CACHE_DIR"]


def pytest_unconfigure(config: pytest.Config) -> None:
    own = config.stash.get(_OWN, None)
    if own is not None:
        shutil.rmtree(own, ignore_errors=True)
        del os.environ["NORMSAT_CACHE_DIR"]


_OWN = pytest.StashKey[str]()
