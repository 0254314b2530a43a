"""Regenerate docs/figures/figure4.{png,json}: the paper's Figure 4 with the models available offline.

Pretrained MiniLM and random-init base-size BERT, RoBERTa, T5, XLNet and GPT-2, at c = 1000 on
the default corpus (100 sentences). Run from the repository root: ``python docs/figures/figure4.py``.
"""

from __future__ import annotations

from pathlib import Path

from empirical.cli.commands.common import write_json
from empirical.measure.plotting import plot_similarity
from empirical.measure.similarity import representation_similarity
from empirical.models.corpus import load_corpus
from empirical.models.loading import load_model
from empirical.models.provenance import versions

HERE = Path(__file__).resolve().parent
VARIANTS = [("minilm", False), ("minilm", True), ("bert", True), ("roberta", True), ("t5", True),
            ("xlnet", True), ("gpt2", True)]


def main() -> None:
    corpus = load_corpus(n=100)
    results = {}
    for name, random_init in VARIANTS:
        model, tokenizer = load_model(name, random_init=random_init)
        label = f"{name} ({'random-init' if random_init else 'pretrained'})"
        results[label] = representation_similarity(model, tokenizer, corpus, progress=True)
        print(label, [round(v, 4) for v in results[label].per_layer])
        del model
    plot_similarity(results, HERE / "figure4.png", title="c = 1000, default corpus, 100 sentences")
    write_json({"versions": versions(), "runs": {k: r.to_dict() for k, r in results.items()}},
               HERE / "figure4.json")


if __name__ == "__main__":
    main()
