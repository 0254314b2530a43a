"""saturate() on small networks: the limit against the network at growing c, in float64."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from saturated.errors import SaturationError
from saturated.interpreter import node_progress
from saturated.rules import Settings
from saturated.saturate import SaturatedModel, _check_masks, saturate


def grown(net: nn.Module, c: float, *args: torch.Tensor) -> torch.Tensor:
    scaled = {name: c * p for name, p in net.named_parameters()}
    return torch.func.functional_call(net, scaled, args)


class Block(nn.Module):
    """Residual sum of a sublayer (linear → activation → linear) and a LayerNorm, optionally with
    a softmax attention in front: the pieces of a transformer layer."""

    def __init__(self, width: int, activation: nn.Module, attention: bool, norm: bool) -> None:
        super().__init__()
        self.attention = attention
        self.qkv = nn.Linear(width, 3 * width)
        self.inner = nn.Linear(width, 2 * width)
        self.act = activation
        self.outer = nn.Linear(2 * width, width)
        self.norm = nn.LayerNorm(width) if norm else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.attention:
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            x = x + torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
        return self.norm(x + self.outer(self.act(self.inner(x))))


ACTIVATIONS = {"relu": nn.ReLU(), "gelu": nn.GELU(), "sigmoid": nn.Sigmoid(), "tanh": nn.Tanh(),
               "silu": nn.SiLU()}


@given(st.sampled_from(sorted(ACTIVATIONS)), st.booleans(), st.booleans(), st.integers(0, 2**16))
def test_limit_is_approached_as_c_grows(activation: str, attention: bool, norm: bool,
                                        seed: int) -> None:
    torch.manual_seed(seed)
    net = Block(4, ACTIVATIONS[activation], attention, norm).double()
    x = torch.randn(3, 4, dtype=torch.float64)
    out = saturate(net, x)(x)
    limit, degree = out.value, out.degrees
    errors = []
    with torch.no_grad():
        for c in (1e4, 1e8):
            normalized = grown(net, c, x) / c ** degree
            errors.append(float((normalized - limit).abs().max() / limit.abs().max()))
    # Degrees are integers, so what the limit leaves out is O(1/c) relative: c·error stays bounded
    # (factor 2 for the c⁻² terms at c = 10⁴; the e^(−Θ(c)) of saturating ops only helps).
    assert 1e8 * errors[1] <= 2 * 1e4 * errors[0] + 1e-6


def test_degree_counts_the_weight_layers_that_act() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 3, bias=False), nn.ReLU(), nn.Linear(3, 2)).double()
    x = torch.randn(2, 3, dtype=torch.float64)
    out = saturate(net, x)(x)
    assert out.degrees == 2.0
    assert torch.allclose(out.value, net(x) - net[2].bias, rtol=1e-12)
    # With every ReLU off, only the last bias is left: degree 1, and it is the limit.
    with torch.no_grad():
        net[0].weight.copy_(-x[:1].sign().expand(3, 3))  # every row: w·x = −Σ|xᵢ| < 0
    off = saturate(net, x[:1])(x[:1])
    assert off.degrees == 1.0 and torch.equal(off.value, net[2].bias.detach().expand(1, 2))


class Head(nn.Module):
    """One attention head whose two best keys differ by a tiny margin in score."""

    def __init__(self, margin: float) -> None:
        super().__init__()
        self.query = nn.Parameter(torch.tensor([[1.0]], dtype=torch.float64))
        self.keys = nn.Parameter(torch.tensor([[1.0], [1.0 - margin], [0.0]], dtype=torch.float64))
        self.values = nn.Parameter(torch.tensor([[1.0], [-1.0], [5.0]], dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = (x * self.query) @ self.keys.T
        return torch.softmax(scores, dim=-1) @ self.values


def test_small_margin_makes_c_1000_wrong_and_the_limit_right() -> None:
    head = Head(margin=1e-6)
    x = torch.ones(1, 1, dtype=torch.float64)
    limit = saturate(head, x)(x)
    # Scores have degree 2: at c = 1000 the margin is 1e-6·1e6 = 1, far from hard attention.
    at_1000 = grown(head, 1e3, x) / 1e3
    assert limit.value.item() == 1.0
    assert abs(at_1000.item() - 1.0) > 0.4
    assert abs(grown(head, 1e5, x).item() / 1e5 - 1.0) < 1e-6


def test_exact_tie_is_uniform() -> None:
    head = Head(margin=0.0)  # both best keys equal at every order: weights ½, ½
    x = torch.ones(1, 1, dtype=torch.float64)
    assert saturate(head, x)(x).value.item() == 0.0


class LowerOrderHead(nn.Module):
    """Keys W₂W₁x + b: two keys tie in the degree-2 part and differ only in the bias (degree 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(1, 1, bias=False, dtype=torch.float64)
        self.second = nn.Linear(1, 3, dtype=torch.float64)
        with torch.no_grad():
            self.first.weight.fill_(1.0)
            self.second.weight.copy_(torch.tensor([[1.0], [1.0], [-1.0]]))
            self.second.bias.copy_(torch.tensor([0.2, 0.5, 0.0]))
        self.values = nn.Parameter(torch.tensor([[1.0], [-1.0], [5.0]], dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.second(self.first(x))
        return torch.softmax(scores, dim=-1) @ self.values


def test_tie_broken_by_a_lower_order_follows_it() -> None:
    head = LowerOrderHead()
    x = torch.ones(1, 1, dtype=torch.float64)
    out = saturate(head, x)(x)
    assert out.value.item() == -1.0 and out.orders > 1  # the larger bias wins
    assert abs(grown(head, 1e4, x).item() / 1e4 + 1.0) < 1e-9


def test_tie_beyond_the_tracked_orders_is_reported_with_its_node() -> None:
    x = torch.ones(1, 1, dtype=torch.float64)
    with pytest.raises(SaturationError, match=r"hard attention tie.*node 'softmax'"):
        saturate(LowerOrderHead(), x, settings=Settings(orders=1, max_precision=0))


class RunningMaximum(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cummax(self.linear(x), dim=-1).values


def test_op_without_rule_names_op_and_module() -> None:
    with pytest.raises(SaturationError, match=r"no limit rule for op aten\.cummax.*<root>"):
        saturate(RunningMaximum(), torch.randn(2, 3))


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y if bool(y.sum() > 0) else -y


def test_untraceable_model_is_a_clear_error() -> None:
    with pytest.raises(SaturationError, match=r"cannot saturate.*Branchy"):
        saturate(Branchy(), torch.randn(2, 2))


def test_non_finite_parameters_are_rejected() -> None:
    net = nn.Linear(2, 2)
    with torch.no_grad():
        net.weight[0, 0] = float("nan")
    with pytest.raises(SaturationError, match="parameter 'weight' has non-finite"):
        saturate(net, torch.randn(1, 2))


def test_model_is_not_modified() -> None:
    net = Block(4, nn.GELU(), attention=True, norm=True)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    saturate(net, torch.randn(3, 4))
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())


# The interpreter itself: which placeholders become terms, which nodes run, what a run in another
# dtype changes, and the errors it names a node in.


class Mixed(nn.Module):
    """Parameters (a linear map and an embedding table), float and integer buffers (one of them
    positions, one a table of codes), a constant made in forward, a non-tensor input the export
    bakes in, and dtype arguments (positional and keyword)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2, bias=False)
        self.table = nn.Embedding(3, 2)
        self.register_buffer("shift", torch.tensor([1.0, -1.0]))
        self.register_buffer("steps", torch.tensor([2, 3]))
        self.register_buffer("position", torch.tensor([1]))
        self.register_buffer("codes", torch.tensor([[0.5, 1.5], [2.5, 3.5], [4.5, 5.5]]))

    def forward(self, x: torch.Tensor, scale: float, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = self.linear(x).to(torch.float32) * scale + self.table(ids) + self.shift + self.steps
        fixed = self.shift * x + torch.tensor([0.5, 0.25]) + torch.full((2,), 0.1, dtype=torch.float32)
        code = nn.functional.embedding(ids.to(torch.int32), self.codes)  # an integer dtype stays
        return h, fixed + code, self.table(self.position), code


def mixed_program() -> tuple[Mixed, torch.export.ExportedProgram, torch.Tensor, torch.Tensor]:
    from homogeneity.tracing import export_model
    torch.manual_seed(0)
    model, x, ids = Mixed(), torch.tensor([[1.0, 2.0]]), torch.tensor([2])
    return model, export_model(model, (x, 3.0, ids)), x, ids


@pytest.mark.parametrize("dtype", [None, (torch.float32, torch.float32), (torch.float32, torch.float64)])
def test_parameters_become_degree_one_terms_and_everything_else_stays_exact(
        dtype: tuple[torch.dtype, torch.dtype] | None) -> None:
    from saturated.interpreter import run_terms
    from saturated.terms import Term
    model, program, x, ids = mixed_program()
    wide = dtype[1] if dtype else torch.float32
    state = dict(model.state_dict())
    grown, fixed, looked, code = run_terms(program, state, [x.to(wide), ids], Settings(), dtype)
    w, table, shift, codes = (state[n].to(wide) for n in ("linear.weight", "table.weight", "shift", "codes"))
    # c·W·x·3 + c·table[ids] at degree 1 (each parameter times c), shift + steps at degree 0.
    assert isinstance(grown, Term) and [d for _, d in grown.parts] == [1.0, 0.0]
    assert all(a.dtype == wide for a, _ in grown.parts)
    assert torch.equal(grown.parts[0][0], x.to(wide) @ w.T * 3.0 + table[2])
    assert torch.equal(grown.parts[1][0], (shift + torch.tensor([2, 3])).expand(1, 2))
    # Each parameter is exact: the degree-1 part's bound is that of 3·W·x plus a table row.
    bound = grown.rounding(1.0)
    assert bound is not None and not bound.exact
    magnitude = x.abs().to(wide) @ w.abs().T * 3.0 + table[2].abs()
    assert torch.allclose(bound.magnitude(), magnitude, rtol=1e-6, atol=0)
    # Buffers, constants and inputs alone: an exact tensor, in the dtype the graph runs in (0.1
    # made in float32 by the model is made in float64 in a float64 run).
    assert not isinstance(fixed, Term) and fixed.dtype == wide
    expected = shift * x.to(wide) + torch.tensor([0.5, 0.25], dtype=wide) + torch.full((2,), 0.1, dtype=wide)
    assert torch.equal(fixed, expected + codes[2])
    # A lookup in a parameter table is a degree-1 term in the dtype of the run.
    assert isinstance(looked, Term) and looked.lead.dtype == wide and torch.equal(looked.lead, table[1:2])
    # A lookup in a buffer is exact, cast after the lookup.
    assert not isinstance(code, Term) and code.dtype == wide and torch.equal(code, codes[2:])


def test_the_tensors_given_replace_the_programs_own() -> None:
    from saturated.interpreter import run_terms
    model, program, x, ids = mixed_program()
    state = {**model.state_dict(), "linear.weight": torch.tensor([[1.0, 0.0], [0.0, -1.0]])}
    grown, *_ = run_terms(program, state, [x, ids], Settings())
    assert torch.equal(grown.parts[0][0], torch.tensor([[3.0, -6.0]]) + state["table.weight"][2])


def test_only_tables_read_by_embedding_lookups_alone_are_left_uncast() -> None:
    from homogeneity.tracing import export_model
    from saturated.interpreter import _looked_up, placeholder_values
    from saturated.terms import Term
    model, program, x, ids = mixed_program()
    assert _looked_up(program.graph) == {"p_table_weight", "b_codes"}
    # The values made for a float64 run, from the program's own tensors: parameters as degree-1
    # terms, floating tensors cast but the two tables (their lookups are cast instead), integers
    # and inputs as they are.
    names = [node.name for node in program.graph.nodes if node.op == "placeholder"]
    made = dict(zip(names, (make() for make in placeholder_values(program, {}, [x, ids], torch.float64)),
                    strict=True))
    assert list(made) == ["p_linear_weight", "p_table_weight", "b_shift", "b_steps", "b_position", "b_codes",
                          "c_lifted_tensor_0", "x", "scale", "ids"]
    weight, table = made["p_linear_weight"], made["p_table_weight"]
    assert isinstance(weight, Term) and weight.degree == 1.0 and weight.lead.dtype == torch.float64
    assert torch.equal(weight.lead, model.linear.weight.detach().double())
    assert weight.rounding(1.0) is not None and weight.rounding(1.0).exact
    assert isinstance(table, Term) and table.lead.dtype == torch.float32
    assert made["b_codes"].dtype == torch.float32 and made["b_shift"].dtype == torch.float64
    assert made["b_steps"].dtype == torch.int64 and made["b_position"].dtype == torch.int64
    assert made["c_lifted_tensor_0"].dtype == torch.float64
    assert made["x"] is x and made["ids"] is ids and made["scale"] == 3.0

    class TiedHead(nn.Module):  # the table also read as the output projection
        def __init__(self) -> None:
            super().__init__()
            self.table = nn.Embedding(3, 2)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.table(ids) @ self.table.weight.T

    assert _looked_up(export_model(TiedHead(), (torch.tensor([1]),)).graph) == set()


class HalfKnown(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.cummax(self.linear(x), dim=-1).values, torch.relu(self.linear(x))


def test_only_the_nodes_the_kept_outputs_need_run() -> None:
    from homogeneity.tracing import export_model
    from saturated.interpreter import run_terms
    torch.manual_seed(0)
    model, x = HalfKnown(), torch.randn(2, 3)
    program = export_model(model, (x,))
    state = dict(model.state_dict())
    kept = run_terms(program, state, [x], Settings(), keep=[False, True])
    assert kept[0] is None and torch.equal(kept[1].lead, torch.relu(model.linear(x).detach()))
    with pytest.raises(SaturationError) as missing:
        run_terms(program, state, [x], Settings(), keep=[True, False])
    assert str(missing.value) == ("no limit rule for op aten.cummax.default at node 'cummax' (op "
                                  "aten.cummax.default, module <root>); register one with "
                                  "saturated.register_rule")


def interpreter_of(rules: dict, tie_aware: tuple = (), settings: Settings | None = None) -> list:
    """Run ReLU(linear(x)) (module 'lin', then 'act') with the rule table ``rules``."""
    from homogeneity.tracing import export_model
    from saturated.interpreter import LimitInterpreter, placeholder_values
    model = nn.Sequential()
    model.add_module("lin", nn.Linear(2, 2))
    model.add_module("act", nn.ReLU())
    x = torch.ones(1, 2)
    program = export_model(model, (x,))
    makers = placeholder_values(program, dict(model.state_dict()), [x], None)
    interpreter = LimitInterpreter(program.graph_module, settings or Settings(), rules=rules,
                                   tie_aware=tie_aware)
    return interpreter.run(*makers, enable_io_processing=False)


def test_rule_errors_name_the_node_its_op_and_module() -> None:
    from saturated.rules import RULES
    from saturated.terms import NeedsOrders
    aten = torch.ops.aten
    where = "node 'linear' (op aten.linear.default, module lin)"

    def needs(*_: object, **__: object) -> None:
        raise NeedsOrders("a tie")

    def fails(*_: object, **__: object) -> None:
        raise ValueError("shapes disagree")

    with pytest.raises(NeedsOrders) as refused:
        interpreter_of({aten.linear.default: needs})
    assert str(refused.value) == f"a tie [at {where}]"
    with pytest.raises(SaturationError) as failed:
        interpreter_of({aten.linear.default: fails})
    assert str(failed.value) == f"the limit rule failed at {where}: shapes disagree"
    assert type(failed.value) is SaturationError
    with pytest.raises(SaturationError) as missing:
        interpreter_of({aten.linear.default: RULES[aten.linear.default]})
    assert str(missing.value) == ("no limit rule for op aten.relu.default at node 'relu' (op "
                                  "aten.relu.default, module act); register one with saturated.register_rule")


def test_tied_weights_are_resolved_where_an_op_reads_them_and_say_where_they_arose() -> None:
    from saturated.terms import NeedsOrders
    from saturated.ties import TiedWeights
    aten = torch.ops.aten
    tied = TiedWeights(((torch.tensor([[0.5, 0.5]]), 0.0),), candidates=torch.tensor([[True, True]]),
                       count=torch.tensor([[2]]), dim=1, reason="keys 0 and 1 tie")
    arose = "keys 0 and 1 tie [at node 'linear' (op aten.linear.default, module lin)]"
    rules = {aten.linear.default: lambda *_, **__: tied, aten.relu.default: lambda s, x: x}
    # ReLU is not registered tie-aware (here its rule is the identity): it may not read the
    # arbitrary split, which ties="nan" makes NaN before the rule sees it.
    with pytest.raises(NeedsOrders) as refused:
        interpreter_of(rules)
    assert str(refused.value).startswith(f"{arose}, and op aten.relu.default reads the weights themselves.")
    out = interpreter_of(rules, settings=Settings(ties="nan"))[0]
    assert torch.isnan(out.lead).all()
    # Registered as tie-aware it takes them as they are, and the output then refuses them,
    # naming where they arose.
    with pytest.raises(NeedsOrders) as at_output:
        interpreter_of(rules, tie_aware=(aten.relu.default,))
    assert str(at_output.value).startswith(f"{arose}, and the model's output reads the weights themselves.")
    # Tie-aware where they arise: no place is added.
    with pytest.raises(NeedsOrders) as unplaced:
        interpreter_of(rules, tie_aware=(aten.linear.default, aten.relu.default))
    assert str(unplaced.value).startswith("keys 0 and 1 tie, and the model's output reads")
    # With ties="nan" the output holds them as NaN instead.
    out = interpreter_of(rules, tie_aware=(aten.relu.default,), settings=Settings(ties="nan"))[0]
    assert torch.isnan(out.lead).all()


def test_a_graph_node_other_than_a_function_call_is_refused() -> None:
    from saturated.interpreter import LimitInterpreter
    traced = torch.fx.symbolic_trace(nn.Sequential(nn.Linear(2, 2)))
    with pytest.raises(SaturationError, match=r"unexpected graph node kind 'call_module' at node '_0' "
                                              r"\(op 0, module 0\)"):
        LimitInterpreter(traced, Settings()).run(lambda: torch.ones(1, 2), enable_io_processing=False)


def test_a_run_keeps_no_value_past_its_last_use() -> None:
    # A cast copy of a parameter (or any value) lives only while the graph needs it: after the
    # run the interpreter holds only values no node read (unused inputs, checks) and the outputs.
    from saturated.interpreter import LimitInterpreter, placeholder_values
    model, program, x, ids = mixed_program()
    makers = placeholder_values(program, dict(model.state_dict()), [x.double(), ids], torch.float64)
    interpreter = LimitInterpreter(program.graph_module, Settings(), (torch.float32, torch.float64))
    interpreter.run(*makers, enable_io_processing=False)
    assert {node.name for node in interpreter.env if node.users} == set()
    assert "output" in {node.name for node in interpreter.env}
    # With only some outputs kept, the same among the nodes that run.
    from homogeneity.tracing import export_model
    half, x = HalfKnown(), torch.randn(2, 3)
    program = export_model(half, (x,))
    makers = placeholder_values(program, dict(half.state_dict()), [x], None)
    interpreter = LimitInterpreter(program.graph_module, Settings(), keep=[False, True])
    assert interpreter.run(*makers, enable_io_processing=False)[0] is None
    assert {node.name for node in interpreter.env if node.users and node in interpreter.needed} == set()


class Shared(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.linear(x)
        return h, torch.relu(h)


def test_an_output_not_kept_is_none_even_when_a_kept_one_needs_its_node() -> None:
    from homogeneity.tracing import export_model
    from saturated.interpreter import run_terms
    model, x = Shared(), torch.randn(2, 3)
    program = export_model(model, (x,))
    first, second = run_terms(program, dict(model.state_dict()), [x], Settings(), keep=[False, True])
    assert first is None and torch.equal(second.lead, torch.relu(model.linear(x).detach()))


class SortedDescending(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sort(self.linear(x), dim=-1, descending=True, stable=True).values


def test_keyword_arguments_reach_the_limit_rule() -> None:
    # aten.sort.stable takes dim and descending by keyword only.
    torch.manual_seed(0)
    model, x = SortedDescending().double(), torch.randn(2, 3, dtype=torch.float64)
    out = saturate(model, x)(x)
    assert torch.equal(out.value, torch.sort(model.linear(x).detach(), dim=-1, descending=True).values)
    assert (out.value[:, :-1] >= out.value[:, 1:]).all()


def test_a_graph_without_an_output_node_is_refused() -> None:
    from types import SimpleNamespace

    from torch.export.graph_signature import InputKind, InputSpec, TensorArgument

    from saturated.interpreter import run_terms
    graph = torch.fx.Graph()
    graph.call_function(torch.ops.aten.relu.default, (graph.placeholder("x"),))
    module = torch.fx.GraphModule(nn.Module(), graph)
    program = SimpleNamespace(graph=module.graph, graph_module=module, constants={}, state_dict={},
                              graph_signature=SimpleNamespace(input_specs=[
                                  InputSpec(InputKind.USER_INPUT, TensorArgument("x"), None)]))
    with pytest.raises(SaturationError) as refused:
        run_terms(program, {}, [torch.ones(1)], Settings())  # type: ignore[arg-type]
    assert str(refused.value) == "the exported graph has no output node"


# Arguments and inputs refused with what was expected, and what a SaturatedModel keeps of them.


def _meta_linear() -> nn.Module:
    with torch.device("meta"):
        return nn.Linear(2, 2)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: SaturatedModel(3, Settings()), "expected an nn.Module to saturate, got int"),
    (lambda: SaturatedModel(nn.Linear(2, 2), "raise"),
     "expected settings to be a saturated.Settings, got 'raise' (str)"),
    (lambda: SaturatedModel(nn.Linear(2, 2), Settings(), undetermined="zero"),
     "undetermined must be 'raise' or 'nan', got 'zero'"),
    (lambda: SaturatedModel(_meta_linear(), Settings()),
     "expected a model with weights for a saturated limit, got Linear on the meta device"),
    (lambda: SaturatedModel(nn.Linear(2, 2), Settings(), outputs="hidden"),
     "expected outputs to be a list of output field names, got the bare string 'hidden'"),
])
def test_saturated_model_arguments_are_checked(build: Any, message: str) -> None:
    with pytest.raises(SaturationError) as caught:
        build()
    assert str(caught.value).startswith(message)


def test_a_saturated_model_keeps_its_arguments() -> None:
    net, settings = nn.Linear(2, 2), Settings(orders=3)
    default = SaturatedModel(net, settings)
    assert default.model is net and default.settings is settings
    assert default.undetermined == "raise" and default.outputs is None
    chosen = SaturatedModel(net, settings, outputs=["hidden", "flag", "hidden"], undetermined="nan")
    assert chosen.undetermined == "nan" and chosen.outputs == frozenset({"hidden", "flag"})


class MixedDtypes(nn.Module):
    """A float64 layer before a float32 one: the first floating parameter's dtype is the model's."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(2, 2, bias=False).double()
        self.second = nn.Linear(2, 2, bias=False)


@pytest.mark.parametrize(("build", "dtype", "wide"), [
    (lambda: nn.Linear(2, 2), torch.float32, torch.float64),
    (lambda: nn.Linear(2, 2).double(), torch.float64, torch.float64),
    (lambda: nn.Linear(2, 2).half(), torch.float16, torch.float64),
    (MixedDtypes, torch.float64, torch.float64),
    (nn.ReLU, torch.get_default_dtype(), torch.float64),  # no parameters: the default dtype
])
def test_the_models_dtype_is_its_first_floating_parameters(build: Any, dtype: torch.dtype,
                                                            wide: torch.dtype) -> None:
    limit = SaturatedModel(build(), Settings())
    assert limit._dtype == dtype and limit._wide == wide


def test_a_model_cast_to_another_dtype_is_saturated_in_it() -> None:
    net = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[2.0, -1.0]]))
    limit = SaturatedModel(net, Settings())
    x = torch.tensor([[1.0, 3.0], [2.0, 1.0]])
    assert limit(x).value.dtype == torch.float32
    net.double()
    out = limit(x.double())
    assert out.value.dtype == torch.float64 and out.value[:, 0].tolist() == [-1.0, 3.0]


