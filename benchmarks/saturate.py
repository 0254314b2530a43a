"""Time the saturated forward pass of pretrained MiniLM against a plain forward pass.

Batch of 32 sentences from the default corpus, float32, CPU. Three timings, best of ``--repeat``:

* plain: ``model(**batch)`` with hidden states;
* leading order: the limit interpreter tracking one order, ties averaged (the cost of the fast
  path; the exact limit when no hard-attention tie needs lower orders, which real batches do);
* saturated: what ``saturate`` does, retrying with more orders where ties need them.

Run: ``python benchmarks/saturate.py [--repeat 3] [--batch 32]``. Prints the ratios to the plain
pass.
"""

from __future__ import annotations

import argparse
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
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    model, tokenizer = load_model("minilm")
    sentences = list(load_corpus(n=args.batch))
    enc = tokenizer(sentences, padding=True, truncation=True, max_length=512, return_tensors="pt")
    batch = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
             "output_hidden_states": True, "return_dict": True}
    limit = SaturatedModel(model, Settings())
    program = limit.program(**batch)  # exporting is a one-off per input shape: not timed
    tensors = {**dict(model.named_buffers()), **dict(model.named_parameters())}
    leaves = [enc["input_ids"], enc["attention_mask"]]

    def leading_order() -> object:
        with torch.no_grad():
            return run_terms(program, tensors, leaves, replace(limit.settings, orders=1, ties="uniform"))

    with torch.inference_mode():
        plain = best_of(lambda: model(**batch), args.repeat)
    leading = best_of(leading_order, args.repeat)
    full = best_of(lambda: limit(**batch), args.repeat)
    orders = limit(**batch).orders
    print(f"MiniLM, batch {args.batch} x {enc['input_ids'].shape[1]} tokens, float32, "
          f"{torch.get_num_threads()} threads")
    print(f"plain forward          {plain * 1e3:9.1f} ms")
    print(f"leading order (1)      {leading * 1e3:9.1f} ms   ratio {leading / plain:6.2f}")
    print(f"saturated ({orders:2d} orders)  {full * 1e3:9.1f} ms   ratio {full / plain:6.2f}")


if __name__ == "__main__":
    main()
