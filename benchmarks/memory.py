"""Peak memory and time per token of the corpus measurements, for docs/distributed.md.

Run as ``python benchmarks/memory.py``. Each (model, measurement) runs in a fresh process, so its
peak resident memory (``ru_maxrss``) is its own; the table gives the peak after loading the model
(the measurement's own cost) beside the model's parameter bytes, and the time per real token,
as a ratio against one plain forward pass over the same batch measured in the same process.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

CASES = [("minilm", False), ("bert", True)]  # pretrained MiniLM; base-size random-init BERT, 12 layers
MEASUREMENTS = ("plain", "similarity@1000", "similarity@inf")
SENTENCES = 16


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _one(name: str, random_init: bool, measurement: str) -> dict[str, float]:
    import torch

    from empirical.measure.similarity import representation_similarity
    from empirical.models.corpus import load_corpus
    from empirical.models.loading import load_model

    torch.set_num_threads(1)
    model, tokenizer = load_model(name, random_init=random_init)
    texts = list(load_corpus(n=SENTENCES))
    tokens = sum(len(ids) for ids in tokenizer(texts)["input_ids"])
    batch = dict(tokenizer(texts, return_tensors="pt", padding=True))
    with torch.inference_mode():
        model(**batch)  # warm up
    loaded = _peak_mib()
    start = time.perf_counter()
    if measurement == "plain":
        with torch.inference_mode():
            model(**batch)
    else:
        scale = float(measurement.split("@")[1])
        representation_similarity(model, tokenizer, texts, scale=scale, batch_size=SENTENCES)
    seconds = time.perf_counter() - start
    parameters = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    return {"parameters_mib": parameters, "loaded_mib": loaded, "peak_mib": _peak_mib(),
            "seconds": seconds, "tokens": tokens}


def main() -> None:
    if len(sys.argv) == 4:  # a child: one measurement
        print(json.dumps(_one(sys.argv[1], sys.argv[2] == "1", sys.argv[3])))
        return
    print(f"{'model':<22} {'measurement':<16} {'params MiB':>10} {'peak-load MiB':>13} "
          f"{'ms/token':>9} {'x plain':>8}")
    for name, random_init in CASES:
        plain = None
        for measurement in MEASUREMENTS:
            out = subprocess.run([sys.executable, __file__, name, str(int(random_init)), measurement],
                                 capture_output=True, text=True, check=True).stdout
            row = json.loads(out.strip().splitlines()[-1])
            per_token = 1000 * row["seconds"] / row["tokens"]
            plain = plain or per_token
            label = f"{name}{' (random-init)' if random_init else ''}"
            print(f"{label:<22} {measurement:<16} {row['parameters_mib']:>10.0f} "
                  f"{row['peak_mib'] - row['loaded_mib']:>13.0f} {per_token:>9.2f} {per_token / plain:>8.1f}")


if __name__ == "__main__":
    main()
