"""Time the saturated forward pass of pretrained MiniLM against a plain forward pass.

Batch of 32 sentences from the default corpus, float32, CPU. Three timings, best of ``--repeat``:

* plain: ``model(**batch)`` with hidden states;
* leading order: the first step of ``saturate``, one order in float32 (ties the leading order
  cannot break and that matter are marked, not resolved);
* saturated: all of ``saturate``, which recomputes the marked batch entries in float64 with as
  many orders as they need;
* saturated, hidden states: the same, asked only for the hidden states (what the per-layer
  measurements read), so that entries the pooler alone left undetermined are not recomputed.

Exporting is a one-off per model (one graph with dynamic batch and length serves every call and
both precisions, and it is kept on disk for the next process); the first call is timed with the
export cache empty and again, on a fresh copy of the model, with the graph read from the cache.
Memory: the process's peak resident memory during a saturated call, against a plain pass's.
With ``--families`` it also reports, for two-layer random-init
models of every family, whether the model exported with dynamic shapes and how many entries of a
16-sentence batch were recomputed in float64.

Run: ``python benchmarks/saturate.py [--repeat 5] [--batch 32] [--families]``. Prints the ratios
to the plain pass.
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time
from dataclasses import replace

import torch
from timing import best_of, peak_resident

from empirical.models.batching import make_batches, tokenize
from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model
from saturated.interpreter import run_terms
from saturated.rules import Settings
from saturated.saturate import SaturatedModel

FAMILIES = ("bert", "roberta", "gpt2", "xlnet", "t5")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--families", action="store_true")
    args = parser.parse_args()
    model, tokenizer = load_model("minilm")
    sentences = list(load_corpus(n=args.batch))
    enc = tokenizer(sentences, padding=True, truncation=True, max_length=512, return_tensors="pt")
    batch = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
             "output_hidden_states": True, "return_dict": True}
    os.environ["NORMSAT_CACHE_DIR"] = tempfile.mkdtemp(prefix="normsat-bench-")  # cold, then warm
    twin = copy.deepcopy(model)  # no graph in memory: its first call reads the cache
    limit = SaturatedModel(model, Settings())
    start = time.perf_counter()
    out = limit(**batch)
    first = time.perf_counter() - start
    start = time.perf_counter()
    SaturatedModel(twin, Settings())(**batch)
    warm = time.perf_counter() - start
    program = limit.program(**batch)
    tensors = {**dict(model.named_buffers()), **dict(model.named_parameters())}
    leaves = [enc["input_ids"], enc["attention_mask"]]

    def leading_order() -> object:
        with torch.no_grad():
            return run_terms(program, tensors, leaves, replace(limit.settings, orders=1, ties="nan"))

    with torch.inference_mode():
        plain = best_of(lambda: model(**batch), args.repeat)
    leading = best_of(leading_order, args.repeat)
    full = best_of(lambda: limit(**batch), args.repeat)
    hidden = SaturatedModel(model, Settings(), outputs={"hidden_states"})
    read = hidden(**batch)
    states = best_of(lambda: hidden(**batch), args.repeat)
    print(f"MiniLM, batch {args.batch} x {enc['input_ids'].shape[1]} tokens, float32, "
          f"{torch.get_num_threads()} threads")
    print(f"plain forward              {plain * 1e3:8.1f} ms")
    print(f"leading order (float32)    {leading * 1e3:8.1f} ms   ratio {leading / plain:5.2f}")
    print(f"saturated                  {full * 1e3:8.1f} ms   ratio {full / plain:5.2f}   "
          f"({len(out.refined)} of {args.batch} entries recomputed in float64, "
          f"up to {out.orders} order{'s' if out.orders > 1 else ''})")
    print(f"saturated, hidden states   {states * 1e3:8.1f} ms   ratio {states / plain:5.2f}   "
          f"({len(read.refined)} of {args.batch} entries recomputed in float64)")
    print(f"first call, with exports   {first:8.2f} s   ({limit.exports} export"
          f"{'s' if limit.exports != 1 else ''})")
    print(f"first call, cached graph   {warm:8.2f} s")
    with torch.inference_mode():
        plain_memory = peak_resident(lambda: model(**batch))
    limit_memory = peak_resident(lambda: limit(**batch))
    print(f"peak memory of a call      {limit_memory / 2**20:8.0f} MB   ratio "
          f"{limit_memory / plain_memory:5.2f} to a plain pass's ({plain_memory / 2**20:.0f} MB)")
    if args.families:
        for family in FAMILIES:
            fallback_rate(family, sentences[:16])


def fallback_rate(family: str, sentences: list[str]) -> None:
    """How a two-layer random-init model of ``family`` exports, and its float64 entries."""
    model, tokenizer = load_model(family, random_init=True, num_layers=2)
    tokens = tokenize(tokenizer, sentences, max_length=512, model=model)
    batch = next(make_batches(model, tokenizer, tokens, batch_size=len(sentences), device="cpu"))
    limit = SaturatedModel(model, Settings())
    out = limit(**batch.inputs, output_hidden_states=True, return_dict=True)
    fields = {name for name in out.value if name.endswith("hidden_states")}
    states = SaturatedModel(model, Settings(), outputs=fields)(
        **batch.inputs, output_hidden_states=True, return_dict=True)
    print(f"{family:8} dynamic export: {'yes' if limit.exports_dynamic else 'no'}; "
          f"{len(out.refined)} of {len(sentences)} entries recomputed in float64 "
          f"({len(states.refined)} for the hidden states alone), up to "
          f"{out.orders} order{'s' if out.orders > 1 else ''}")


if __name__ == "__main__":
    main()
