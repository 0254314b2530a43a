"""Cost of the live saturation probe against training steps, and the period N that keeps it ≤ 5%.

The ``normsat train`` default model (GPT-2 pre-LN, 2 layers, width 64, 2 heads, batch 16×64,
AdamW) on CPU; the probe measures 4 held-out sentences of the built-in corpus (per-layer
similarity to the exact limit and the head atlas' certified scales). Prints the fastest training
step, the fastest probe, and their ratio: the probe costs ≤ 5% of training time at period N when
probe / step ≤ 0.05·N.

Run: ``python benchmarks/probe.py``.
"""

from __future__ import annotations

import argparse

import torch
from timing import best_of

from empirical.models.corpus import load_corpus
from empirical.training.probe import DEFAULT_EVERY, SaturationProbe
from empirical.training.runs import CompactTokenizer, TrainConfig, build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    corpus = list(load_corpus(n=400))
    tokenizer = CompactTokenizer.fit(corpus)
    config = TrainConfig()
    model = build_model(config, len(tokenizer), tokenizer.pad_token_id)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(1, len(tokenizer), (config.batch_size, config.context),
                        generator=torch.Generator().manual_seed(0))

    def step() -> None:
        loss = model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    probe = SaturationProbe(tokenizer, corpus[-args.sentences:], every=1)
    step()
    probe.measure(model, 0)  # warm-up: kernels, the tokenizer
    t_step = min(best_of(step, 5) for _ in range(args.repeats))
    t_probe = min(best_of(lambda: probe.measure(model, 0), 1) for _ in range(args.repeats))
    needed = t_probe / (0.05 * t_step)
    print(f"training step {1e3 * t_step:9.1f} ms (fastest), probe {1e3 * t_probe:9.1f} ms "
          f"({args.sentences} sentences, {len(probe.records[-1]['heads'])} heads)")
    print(f"probe / step {t_probe / t_step:.1f}: ≤ 5% of training time needs N ≥ {needed:.0f}; "
          f"default N = {DEFAULT_EVERY}: {100 * t_probe / (DEFAULT_EVERY * t_step):.2f}% of training time")


if __name__ == "__main__":
    main()
