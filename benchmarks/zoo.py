"""Time each family's degree and exact limit against a plain forward pass.

Per built-in family, on the two-layer models of ``docs/figures/zoo.py`` (the paper's families at
base size, MiniLM pretrained, today's families narrowed) and a batch of two sentences:

- plain: ``model(**batch)`` with hidden states, best of ``--repeat``;
- degree: :func:`homogeneity.analyze` (export and propagation) on a fresh copy of the model;
- limit: the first call of a fresh :class:`~saturated.saturate.SaturatedModel` (export included),
  then a call with the graph cached (best of ``--repeat``).

A fresh model per family, so no export is reused; one small export first pays the process's
one-off costs (imports, dispatcher warm-up). Targets (issue 19): degree within 2 s, the limit
within 3 s including its export, on 2 cores. Run: ``python benchmarks/zoo.py [--families ...]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path
from types import ModuleType

import torch
from timing import best_of

from homogeneity import analyze
from saturated.rules import Settings
from saturated.saturate import SaturatedModel

ZOO = Path(__file__).resolve().parents[1] / "docs" / "figures" / "zoo.py"
SENTENCES = ["The parameter norm grows.", "Attention saturates as the norm grows large."]


def zoo_script() -> ModuleType:
    """``docs/figures/zoo.py``, whose models these are (one definition of them)."""
    spec = importlib.util.spec_from_file_location("zoo_figure", ZOO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    zoo = zoo_script()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(zoo.ROWS), choices=zoo.ROWS)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    warm, tokenizer = zoo.measured_model("gpt-neox")
    analyze(warm, **dict(tokenizer(SENTENCES, return_tensors="pt", padding=True)))
    print(f"{torch.get_num_threads()} threads; seconds, and ratios to the plain pass")
    print(f"{'family':<10} {'plain':>7} {'degree':>7} {'limit 1st':>9} {'cached':>7} {'ratio':>6}")
    for name in args.families:
        model, tokenizer = zoo.measured_model(name)
        batch = {**zoo.model_inputs(model, tokenizer, tuple(SENTENCES)), "return_dict": True}
        with torch.inference_mode():
            plain = best_of(lambda m=model, b=batch: m(**b), args.repeat)
        start = time.perf_counter()
        analyze(model, **batch)
        degree = time.perf_counter() - start
        fresh, _ = zoo.measured_model(name)  # no graph shared with the degree's model
        limit = SaturatedModel(fresh, Settings())
        start = time.perf_counter()
        try:
            limit(**batch)
        except Exception as err:  # the limit's own error is the answer (a missing rule)
            print(f"{name:<10} {plain:7.3f} {degree:7.2f}   limit: {type(err).__name__}: "
                  f"{str(err)[:70]}")
            continue
        first = time.perf_counter() - start
        cached = best_of(lambda lim=limit, b=batch: lim(**b), args.repeat)
        print(f"{name:<10} {plain:7.3f} {degree:7.2f} {first:9.2f} {cached:7.3f} {cached / plain:6.1f}")


if __name__ == "__main__":
    main()
