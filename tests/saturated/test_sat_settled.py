"""What the rounding bounds cost, for the same bounds: carried errors settled as the pass runs
(without keeping every operand of the graph alive until the outputs read them), and no subnormal
operands in their arithmetic."""

from __future__ import annotations

import gc
import math
import weakref

import pytest
import torch
import transformers

from empirical.models.loading import family_config
from homogeneity.tracing import export_model
from saturated.errors import SaturationError
from saturated.interpreter import LimitInterpreter, placeholder_values
from saturated.rounding import Rounding, product_rounding, smallest_subnormal
from saturated.rules import Settings
from saturated.terms import Term

F32, F64 = torch.float32, torch.float64
IDS = torch.tensor([[3, 17, 42, 9, 11], [5, 6, 25, 8, 2]])


def _chain(x: torch.Tensor, weight: torch.Tensor, steps: int) -> tuple[Rounding, weakref.ref]:
    """The bound of ``steps`` products x·w, each reading the one before as its operand (as a
    residual stream's linear maps do), and a reference to a tensor only the first bound holds."""
    first = x.clone()
    held = weakref.ref(first)
    rounding = Rounding(1.0, lambda: first.abs(), 2, carried=lambda t, e: torch.full_like(first, 2.0**-40))
    for step in range(steps):
        rounding = product_rounding(torch.mul, [((x, rounding), (weight, None))], 2.0 + step, 1, x.shape)
    return rounding, held


def test_a_settled_carried_error_is_the_one_read_later_and_frees_what_it_was_computed_from() -> None:
    x = torch.tensor([1.5, -0.25, 3.0], dtype=F64)
    weight = torch.tensor([0.5, 2.0, -1.0], dtype=F64)
    lazy, _ = _chain(x, weight, 4)
    assert lazy.carried is not None
    want = lazy.carried(F64, 0.125)
    settled, held = _chain(x, weight, 4)
    assert held() is not None  # the lazy bound reaches back to the first operand
    settled.settle(F64, 0.125)
    gc.collect()
    assert held() is None
    assert settled.carried is not None
    assert torch.equal(settled.carried(F64, 0.125), want)
    assert torch.equal(settled.bound(F64, 0.125, carried=True), lazy.bound(F64, 0.125, carried=True))
    # Read from a part of another precision: the bound of the precision it was computed in.
    assert torch.equal(settled.carried(F32, 0.125), want)
    with pytest.raises(SaturationError, match=r"settled for operand error 0.125 was read for 0.5"):
        settled.carried(F64, 0.5)


def test_subnormal_operand_bounds_enter_a_product_as_the_smallest_normal_number() -> None:
    """An operand whose magnitude is 0 at some entries has a bound of n times the smallest
    subnormal there: the product reads the smallest normal number instead (a larger bound, by
    less than that number), and exact zeros stay zero."""
    x = torch.tensor([[0.0, 1.0], [0.0, 0.0]], dtype=F64)
    weight = torch.tensor([[2.0, -1.0], [0.5, 4.0]], dtype=F64)
    rx = Rounding(1.0, lambda: x.abs(), 3, carried=lambda t, e: torch.zeros(2, 2, dtype=t))
    rx_bound = rx.bound(F64, 0.0, carried=True, cheap=True)
    assert 0 < float(rx_bound[1, 0]) < torch.finfo(F64).tiny  # the premise: subnormal entries
    product = product_rounding(torch.matmul, [((x, rx), (weight, Rounding.of_exact(weight, 1.0)))], 2.0, 2,
                               torch.Size([2, 2]))
    assert product.carried is not None
    carried = product.carried(F64, 0.0)
    lifted = torch.where((rx_bound > 0) & (rx_bound < torch.finfo(F64).tiny), torch.finfo(F64).tiny, rx_bound)
    assert torch.equal(carried, lifted @ weight.abs())
    assert bool((carried >= rx_bound @ weight.abs()).all())
    assert 3 * smallest_subnormal(F64) == float(rx_bound[1, 1])
    nothing = torch.zeros(2, 2, dtype=F64)
    zero = Rounding(1.0, lambda: nothing, 0, carried=lambda t, e: nothing.to(t))
    none = product_rounding(torch.matmul, [((x, zero), (weight, Rounding.of_exact(weight, 1.0)))], 2.0, 2,
                            torch.Size([2, 2]))
    assert none.carried is not None and not bool(none.carried(F64, 0.0).any())


def _tiny_llama() -> torch.nn.Module:
    config = family_config("llama", hidden_size=32, intermediate_size=64, vocab_size=64,
                           num_attention_heads=4, num_hidden_layers=2, num_key_value_heads=2,
                           head_dim=8, pad_token_id=None)
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(config, attn_implementation="eager").eval()


def _outputs(interpreter: LimitInterpreter, makers: list) -> list[Term]:
    with torch.no_grad():
        return [out for out in interpreter.run(*makers, enable_io_processing=False) if isinstance(out, Term)]


