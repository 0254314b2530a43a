"""One edit anywhere in a valid certificate: it is rejected naming the field, or its degrees stand.

Each edit changes, deletes, duplicates, swaps or retypes one entry of the certificate's JSON
(a top-level field, a step, a field of a step, an entry of a map or a list, at any depth), and
the certificate is read back and checked against its model. The only acceptable outcomes are an
error or failure naming the edited field, or an accepted verdict reporting exactly the honest
certificate's degrees. Run on a small MLP, a LayerNorm block, a tiny Llama and MiniLM's first two
layers, each exported once (``check_program`` reads the program, it does not change it).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn
from transformers import LlamaConfig, LlamaModel

from empirical.models.loading import load_model
from homogeneity import HomogeneityError, certify
from homogeneity.certificate import Certificate, CertificateFieldError
from homogeneity.checker import CertificateCheck, check_program
from homogeneity.tracing import export_model


@dataclass(frozen=True)
class Raw:
    """A JSON value written as this text, verbatim (a 5,000-digit number, ``1e999999999``)."""

    text: str


@dataclass
class Obj:
    """A JSON object as its list of pairs, so that an edit can write one key twice."""

    pairs: list[tuple[str, Any]]


def _tree(value: Any) -> Any:
    if isinstance(value, dict):
        return Obj([(key, _tree(item)) for key, item in value.items()])
    if isinstance(value, list):
        return [_tree(item) for item in value]
    return value


def _dump(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Obj):
        return "{" + ", ".join(f"{json.dumps(key)}: {_dump(item)}" for key, item in value.pairs) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dump(item) for item in value) + "]"
    return json.dumps(value)


@dataclass(frozen=True)
class Case:
    name: str
    program: torch.export.ExportedProgram
    text: str
    degrees: dict[str, tuple[str, str]]


def _case(name: str, model: nn.Module, *args: Any, **kwargs: Any) -> Case:
    model.eval()
    with torch.no_grad():
        certificate = certify(model, *args, **kwargs)
        program = export_model(model, args, kwargs)
    honest = check_program(certificate, program)
    assert honest.ok, honest.messages
    return Case(name, program, certificate.to_json(), honest.outputs)


class Block(nn.Module):
    """A pre-LayerNorm residual MLP block: x + W₂·GELU(W₁·LN(x))."""

    def __init__(self) -> None:
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(4), nn.Linear(4, 8), nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def _mlp() -> Case:
    torch.manual_seed(0)
    return _case("mlp", nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)), torch.randn(5, 3))


def _block() -> Case:
    torch.manual_seed(0)
    return _case("layernorm block", Block(), torch.randn(2, 3, 4))


def _llama() -> Case:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, attn_implementation="eager")
    return _case("tiny llama", LlamaModel(config), input_ids=torch.tensor([[3, 5, 7]]), use_cache=False)


def _minilm() -> Case:
    model, tokenizer = load_model("minilm", num_layers=2)
    batch = dict(tokenizer(["The norm grows.", "Attention saturates."], return_tensors="pt", padding=True))
    return _case("minilm, two layers", model, **batch, output_hidden_states=True)


# Cached: each model is exported once for the whole run, whichever fixture asks first.
CASES: dict[str, Callable[[], Case]] = {name: functools.cache(build) for name, build in
                                        {"mlp": _mlp, "block": _block, "llama": _llama,
                                         "minilm": _minilm}.items()}


@pytest.fixture(scope="module", params=list(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    return CASES[request.param]()


Path = tuple[Any, ...]


def _containers(value: Any, path: Path = ()) -> list[Path]:
    """The path of every list and object in ``value`` (the root's is ``()``)."""
    found: list[Path] = []
    if isinstance(value, Obj | list):
        found.append(path)
        items = value.pairs if isinstance(value, Obj) else list(enumerate(value))
        for key, item in items:
            found += _containers(item, (*path, key))
    return found


def _texts(value: Any) -> list[str]:
    if isinstance(value, Obj):
        return [key for key, _ in value.pairs] + [t for _, item in value.pairs for t in _texts(item)]
    if isinstance(value, list):
        return [t for item in value for t in _texts(item)]
    return [value] if isinstance(value, str) else []


def _at(tree: Any, path: Path) -> Any:
    for key in path:
        tree = dict(tree.pairs)[key] if isinstance(tree, Obj) else tree[key]
    return tree


def _retyped(value: Any) -> Any:
    """The same content as another JSON type."""
    if isinstance(value, str):
        return Raw(value) if value.lstrip("-").isdigit() and len(value) < 20 else [value]
    if isinstance(value, list | Obj):
        return _dump(value)
    return "null" if value is None else str(value)


ODD = [None, True, 0, -1, 1.5, "", "none", "0", "1", "2", "1/2", "-1/2", "2/4", "01", "1e999999999",
       "9" * 5000, Raw("9" * 5000), Raw("1e999999999"), Raw("NaN"), [], Raw("{}"), "exact", "asymptotic",
       "approximate", "leaf", "placeholder", "a" * 3000]


@st.composite
def edits(draw: st.DrawFn, text: str) -> tuple[str, str, list[Path]]:
    """One edit of the certificate ``text``: the edited text, what was done, and the entries touched."""
    tree = _tree(json.loads(text))
    # First the part (the whole object, or one top-level field), then a container within it: the
    # small fields (outputs, params, graph_hash) are drawn as often as the thousands of steps.
    containers = _containers(tree)
    part = draw(st.sampled_from(sorted({path[:1] for path in containers})))
    path = draw(st.sampled_from([p for p in containers if p[:1] == part or (not part and not p)]))
    container = _at(tree, path)
    size = len(container.pairs if isinstance(container, Obj) else container)
    if size == 0:
        container.append("x") if isinstance(container, list) else container.pairs.append(("x", "x"))
        return _dump(tree), "add", [path]
    index = draw(st.integers(0, size - 1))
    kind = draw(st.sampled_from(["change", "delete", "duplicate", "swap", "retype"]))
    entries: list[Any] = container.pairs if isinstance(container, Obj) else container
    key = entries[index][0] if isinstance(container, Obj) else index
    old = entries[index][1] if isinstance(container, Obj) else entries[index]
    touched = [(*path, key)]
    if kind == "delete":
        del entries[index]
    elif kind == "duplicate":
        entries.insert(index + 1, entries[index])
    elif kind == "swap":
        other = draw(st.integers(0, size - 1))
        if isinstance(container, Obj):  # an object's pairs keep their keys and exchange values
            (k1, v1), (k2, v2) = entries[index], entries[other]
            entries[index], entries[other] = (k1, v2), (k2, v1)
            touched.append((*path, k2))
        else:
            entries[index], entries[other] = entries[other], entries[index]
            touched.append((*path, other))
    else:
        new = _retyped(old) if kind == "retype" else draw(st.sampled_from([*ODD, *_texts(tree)]))
        entries[index] = (key, new) if isinstance(container, Obj) else new
    return _dump(tree), kind, touched


def _top(path: Path) -> str:
    """The field an error about ``path`` must name: a step as ``steps[i]``, else the top-level key."""
    if not path:
        return ""
    if path[0] == "steps" and len(path) > 1:
        return f"steps[{path[1]}]"
    return str(path[0])


def _named(fields: list[str], touched: list[Path], message: str) -> bool:
    """Whether a failure names a field the edit touched (a step edit may show as a later step's
    wiring, when a step is deleted or duplicated: any step's field counts for it)."""
    tops = [_top(path) for path in touched]
    return any(field.startswith(top) or f"'{top}'" in message or
               (top.startswith("steps") and field.startswith("steps")) for top in tops for field in fields)


def _outcome(case: Case, text: str) -> CertificateCheck | HomogeneityError:
    try:
        return check_program(Certificate.from_json(text), case.program)
    except HomogeneityError as err:
        return err


def _assert_sound(case: Case, text: str, kind: str, touched: list[Path]) -> None:
    outcome = _outcome(case, text)
    if isinstance(outcome, HomogeneityError):
        if isinstance(outcome, CertificateFieldError):
            assert _named([outcome.field], touched, str(outcome)), (kind, touched, str(outcome))
        else:  # a key written twice, or a retyped value that breaks the nesting: the key is named
            assert "twice" in str(outcome) or "nest deeper" in str(outcome), (kind, touched, str(outcome))
        return
    if outcome.ok:
        assert outcome.outputs == case.degrees, (kind, touched)
        return
    fields = [failure.field for failure in outcome.failures]
    assert _named(fields, touched, " ".join(outcome.messages)), (kind, touched, outcome.messages)


@given(data=st.data())
def test_one_edit_anywhere_is_rejected_naming_the_field_or_leaves_the_degrees(case: Case,
                                                                            data: st.DataObject) -> None:
    text, kind, touched = data.draw(edits(case.text))
    _assert_sound(case, text, kind, touched)


def test_the_honest_certificate_reports_every_output(case: Case) -> None:
    verdict = check_program(Certificate.from_json(case.text), case.program)
    assert verdict.ok and verdict.outputs == case.degrees and verdict.outputs


@pytest.fixture(scope="module")
def minilm_case() -> Case:
    return CASES["minilm"]()


@pytest.mark.parametrize(("outputs", "failures"), [
    ({"last_hidden_state": "tanh"},
     [("outputs['last_hidden_state']", "output last_hidden_state is node layer_norm_4, but the "
                                       "certificate names node tanh")]),
    ({"last_hidden_state": "linear_12"},
     [("outputs['last_hidden_state']", "output last_hidden_state is node layer_norm_4, but the "
                                       "certificate names node linear_12")]),
    ({"pooler_output": None, "made_up_output": "embedding"},
     [("outputs['pooler_output']", "output pooler_output (node tanh) of the model is missing from the "
                                   "certificate's outputs"),
      ("outputs['made_up_output']", "output 'made_up_output' of the certificate is not an output of "
                                    "the model (its outputs: last_hidden_state, pooler_output, "
                                    "hidden_states.0, hidden_states.1, hidden_states.2)")]),
])
def test_an_output_pointed_at_another_node_is_rejected(minilm_case: Case, outputs: dict[str, Any],
                                                       failures: list[tuple[str, str]]) -> None:
    """The forgeries a reviewer tried first: the outputs map is compared with the export's."""
    data = json.loads(minilm_case.text)
    data["outputs"] = {k: v for k, v in {**data["outputs"], **outputs}.items() if v is not None}
    verdict = check_program(Certificate.from_json(json.dumps(data)), minilm_case.program)
    assert (verdict.verdict, verdict.outputs) == ("rejected", {})
    assert [(f.field, f.message) for f in verdict.failures] == failures
