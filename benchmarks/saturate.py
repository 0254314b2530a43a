"""Time the saturated forward pass of pretrained MiniLM against a plain forward pass.

Batch of 32 sentences from the default corpus, float32, CPU. Three timings, best of ``--repeat``:

* plain: ``model(**batch)`` with hidden states;
* leading order: the first step of ``saturate``, one order in float32 (ties the leading order
  cannot break and that matter are marked, not resolved);
* saturated: all of ``saturate``, which recomputes the marked batch entries in float64 with as
  many orders as they need.

Exporting is a one-off per input shape (and per dtype); it is timed apart, on the first call.

Run: ``python benchmarks/saturate.py [--repeat 5] [--batch 32]``. Prints the ratios to the plain
pass.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch
from timing import best_of

from empirical.corpus import load_corpus
from empirical.models import load_model
from saturated.interpreter import run_terms
from saturated.rules import Settings
from saturated.saturate import SaturatedModel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    model, tokenizer = load_model("minilm")
    sentences = list(load_corpus(n=args.batch))
    enc = tokenizer(sentences, padding=True, truncation=True, max_length=512, return_tensors="pt")
    batch = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
             "output_hidden_states": True, "return_dict": True}
    limit = SaturatedModel(model, Settings())
    start = time.perf_counter()
    out = limit(**batch)
    first = time.perf_counter() - start
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
    print(f"MiniLM, batch {args.batch} x {enc['input_ids'].shape[1]} tokens, float32, "
          f"{torch.get_num_threads()} threads")
    print(f"plain forward              {plain * 1e3:8.1f} ms")
    print(f"leading order (float32)    {leading * 1e3:8.1f} ms   ratio {leading / plain:5.2f}")
    print(f"saturated                  {full * 1e3:8.1f} ms   ratio {full / plain:5.2f}   "
          f"({len(out.refined)} of {args.batch} entries recomputed in float64, "
          f"up to {out.orders} order{'s' if out.orders > 1 else ''})")
    print(f"first call, with exports   {first:8.2f} s")


if __name__ == "__main__":
    main()