def test_the_pass_settles_the_bounds_the_outputs_read_and_gives_the_bounds_read_at_the_end() -> None:
    """A two-layer Llama in float64: every hidden state's bound, carried error included, is the
    one the same pass gives when nothing is settled; attention scores (read by softmax, which
    keeps no bound) are not settled, the hidden states are."""
    model = _tiny_llama()
    program = export_model(model, (), {"input_ids": IDS, "output_hidden_states": True, "return_dict": True})
    tensors = {**dict(model.named_buffers()), **dict(model.named_parameters())}
    settings = Settings(orders=1)

    def interpreter() -> tuple[LimitInterpreter, list]:
        makers = placeholder_values(program, tensors, [IDS], F64)
        return LimitInterpreter(program.graph_module, settings, (F32, F64)), makers

    settling, makers = interpreter()
    targets = {node.target for node in settling.settled}
    assert torch.ops.aten._softmax.default in targets or torch.ops.aten.softmax.int in targets
    scores = [node.args[0] for node in settling.graph.nodes
              if node.target in (torch.ops.aten._softmax.default, torch.ops.aten.softmax.int)]
    assert scores and not any(node in settling.settled for node in scores)
    output = next(node for node in settling.graph.nodes if node.op == "output")
    assert set(output.all_input_nodes) <= settling.settled
    settled = _outputs(settling, makers)
    lazy_interpreter, makers = interpreter()
    lazy_interpreter.settled = set()
    lazy = _outputs(lazy_interpreter, makers)
    assert len(settled) == len(lazy) >= 3
    compared = 0
    for a, b in zip(settled, lazy):
        assert all(torch.equal(p, q) and d == e for (p, d), (q, e) in zip(a.parts, b.parts))
        for ra, rb in zip(a.roundings, b.roundings):
            assert torch.equal(ra.bound(F64, 0.0, carried=True), rb.bound(F64, 0.0, carried=True))
            compared += ra.carried is not None
    assert compared >= 2  # the later hidden states carry error in from the layers before


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, F32, F64])
def test_the_underflow_term_is_added_without_a_subnormal_operand_and_gives_the_same_numbers(
        dtype: torch.dtype) -> None:
    from saturated.rounding import _plus_subnormal
    info = torch.finfo(dtype)
    generator = torch.Generator().manual_seed(0)
    exponents = torch.randint(int(math.log2(smallest_subnormal(dtype))), int(math.log2(info.max)), (4000,),
                              generator=generator)
    values = (torch.rand(4000, generator=generator, dtype=F64) + 1) * torch.pow(2.0, exponents.double())
    edges = torch.tensor([0.0, info.tiny, info.max, math.inf, math.nan], dtype=dtype)
    values = torch.cat([values.to(dtype), edges])
    for n in (1, 3, 4096):
        tiny = n * smallest_subnormal(dtype)
        got, want = _plus_subnormal(values, tiny), values + tiny
        assert torch.equal(torch.isnan(got), torch.isnan(want))
        assert torch.equal(got.nan_to_num(), want.nan_to_num())


def test_with_two_orders_the_input_of_an_activation_of_several_parts_is_settled() -> None:
    """SiLU keeps its input's bounds with several parts too (each element is kept or zeroed on a
    certified sign); with two orders the gate projection has two (RMSNorm's ε enters one order
    below), its carried error is read through the gate and settled as it runs, and the outputs'
    bounds are the ones a lazy pass gives."""
    model = _tiny_llama()
    program = export_model(model, (), {"input_ids": IDS, "output_hidden_states": True, "return_dict": True})
    tensors = {**dict(model.named_buffers()), **dict(model.named_parameters())}
    gates = [node for node in program.graph.nodes if node.target == torch.ops.aten.silu.default]
    assert gates

    def interpreter(orders: int) -> tuple[LimitInterpreter, list]:
        makers = placeholder_values(program, tensors, [IDS], F64)
        return LimitInterpreter(program.graph_module, Settings(orders=orders), (F32, F64)), makers

    assert all(gate.args[0] in interpreter(1)[0].settled for gate in gates)
    settling, makers = interpreter(2)
    assert all(gate.args[0] in settling.settled for gate in gates)
    settled = _outputs(settling, makers)
    lazy_interpreter, makers = interpreter(2)
    lazy_interpreter.settled = set()
    lazy = _outputs(lazy_interpreter, makers)
    compared = 0
    for a, b in zip(settled, lazy, strict=True):
        assert all(torch.equal(p, q) and d == e for (p, d), (q, e) in zip(a.parts, b.parts))
        for ra, rb in zip(a.roundings, b.roundings, strict=True):
            assert torch.equal(ra.bound(F64, 0.0, carried=True), rb.bound(F64, 0.0, carried=True))
            compared += ra.carried is not None
    assert compared >= 2