def test_non_finite_parameters_name_the_parameter() -> None:
    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    limit = SaturatedModel(net, Settings())
    x = torch.ones(1, 2)
    limit(x)
    with torch.no_grad():
        net[1].bias.fill_(math.inf)  # a new version of a parameter checked before
    with pytest.raises(SaturationError) as caught:
        limit(x)
    assert str(caught.value) == "parameter '1.bias' has non-finite entries; expected finite θ"


def test_the_finiteness_check_is_made_once_per_parameter_version() -> None:
    net = nn.Linear(2, 1, bias=False)
    limit = SaturatedModel(net, Settings())
    x = torch.ones(1, 2)
    limit(x)
    limit(x)
    first = ("weight", net.weight.data_ptr(), net.weight._version)
    assert limit._checked == {first}
    with torch.no_grad():
        net.weight.mul_(2.0)  # a new version, checked anew
    limit(x)
    assert limit._checked == {first, ("weight", net.weight.data_ptr(), net.weight._version)}
    assert net.weight._version == first[2] + 1


@pytest.mark.parametrize("name", ["attention_mask", "encoder_attention_mask"])
def test_a_mask_row_without_a_position_is_refused_with_its_row(name: str) -> None:
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]])
    with pytest.raises(SaturationError) as caught:
        _check_masks({"x": torch.ones(4, 3), name: mask})
    assert str(caught.value) == (f"{name} masks every position of row 2; expected at least one real "
                                 "token per sequence")


