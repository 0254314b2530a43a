"""Time each family's exact limit against a plain forward pass, with its memory and its export.

Per built-in family, on the two-layer models of ``docs/figures/zoo.py`` (the paper's families at
base size, MiniLM pretrained, today's families narrowed to width 256) and its batch (the first 8
sentences of the default corpus), the limit asked for the hidden states a similarity reads, with
undetermined values as NaN (as ``docs/zoo.md`` measures it):

- plain: a forward pass with hidden states, best of ``--repeat``;
- limit: a call with the graph held (best of ``--repeat``), and its ratio to plain;
- memory: the process's peak resident memory during a limit call over that during a plain pass;
- first call, cold: a fresh model, the export cache empty (the export is made and stored);
- first call, warm: another fresh model of the same configuration, the graph read from the cache.

With ``--cpu-time`` every time is the process's CPU time instead of the wall clock: on a machine
other jobs share, run with one thread (``OMP_NUM_THREADS=1``), it leaves out the time they took
the cores, and ratios from two runs compare. One small export first pays the process's one-off
costs (imports, dispatcher warm-up). Targets:
the limit within 5× a plain pass (3× for the paper's families, GPT-2 and MiniLM), memory within
3×, a warm first call within 2 s. Run: ``python benchmarks/zoo.py [--families ...]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import time
from pathlib import Path
from types import ModuleType

import torch
from timing import best_of, peak_resident

from empirical.measure.pipeline import forward, prepare
from empirical.models.corpus import load_corpus
from saturated.rules import Settings
from saturated.saturate import SaturatedModel

ZOO = Path(__file__).resolve().parents[1] / "docs" / "figures" / "zoo.py"


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
    parser.add_argument("--cpu-time", action="store_true", help="time in process CPU seconds")
    args = parser.parse_args()
    clock = time.process_time if args.cpu_time else time.perf_counter
    os.environ["NORMSAT_CACHE_DIR"] = tempfile.mkdtemp(prefix="normsat-bench-")  # cold, then warm
    texts = list(load_corpus(n=zoo.N_SENTENCES))

    def limit_of(model: torch.nn.Module, tokenizer: object) -> tuple[SaturatedModel, dict]:
        prepared = prepare(model, tokenizer, texts, batch_size=len(texts))
        return (SaturatedModel(model, Settings(), prepared.fields(), "nan", read_padding=False,
                               one_shape=prepared.one_shape()),
                prepared.batches[0].inputs)

    warm, tokenizer = zoo.measured_model("gpt-neox")
    limit, inputs = limit_of(warm, tokenizer)
    forward(warm, inputs, limit)
    print(f"{torch.get_num_threads()} threads; {'CPU ' if args.cpu_time else ''}seconds, and ratios to "
          "the plain pass")
    print(f"{'family':<10} {'plain':>7} {'limit':>7} {'ratio':>6} {'memory':>7} {'cold 1st':>9} "
          f"{'warm 1st':>9}")
    for name in args.families:
        fresh, tokenizer = zoo.measured_model(name)
        limit, inputs = limit_of(fresh, tokenizer)
        other, _ = zoo.measured_model(name)  # no graph in memory: its first call reads the cache
        again, _ = limit_of(other, tokenizer)
        with torch.inference_mode():
            start = clock()
            try:
                forward(fresh, inputs, limit)
            except Exception as err:  # the limit's own error is the answer (a missing rule)
                print(f"{name:<10} limit: {type(err).__name__}: {str(err)[:70]}")
                continue
            cold = clock() - start
            plain = best_of(lambda m=fresh, b=inputs: forward(m, b), args.repeat, clock)
            call = best_of(lambda m=fresh, b=inputs, lim=limit: forward(m, b, lim), args.repeat, clock)
            plain_memory = peak_resident(lambda m=fresh, b=inputs: forward(m, b))
            limit_memory = peak_resident(lambda m=fresh, b=inputs, lim=limit: forward(m, b, lim))
            start = clock()
            forward(other, inputs, again)
            warm_first = clock() - start
        print(f"{name:<10} {plain:7.3f} {call:7.3f} {call / plain:6.1f} "
              f"{limit_memory / plain_memory:7.2f} {cold:9.2f} {warm_first:9.2f}", flush=True)


if __name__ == "__main__":
    main()
