"""A model larger than its memory budget: similarity streamed by accelerate vs in memory.

Run as ``python benchmarks/bigmodel.py FOLDER [--max-memory 1GiB] [--layers 22] [--scale 1000]``.
The first run builds, in FOLDER, a random-init Llama-shaped model of about 1.1 billion parameters
(the shape of TinyLlama-1.1B: 22 layers, hidden size 2048, grouped-query attention, vocabulary
32,000; ``--shape small``: hidden size 1024, a few hundred MB for 8 layers) and writes it as sharded
bfloat16 safetensors; later runs reuse it. Building takes several GB of memory and minutes; the
folder is a benchmark fixture, never committed.

Then two fresh processes each measure ``similarity`` at c = ``--scale`` (``inf``: the exact limit)
on ``--sentences`` sentences of the built-in corpus: one with ``--max-memory`` (the layers that do
not fit are streamed from disk as they run; for the exact limit, read one tensor at a time as the
graph needs them), one with the whole model in memory (bfloat16 weights). Each prints its peak
resident memory (``ru_maxrss``) after loading and at the end, and its time; the script prints
both, the time ratio, and whether the two results agree to float32 rounding.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SENTENCES = 8
SHAPE = {"vocab_size": 32000, "hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 32,
         "num_key_value_heads": 4, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5,
         "tie_word_embeddings": False}
"""TinyLlama-1.1B's shape (its 22 layers are ``--layers``): 1.03B parameters in the bare model."""
SMALL = {**SHAPE, "hidden_size": 1024, "intermediate_size": 2816, "num_attention_heads": 16}
"""Hidden size 1024 (``--shape small``): 11M parameters per layer, 33M in the embedding."""


def build(folder: Path, layers: int, shape: dict[str, object]) -> None:
    """Write the random-init model to ``folder`` as sharded bfloat16 safetensors, one layer at a time
    in memory at most twice (built in bfloat16)."""
    import torch
    import transformers

    config = transformers.LlamaConfig(**shape, num_hidden_layers=layers)
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = transformers.LlamaModel(config).to(torch.bfloat16).eval()
    model.save_pretrained(folder, max_shard_size="500MB")


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def measure(folder: Path, max_memory: str | None, scale: float, sentences: int) -> dict[str, object]:
    """One similarity run in this process: its peak memory (after loading, and at the end), time
    and per-layer values."""
    import torch

    from empirical.measure.similarity import representation_similarity
    from empirical.models.corpus import load_corpus
    from empirical.models.loading import load_model

    start = time.perf_counter()
    options = {} if max_memory is None else {"max_memory": max_memory,
                                             "offload_folder": tempfile.mkdtemp(prefix="normsat-offload-")}
    model, tokenizer = load_model(folder, dtype=torch.bfloat16, **options)
    loaded, load_peak = time.perf_counter() - start, _peak_gb()
    result = representation_similarity(model, tokenizer, list(load_corpus(n=sentences)), scale=scale,
                                       batch_size=sentences)
    return {"seconds": time.perf_counter() - start, "load_seconds": loaded, "load_peak_gb": load_peak,
            "peak_gb": _peak_gb(),
            "per_layer": list(result.per_layer), "compute_dtype": result.record["compute_dtype"],
            "placement": result.record.get("placement")}


def _child(folder: Path, max_memory: str | None, scale: float, sentences: int) -> dict[str, object]:
    argv = [sys.executable, __file__, str(folder), "--child", "--max-memory", max_memory or "none",
            "--scale", str(scale), "--sentences", str(sentences)]
    # Each run exports the model itself (an empty export cache of its own), as a first run does.
    cache = {"NORMSAT_CACHE_DIR": tempfile.mkdtemp(prefix="normsat-exports-")}
    done = subprocess.run(argv, capture_output=True, text=True, check=True, env={**os.environ, **cache})
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--max-memory", default="1GiB")
    parser.add_argument("--layers", type=int, default=22)
    parser.add_argument("--shape", choices=("tinyllama", "small"), default="tinyllama")
    parser.add_argument("--scale", type=float, default=1000.0, help="c, or inf for the exact limit")
    parser.add_argument("--sentences", type=int, default=SENTENCES)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.folder, None if args.max_memory == "none" else args.max_memory,
                                 args.scale, args.sentences)))
        return
    if not (args.folder / "config.json").is_file():
        start = time.perf_counter()
        build(args.folder, args.layers, SHAPE if args.shape == "tinyllama" else SMALL)
        print(f"built {args.folder} in {time.perf_counter() - start:.0f} s")
    streamed = _child(args.folder, args.max_memory, args.scale, args.sentences)
    whole = _child(args.folder, None, args.scale, args.sentences)
    agree = max(abs(a - b) for a, b in zip(streamed["per_layer"], whole["per_layer"]))  # type: ignore[arg-type]
    print(f"c = {args.scale:g}, {args.sentences} sentences")
    print(f"{'run':<28} {'peak GB':>8} {'load GB':>8} {'seconds':>8} {'load s':>7}")
    for label, run in (("max-memory " + args.max_memory, streamed), ("in memory", whole)):
        print(f"{label:<28} {run['peak_gb']:>8.2f} {run['load_peak_gb']:>8.2f} {run['seconds']:>8.1f} "
              f"{run['load_seconds']:>7.1f}")
    print(f"time ratio (streamed / in memory): {streamed['seconds'] / whole['seconds']:.2f}")  # type: ignore[operator]
    print(f"placement: {streamed['placement']}; compute dtype: {streamed['compute_dtype']}")
    print(f"largest per-layer difference: {agree:.2e}")


if __name__ == "__main__":
    main()