@pytest.mark.parametrize("kwargs", [
    {"attention_mask": torch.tensor([[1, 0, 0], [0, 0, 1]])},   # every row allows a position
    {"attention_mask": torch.tensor([[1, 0], [1, 0]])},         # a column masked everywhere is fine
    {"attention_mask": None, "x": torch.zeros(2, 3)},           # not a mask: any values
    {"attention_mask": torch.zeros(2, 3, 3)},                   # not a row-per-sequence mask
    {"head_mask": torch.zeros(2, 3)},
])
def test_masks_that_allow_a_position_per_row_and_other_inputs_pass(kwargs: dict[str, Any]) -> None:
    _check_masks(kwargs)


class NeedsKeyword(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 1, bias=False)

    def forward(self, x: torch.Tensor, *, n: int) -> torch.Tensor:
        return self.lin(x) * n


def test_saturate_checks_the_examples_with_the_settings_given() -> None:
    net, x = NeedsKeyword(), torch.ones(2, 2)
    limit = saturate(net, x, n=2)
    assert isinstance(limit, SaturatedModel) and limit.model is net and limit.exports == 1
    assert limit.settings == Settings() and limit.undetermined == "raise" and limit.outputs is None
    settings = Settings(orders=3, ties="nan")
    assert saturate(net, x, settings=settings, n=2).settings is settings


def test_a_model_without_parameters_is_saturated_exactly() -> None:
    x = torch.tensor([[-1.0, 2.0], [3.0, -4.0]])
    out = SaturatedModel(nn.ReLU(), Settings())(x)
    assert out.value.tolist() == [[0.0, 2.0], [3.0, 0.0]] and out.degrees == 0.0 and out.refined == ()


def test_node_progress_hears_every_node_the_limit_runs_and_nothing_outside_its_block() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    x = torch.randn(2, 3, dtype=torch.float64)
    limit = SaturatedModel(net, Settings())
    heard: list[tuple[int, int]] = []
    with node_progress(lambda done, total: heard.append((done, total))):
        limit(x)
    total = heard[0][1]
    assert total >= 3 and heard == [(i, total) for i in range(1, total + 1)]
    limit(x)  # outside the block: no listener
    assert len(heard) == total
