"""Levels that failed wholesale, kept beside the graph on disk: a new process (here: a fresh model
object of the same configuration) skips them, and a file that cannot be read changes nothing."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import torch
from torch import nn

from saturated.rules import Settings
from saturated.saturate import SaturatedModel

SATURATE = importlib.import_module("saturated.saturate")


class Config:
    """What the export cache reads of a Hugging Face configuration."""

    def to_json_string(self, use_diff: bool = False) -> str:
        return json.dumps({"model_type": "two-heads"})


class TwoHeads(nn.Module):
    """A linear map read two ways, as it is and through tanh; entry [1, 1]'s flag input is
    10000.0009765625 − 10000 (exact in float32), inside float32's rounding bound of its dot
    product, so a batch of such entries fails wholesale in float32 and float64 decides it."""

    def __init__(self) -> None:
        super().__init__()
        self.config = Config()
        torch.manual_seed(0)
        self.hidden = nn.Linear(2, 3, bias=False)
        self.flag = nn.Linear(2, 1, bias=False)
        with torch.no_grad():
            self.flag.weight.copy_(torch.tensor([[10000.0009765625, -10000.0]]))

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"hidden": self.hidden(x), "flag": torch.tanh(self.flag(x))}


X = torch.tensor([[1.0, 1.0]] * 4)


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[torch.dtype]:
    """A fresh cache directory, and the dtype of every pass the interpreter makes."""
    monkeypatch.setenv("NORMSAT_CACHE_DIR", str(tmp_path))
    made: list[torch.dtype] = []
    run = SATURATE.run_terms

    def counted(*args: object) -> object:
        made.append(args[4][1])  # type: ignore[index]
        return run(*args)

    monkeypatch.setattr(SATURATE, "run_terms", counted)
    return made


def _levels_file(root: Path) -> Path:
    (path,) = (root / "levels").glob("*.json")
    return path


def test_a_level_that_failed_wholesale_is_skipped_by_a_new_model_object(runs: list[torch.dtype],
                                                                         tmp_path: Path) -> None:
    first = SaturatedModel(TwoHeads(), Settings())(X)
    assert runs == [torch.float32, torch.float64] and first.refined == (0, 1, 2, 3)
    assert json.loads(_levels_file(tmp_path).read_text()) == [["torch.float32", 1]]
    runs.clear()
    again = SaturatedModel(TwoHeads(), Settings())(X)  # no graph in memory: read from disk
    assert runs == [torch.float64]  # float32 not run
    assert torch.equal(again.value["flag"], first.value["flag"])
    assert torch.equal(again.value["hidden"], first.value["hidden"]) and again.refined == first.refined
    runs.clear()
    SaturatedModel(TwoHeads(), Settings(), outputs={"hidden"})(X)  # other outputs: their own record
    assert runs == [torch.float32]


@pytest.mark.parametrize("text", ["[[\"torch.float32\", 1", "{}", '[["torch.float64", 16], ["x"], 3]'])
def test_a_file_that_cannot_be_read_or_names_the_last_level_is_ignored(
        runs: list[torch.dtype], tmp_path: Path, text: str) -> None:
    first = SaturatedModel(TwoHeads(), Settings())(X)
    path = _levels_file(tmp_path)
    path.write_text(text)  # partly written, not a list, or naming the level no call may skip
    runs.clear()
    again = SaturatedModel(TwoHeads(), Settings())(X)
    assert runs == [torch.float32, torch.float64]
    assert torch.equal(again.value["flag"], first.value["flag"])
    assert ["torch.float32", 1] in json.loads(path.read_text())  # learnt again and stored


def test_without_a_cache_directory_nothing_is_stored(runs: list[torch.dtype], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NORMSAT_CACHE_DIR", "")
    SaturatedModel(TwoHeads(), Settings())(X)
    runs.clear()
    SaturatedModel(TwoHeads(), Settings())(X)
    assert runs == [torch.float32, torch.float64] and not list(tmp_path.iterdir())


def test_a_level_known_to_fail_is_stored_once(runs: list[torch.dtype],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    stored: list[tuple[object, ...]] = []
    store = SATURATE.store_failed_level
    monkeypatch.setattr(SATURATE, "store_failed_level", lambda *level: (stored.append(level), store(*level)))
    model = SaturatedModel(TwoHeads(), Settings())
    first = model(X)
    again = model(X)  # float32 refused at once: known in memory, nothing new to store
    assert len(stored) == 1 and stored[0][2:] == ("torch.float32", 1)
    assert runs == [torch.float32, torch.float64, torch.float64]
    assert torch.equal(again.value["flag"], first.value["flag"])


def test_a_change_to_the_limit_source_keys_failed_levels_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Within one version a rule may change what a level decides (a git checkout, an editable
    install): the levels stored under the source before are not read under the new one."""
    from saturated import failed_levels

    before = failed_levels.call_digest(outputs=None)
    assert failed_levels.call_digest(outputs=None) == before
    monkeypatch.setattr(failed_levels, "_source_digest", lambda: "another source")
    assert failed_levels.call_digest(outputs=None) != before
