"""The exact limit at depth: what float64 decides, what ball arithmetic adds, and what it costs.

For a random-init model of a family at a given depth (default: T5 with 4 + 4 layers, the base
configuration), over sentences of the default corpus, one batch: the share of real tokens whose
limit is determined in each hidden state, with float64 alone (``Settings(max_precision=0)``) and
with the refinement in ball arithmetic (:mod:`saturated.precision`, default cap 1024 bits); the
share of batch entries the refinement ran, and the seconds each precision level took, against the
float64 call (both include the fast path; the export is done before either is timed), in seconds
and in CPU seconds of the process (run with ``OMP_NUM_THREADS=1`` for a ratio that other jobs on
a shared machine disturb less).

It also checks the determined values against the model scaled by c = 10² and 10⁴ in float64 (the
smallest per-token cosine between each determined limit vector and the scaled hidden state). A
norm that squares its input in float32 whatever the model's dtype (Hugging Face's RMSNorm and
T5's) overflows at c = 10⁴ once a hidden state's degree reaches 5 (c¹⁰ > 3.4·10³⁸): its output
is then 0 and the cosine with it says nothing about the limit.

Run: ``python benchmarks/precision.py [--model t5] [--num-layers 4] [--sentences 8]``; with
``--hidden-size 256``, today's families narrowed to that width (8 heads, 2 key/value heads where
the family has them, experts of a quarter of the width and a shared expert of twice it, the
family's norms, activations and rotary embeddings kept). That is ``docs/figures/zoo.py``'s model
for Llama, Mistral, Qwen2 and Mixtral; zoo.py gives Gemma 1 key/value head and Phi-3 and
Qwen2-MoE 8, and leaves GPT-NeoX at its published size. ``--run DIR --step N``
reads the model a ``normsat train`` run saved at step N (such as ``train --arch t5``).
"""

from __future__ import annotations

import argparse
import time

import torch

from empirical.measure.scaled import scaled_forward
from empirical.models.batching import make_batches, tokenize
from empirical.models.corpus import load_corpus
from empirical.models.loading import _build, family_config, load_model, load_tokenizer, minilm_path
from empirical.training.runs import load_checkpoint
from saturated.rules import Settings
from saturated.saturate import SaturatedModel


def _determined(out: object, fields: list[str], mask: torch.Tensor) -> list[float]:
    shares = []
    for field in fields:
        for state in getattr(out, field):
            known = ~torch.isnan(state).any(-1) & mask
            shares.append(float(known.sum()) / float(mask.sum()))
    return shares


def _cosines(limit: object, scaled: object, fields: list[str], mask: torch.Tensor) -> float:
    """The smallest cosine, over determined tokens of every hidden state, between the limit's
    vector and the scaled one."""
    worst = 1.0
    for field in fields:
        for ours, theirs in zip(getattr(limit, field), getattr(scaled, field)):
            known = ~torch.isnan(ours).any(-1) & mask
            if bool(known.any()):
                cos = torch.nn.functional.cosine_similarity(ours[known], theirs[known].double(), dim=-1)
                worst = min(worst, float(cos.min()))
    return worst


def _model(args: argparse.Namespace) -> tuple[torch.nn.Module, object]:
    if args.run is not None:
        return load_checkpoint(args.run, args.step)
    if args.hidden_size is None:
        return load_model(args.model, random_init=True, num_layers=args.num_layers)
    width = args.hidden_size
    narrowed = {"hidden_size": width, "intermediate_size": 2 * width, "num_attention_heads": 8,
                "num_key_value_heads": 2, "head_dim": width // 8, "moe_intermediate_size": width // 4,
                "shared_expert_intermediate_size": 2 * width}
    published = family_config(args.model)  # each family has only some of these fields
    config = family_config(args.model, num_hidden_layers=args.num_layers,
                           **{key: value for key, value in narrowed.items() if hasattr(published, key)})
    return _build(config, seed=0).eval(), load_tokenizer(minilm_path())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="t5")
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--max-precision", type=int, default=1024)
    parser.add_argument("--hidden-size", type=int, default=None,
                        help="build today's family narrowed to this width (8 heads, 2 key/value heads)")
    parser.add_argument("--run", default=None, help="a `normsat train` folder: its model at --step")
    parser.add_argument("--step", type=int, default=2000)
    args = parser.parse_args()
    model, tokenizer = _model(args)
    corpus = tokenize(tokenizer, list(load_corpus(n=args.sentences)), max_length=128, model=model)
    batches = make_batches(model, tokenizer, corpus, batch_size=args.sentences, device="cpu")
    inputs = next(iter(batches)).inputs
    batch = {**inputs, "output_hidden_states": True, "return_dict": True}
    encoder_decoder = bool(getattr(model.config, "is_encoder_decoder", False))
    fields = ["encoder_hidden_states", "decoder_hidden_states"] if encoder_decoder else ["hidden_states"]
    mask = batch["attention_mask"].bool()
    float64 = SaturatedModel(model, Settings(max_precision=0), set(fields), "nan")
    float64.program(**batch)  # the export, not timed
    start, cpu = time.perf_counter(), time.process_time()
    before = float64(**batch)
    fast, fast_cpu = time.perf_counter() - start, time.process_time() - cpu
    refined = SaturatedModel(model, Settings(max_precision=args.max_precision), set(fields), "nan")
    start, cpu = time.perf_counter(), time.process_time()
    after = refined(**batch)
    total, total_cpu = time.perf_counter() - start, time.process_time() - cpu
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
    print(f"CPU time of this process (a measure that other jobs on the machine disturb less): "
          f"{fast_cpu:.1f} s and {total_cpu:.1f} s")
    model.double()
    for scale in (1e2, 1e4):
        with torch.no_grad():
            scaled = scaled_forward(model, scale, set(fields))(**batch)
        worst = _cosines(after.value, scaled, fields, mask)
        print(f"smallest cosine of a determined token with c = {scale:g} (float64): {worst:.6f}")
    model.float()
    for entry, why in sorted(after.reasons.items()):
        print(f"  entry {entry} undetermined: {why[0]}")


if __name__ == "__main__":
    main()
