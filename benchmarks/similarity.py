"""Time representation similarity on MiniLM against the paper's method and against its floor.

Three measurements on the same 100 sentences, in one process:

- paper's method (:mod:`empirical.measure.reference`): one sentence at a time, every parameter scaled
  in place and restored, two forward passes per sentence, on a private copy of the model;
- normsat: ``representation_similarity`` (length-sorted batches, scaled copies through
  ``functional_call``);
- floor: two plain batched forward passes over the same padded batches, nothing else.

Targets: paper / normsat ≥ 2.5 and normsat / floor ≤ 1.1. Also the exact limit,
``representation_similarity(scale=inf)``, against c = 1000 on the same sentences, target ≤ 1.5, in
the three states a run can find its graph in: exported (a fresh copy of the model, the export cache
empty: a first run), read from the cache (a fresh copy, the graph on disk: a new process's later
runs, as a second ``normsat similarity --scale inf``) and held (the model's graph already in
memory). The cache is a temporary directory of this run's own. Run:
``python benchmarks/similarity.py``.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import tempfile
import time

import torch
from timing import best_of

from empirical.measure.reference import one_at_a_time_similarity
from empirical.measure.similarity import representation_similarity
from empirical.models.batching import make_batches, tokenize
from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model

SCALE = 1000.0


def floor(model: torch.nn.Module, tokenizer, sentences: list[str]) -> None:
    """Two plain forward passes over the same length-sorted padded batches."""
    tokens = tokenize(tokenizer, sentences, max_length=512, model=model)
    with torch.inference_mode():
        for batch in make_batches(model, tokenizer, tokens, batch_size=32, device="cpu"):
            model(**batch.inputs, output_hidden_states=True)
            model(**batch.inputs, output_hidden_states=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model, tokenizer = load_model("minilm")
    sentences = list(load_corpus(n=args.sentences))

    ours = representation_similarity(model, tokenizer, sentences, scale=SCALE).per_layer
    reference = one_at_a_time_similarity(model, tokenizer, sentences, scale=SCALE)
    agreement = max(abs(a - b) for a, b in zip(ours, reference))

    t_paper = best_of(
        lambda: one_at_a_time_similarity(model, tokenizer, sentences, scale=SCALE), args.repeats
    )
    t_ours = best_of(lambda: representation_similarity(model, tokenizer, sentences, scale=SCALE),
                     args.repeats)
    t_floor = best_of(lambda: floor(model, tokenizer, sentences), args.repeats)
    # A graph is held with its model: a fresh copy has none, and finds one on disk once exported.
    # The copies are made before the clock starts: copying the model is not the library's work.
    os.environ["NORMSAT_CACHE_DIR"] = tempfile.mkdtemp(prefix="normsat-bench-")
    copies = [copy.deepcopy(model) for _ in range(args.repeats + 1)]
    start = time.perf_counter()
    representation_similarity(copies.pop(), tokenizer, sentences, scale=math.inf)
    t_exported = time.perf_counter() - start
    t_read = best_of(lambda: representation_similarity(copies.pop(), tokenizer, sentences,
                                                       scale=math.inf), args.repeats)
    t_held = best_of(lambda: representation_similarity(model, tokenizer, sentences, scale=math.inf),
                     args.repeats)
    print(f"MiniLM, {len(sentences)} sentences, c = {SCALE:g}, torch threads {torch.get_num_threads()}")
    print(f"  paper's method  {t_paper:7.3f} s")
    print(f"  normsat         {t_ours:7.3f} s")
    print(f"  floor (2 passes){t_floor:7.3f} s")
    print(f"  speed-up over the paper's method: {t_paper / t_ours:.2f}x (target ≥ 2.5)")
    print(f"  normsat / floor:                  {t_ours / t_floor:.3f} (target ≤ 1.1)")
    for state, seconds in (("exported", t_exported), ("read from the cache", t_read), ("held", t_held)):
        print(f"  exact limit (c = inf), graph {state:<20} {seconds:7.3f} s: "
              f"{seconds / t_ours:.2f}x c = {SCALE:g} (target ≤ 1.5)")
    print(f"  max |difference| of per-layer values vs the paper's method: {agreement:.2e}")
    print(f"  per-layer (normsat): {[round(v, 4) for v in ours]}")


if __name__ == "__main__":
    main()
