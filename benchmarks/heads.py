"""Time the head atlas of pretrained MiniLM against plain forward passes with attention outputs.

Over ``--sentences`` sentences of the default corpus in batches of 16, float32, CPU, best of
``--repeat``, baseline and atlas timed back to back ``--runs`` times (ratios per run):

* plain: ``model(**batch, output_attentions=True)`` over every batch (the baseline);
* limit: the exact saturated network over the same batches, once (its cost is the one
  ``benchmarks/saturate.py`` tracks; ``--ties`` as in ``normsat heads``);
* atlas: :func:`empirical.measure.heads.measure_heads` replaying those limit outputs, without the paper's
  approximation: its whole time is the cost beyond the limit, compared with the baseline;
* paper's approximation: the extra forward pass at 1000·θ, timed apart.

Then the certified saturation scales of 512 × 512 attention maps: the log-probabilities of a real
MiniLM head on 512 tokens, and Gaussian scores (standard deviation 3).

Run: ``python benchmarks/heads.py [--repeat 3] [--runs 3] [--sentences 100] [--ties nan|uniform]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from functools import partial

import torch
from timing import best_of

from empirical.measure.heads import HeadBatch, measure_heads
from empirical.measure.pipeline import prepare
from empirical.measure.scaled import scaled_forward
from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model
from saturated.bounds import scale_to_saturate_map
from saturated.rules import Settings
from saturated.saturate import SaturatedModel, SaturatedOutput


def _long_map(model: torch.nn.Module, tokenizer: object) -> torch.Tensor:
    """Log-probabilities of head 0 of the last layer on 512 tokens of the corpus."""
    text = " ".join(load_corpus(n=200))
    ids = tokenizer(text, truncation=True, max_length=512, return_tensors="pt")  # type: ignore[operator]
    with torch.inference_mode():
        attention = model(**ids, output_attentions=True).attentions[-1][0, 0]
    return attention.double().log()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3, help="baseline/atlas pairs to time")
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--ties", choices=("nan", "uniform"), default="nan")
    args = parser.parse_args()
    model, tokenizer = load_model("minilm")
    _, prepared = prepare(model, tokenizer, list(load_corpus(n=args.sentences)), max_length=512,
                          batch_size=16)
    batches = [HeadBatch(b.inputs, b.stacks[0][1]) for b in prepared]
    options = {"output_attentions": True, "return_dict": True}
    limit = SaturatedModel(model, Settings(ties=args.ties))
    start = time.perf_counter()
    outputs = [limit(**batch.inputs, **options) for batch in batches]
    limit_time = time.perf_counter() - start
    replay: Iterator[SaturatedOutput] = iter(())

    def replayed(**_: object) -> SaturatedOutput:
        return next(replay)

    def atlas() -> None:
        nonlocal replay
        replay = iter(outputs)
        measure_heads(model, batches, causal=False, paper=False, limit=replayed)
    grown = scaled_forward(model, 1000.0)

    def plain() -> None:
        with torch.inference_mode():
            for batch in batches:
                model(**batch.inputs, **options)

    def paper() -> None:
        with torch.inference_mode():
            for batch in batches:
                grown(**batch.inputs, **options)

    print(f"MiniLM, {args.sentences} sentences in {len(batches)} batches, float32, "
          f"{torch.get_num_threads()} threads")
    # On a shared machine the load changes between measurements: each run times the baseline
    # and the atlas back to back, and the ratios are reported per run.
    ratios = []
    for run in range(args.runs):
        base = best_of(plain, args.repeat)
        beyond = best_of(atlas, args.repeat)
        ratios.append(beyond / base)
        print(f"run {run + 1}: plain forward with attentions {base:6.2f} s, atlas beyond the limit "
              f"{beyond:6.2f} s, ratio {beyond / base:5.2f}   (target 1.5)")
    print(f"atlas ratio over {args.runs} runs: median {statistics.median(ratios):.2f}, "
          f"min {min(ratios):.2f}, max {max(ratios):.2f}")
    approximation = best_of(paper, args.repeat)
    print(f"exact limit (ties={args.ties}, once, exports included) {limit_time:8.2f} s   "
          f"ratio {limit_time / base:6.2f}")
    print(f"paper's approximation pass    {approximation:8.2f} s   ratio {approximation / base:6.2f}")
    gaussian = 3 * torch.randn(512, 512, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for name, scores in (("MiniLM head, 512 tokens", _long_map(model, tokenizer)),
                         ("Gaussian scores (sd 3)", gaussian)):
        took = best_of(partial(scale_to_saturate_map, scores, 1e-3), args.repeat)
        result = scale_to_saturate_map(scores, 1e-3)
        print(f"certified scales, 512 x 512, {name}: {took:6.2f} s (target 5 s); "
              f"map maximum in [{result.maximum[0]:.6g}, {result.maximum[1]:.6g}]")


if __name__ == "__main__":
    main()
