"""The exact limit at depth: what float64 decides, what ball arithmetic adds, and what it costs.

For a random-init model of a family at a given depth (default: T5 with 4 + 4 layers, the base
configuration), over sentences of the default corpus, one batch: the share of real tokens whose
limit is determined in each hidden state, with float64 alone (``Settings(max_precision=0)``) and
with the refinement in ball arithmetic (:mod:`saturated.precision`, default cap 1024 bits); the
share of batch entries the refinement ran, and the seconds each precision level took, against the
float64 call (both include the fast path; the export is done before either is timed).

Run: ``python benchmarks/precision.py [--model t5] [--num-layers 4] [--sentences 8]``.
"""

from __future__ import annotations

import argparse
import time

import torch

from empirical.models.batching import decoder_inputs
from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model
from saturated.rules import Settings
from saturated.saturate import SaturatedModel


def _determined(out: object, fields: list[str], mask: torch.Tensor) -> list[float]:
    shares = []
    for field in fields:
        for state in getattr(out, field):
            known = ~torch.isnan(state).any(-1) & mask
            shares.append(float(known.sum()) / float(mask.sum()))
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="t5")
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--max-precision", type=int, default=1024)
    args = parser.parse_args()
    model, tokenizer = load_model(args.model, random_init=True, num_layers=args.num_layers)
    encoded = tokenizer(list(load_corpus(n=args.sentences)), padding=True, return_tensors="pt")
    batch = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"],
             **decoder_inputs(model, tokenizer, encoded["input_ids"], encoded["attention_mask"]),
             "output_hidden_states": True, "return_dict": True}
    encoder_decoder = bool(getattr(model.config, "is_encoder_decoder", False))
    fields = ["encoder_hidden_states", "decoder_hidden_states"] if encoder_decoder else ["hidden_states"]
    mask = batch["attention_mask"].bool()
    float64 = SaturatedModel(model, Settings(max_precision=0), set(fields), "nan")
    float64.program(**batch)  # the export, not timed
    start = time.perf_counter()
    before = float64(**batch)
    fast = time.perf_counter() - start
    refined = SaturatedModel(model, Settings(max_precision=args.max_precision), set(fields), "nan")
    start = time.perf_counter()
    after = refined(**batch)
    total = time.perf_counter() - start
    print(f"{args.model}, {args.num_layers} layers, {args.sentences} sentences, {int(mask.sum())} tokens")
    print("hidden state  determined (float64)  determined (with balls)")
    shares = zip(_determined(before.value, fields, mask), _determined(after.value, fields, mask))
    for index, (a, b) in enumerate(shares):
        print(f"{index:>12}  {a:>19.1%}  {b:>23.1%}")
    pending = {entry for _, entries, _ in after.precisions for entry in entries}
    print(f"entries refined: {len(pending)} of {args.sentences} ({len(pending) / args.sentences:.0%})")
    for bits, entries, seconds in after.precisions:
        print(f"  {bits:>5} bits: {len(entries)} entries, {seconds:.1f} s")
    print(f"time: float64 alone {fast:.1f} s, with the refinement {total:.1f} s ({total / fast:.1f}x)")
    for entry, why in sorted(after.reasons.items()):
        print(f"  entry {entry} undetermined: {why[0]}")


if __name__ == "__main__":
    main()
