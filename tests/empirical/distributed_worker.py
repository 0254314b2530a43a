"""One rank of a data-parallel measurement, for test_distributed.py (run by torchrun, or imported).

``python -m torch.distributed.run --standalone --nproc-per-node 2 distributed_worker.py OUT``
measures similarity at c and at ∞, the convergence to the limit and the head atlas on a
two-layer random-init BERT; rank 0 writes OUT/result.json. Then every rank measures a corpus of
its own and writes the error it gets to OUT/rank<r>.err.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
import transformers

from empirical import distributed
from empirical.errors import EmpiricalError
from empirical.measure.convergence import limit_convergence
from empirical.measure.heads import head_atlas
from empirical.measure.similarity import representation_similarity
from empirical.models.corpus import load_corpus
from empirical.models.loading import minilm_path

SENTENCES = list(load_corpus(n=7))
BATCH_SIZE = 2  # 4 length-sorted batches: two per rank


def tiny_model() -> tuple[torch.nn.Module, Any]:
    """A two-layer random-init BERT, 32 wide, the same on every rank (seeded), with MiniLM's tokenizer."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_path(), local_files_only=True)
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64)
    return transformers.BertModel(config, add_pooling_layer=False).eval(), tokenizer


def measure(model: torch.nn.Module, tokenizer: Any) -> dict[str, Any]:
    """Similarity at c = 1000 and at ∞, and cos with the limit at c = 1, 100."""
    at_c, at_limit = (representation_similarity(model, tokenizer, SENTENCES, scale=c, batch_size=BATCH_SIZE)
                      for c in (1000.0, float("inf")))
    convergence = limit_convergence(model, tokenizer, SENTENCES, scales=(1.0, 100.0), batch_size=BATCH_SIZE)
    atlas = head_atlas(model, tokenizer, SENTENCES, batch_size=BATCH_SIZE)
    return {
        "heads": atlas.to_dict(),
        "similarity": at_c.to_dict(),
        "limit": at_limit.to_dict(),
        "convergence": {"to_limit": [list(convergence.to_limit[c]) for c in convergence.scales],
                        "n_tokens": convergence.n_tokens, "distributed": convergence.distributed},
    }


def main(out: Path) -> None:
    torch.set_num_threads(1)
    world = distributed.init_from_environment()
    model, tokenizer = tiny_model()
    result = measure(model, tokenizer)
    if distributed.is_writer():
        (out / "result.json").write_text(json.dumps(result, allow_nan=False), encoding="utf-8")
    own = SENTENCES[: len(SENTENCES) - world.rank]  # rank 1 leaves out the last sentence
    try:
        representation_similarity(model, tokenizer, own, batch_size=BATCH_SIZE)
        message = "no error"
    except EmpiricalError as err:
        message = str(err)
    (out / f"rank{world.rank}.err").write_text(message, encoding="utf-8")
    distributed.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
