"""Spectral norm bounds kept on disk: computed once per weight's values, read back in any process,
recomputed when the values, or a file, change."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import saturated.stored_norms as stored
from saturated.rounding import tensor_spectral_norm
from saturated.spectral import spectral_norm_bound


@pytest.fixture
def computed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[torch.Size]]:
    """A fresh cache directory, and the shapes of the bounds actually computed."""
    monkeypatch.setenv("NORMSAT_CACHE_DIR", str(tmp_path))
    made: list[torch.Size] = []

    def counted(matrix: torch.Tensor, depth: int = 4) -> float:
        made.append(matrix.shape)
        return spectral_norm_bound(matrix, depth)

    monkeypatch.setattr(stored, "spectral_norm_bound", counted)
    return tmp_path, made


def test_a_bound_is_computed_once_per_values_and_read_back(computed: tuple[Path, list[torch.Size]]) -> None:
    root, made = computed
    weight = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    first = stored.stored_spectral_norm_bound(weight)
    assert first == spectral_norm_bound(weight) and made == [weight.shape]
    assert len(list((root / "spectral").iterdir())) == 1
    assert stored.stored_spectral_norm_bound(weight.clone()) == first and len(made) == 1  # equal values: read
    changed = weight.clone()
    changed[0, 0] += 1.0
    assert stored.stored_spectral_norm_bound(changed) == spectral_norm_bound(changed) and len(made) == 2
    # another dtype has its own entry, with the same bound (float32 values are exact in float64)
    assert stored.stored_spectral_norm_bound(weight.double()) == first and len(made) == 3


def test_an_unreadable_file_is_computed_again_and_replaced(computed: tuple[Path, list[torch.Size]]) -> None:
    root, made = computed
    weight = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    bound = stored.stored_spectral_norm_bound(weight)
    (path,) = (root / "spectral").iterdir()
    for junk in ("not a number", "-0x1.0p+0", "nan"):
        path.write_text(junk)
        assert stored.stored_spectral_norm_bound(weight) == bound
        assert float.fromhex(path.read_text()) == bound
    assert len(made) == 4 and not list((root / "spectral").glob("*.part"))


def test_no_cache_directory_computes_every_time(computed: tuple[Path, list[torch.Size]],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    root, made = computed
    monkeypatch.setenv("NORMSAT_CACHE_DIR", "")
    weight = torch.eye(3)
    assert stored.stored_spectral_norm_bound(weight) == stored.stored_spectral_norm_bound(weight) >= 1.0
    assert len(made) == 2 and not list(root.iterdir())


def test_a_bound_in_another_dtype_is_keyed_by_the_models_own_tensor(
        computed: tuple[Path, list[torch.Size]]) -> None:
    root, made = computed
    weight = torch.randn(5, 3, generator=torch.Generator().manual_seed(2))
    wide = stored.stored_spectral_norm_bound(weight, dtype=torch.float64)
    assert wide == spectral_norm_bound(weight.double()) and len(made) == 1
    assert stored.stored_spectral_norm_bound(weight, dtype=torch.float64) == wide and len(made) == 1  # read
    # float32 values are float64 values: the weight in its own dtype shares the entry
    assert stored.stored_spectral_norm_bound(weight) == wide and len(made) == 1
    # a narrower dtype rounds the values: their own bound and entry; a float64 copy has its own
    half = stored.stored_spectral_norm_bound(weight, dtype=torch.float16)
    assert half == spectral_norm_bound(weight.half()) and len(made) == 2
    stored.stored_spectral_norm_bound(weight.double())
    assert len(made) == 3 and len(list((root / "spectral").iterdir())) == 3


def test_a_weight_read_in_float32_and_float64_gets_one_bound(computed: tuple[Path, list[torch.Size]],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A float32 weight's float64 copy holds its values: one bound serves both passes, with no cache
    directory too (kept in memory per version of the weight)."""
    _, made = computed
    monkeypatch.setenv("NORMSAT_CACHE_DIR", "")
    weight = torch.randn(4, 6, generator=torch.Generator().manual_seed(3))
    narrow = tensor_spectral_norm(weight, torch.float32)()
    assert tensor_spectral_norm(weight, torch.float64)() == narrow and len(made) == 1
    assert tensor_spectral_norm(weight, torch.float16)() == spectral_norm_bound(weight.half())
    assert len(made) == 2
