"""export_progress: the export counts the modules it traces, each once, and only inside its block."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from homogeneity.tracing import export_model, export_progress


class Twice(nn.Module):
    """One linear map applied twice, and a module the forward never calls."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Linear(3, 3)
        self.unused = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shared(torch.relu(self.shared(x)))


@pytest.mark.parametrize("dynamic", [False, True])
def test_each_traced_module_is_heard_once_and_an_uncalled_one_never(dynamic: bool) -> None:
    heard: list[tuple[int, int]] = []
    with export_progress(lambda done, total: heard.append((done, total))):
        export_model(Twice(), (torch.randn(2, 3),), dynamic=dynamic)
    assert heard == [(0, 3), (1, 3), (2, 3)]  # the start, the root and `shared` (not `unused`)


def test_nothing_is_heard_outside_the_block_and_an_inner_block_gives_way_to_the_outer() -> None:
    outer: list[int] = []
    inner: list[int] = []
    with export_progress(lambda done, _total: outer.append(done)):
        with export_progress(lambda done, _total: inner.append(done)):
            export_model(Twice(), (torch.randn(2, 3),))
        export_model(nn.Linear(3, 1), (torch.randn(2, 3),))
    export_model(Twice(), (torch.randn(2, 3),))
    assert inner == [0, 1, 2] and outer == [0, 1]
