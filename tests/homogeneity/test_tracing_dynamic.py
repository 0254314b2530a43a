"""Dynamic export of a one-sentence example: one export, not a failed one and a second."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from homogeneity import tracing


class Attend(nn.Module):
    """softmax(x Wₖ xᵀ) x over the positions of each batch entry."""

    def __init__(self) -> None:
        super().__init__()
        self.key = nn.Linear(4, 4, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x @ self.key(x).mT, dim=-1) @ x


@pytest.mark.parametrize(("batch", "length", "dynamic"), [
    (1, 5, {"length0"}),  # one sentence: its length stays dynamic, the batch of one is fixed
    (3, 1, {"batch"}),  # one token each
    (3, 5, {"batch", "length0"}),
])
def test_a_size_one_dimension_is_fixed_up_front(batch: int, length: int, dynamic: set[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    export = torch.export.export

    def counted(*args: object, **kwargs: object) -> torch.export.ExportedProgram:
        calls.append(kwargs.get("dynamic_shapes"))
        return export(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch.export, "export", counted)
    torch.manual_seed(0)
    model = Attend()
    x = torch.randn(batch, length, 4)
    program = tracing.export_model(model, (x,), dynamic=True)
    assert len(calls) == 1
    (shape,) = calls[0][0]
    assert {dim.__name__ for dim in (shape or {}).values()} == dynamic
    assert torch.allclose(program.module()(x), model(x))
