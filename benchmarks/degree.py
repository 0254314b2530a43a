"""Time degree propagation over exported BERT-base graphs, and its growth with depth.

Measurements, in one process, on random-init BERT-base (width 768, 12 heads):

- export: ``torch.export`` of the 12-layer model (done once; not part of the targets);
- propagation: :func:`homogeneity.analysis.analyze_program` on the exported graph (the rule pass, the
  per-node entries and the per-module summaries), best of several runs;
- depth: the same for 48 layers of the same width, and the ratio 48 / 12.

Targets: propagation ≤ 0.5 s on the 12-layer graph; ratio ≤ 4.4 (linear in the node count would be
about 4). Run: ``python benchmarks/degree.py``.
"""

from __future__ import annotations

import argparse
import time
import timeit

import torch

from empirical.models.loading import load_model
from homogeneity import export_model
from homogeneity.analysis import analyze_program


def exported_bert(num_layers: int) -> tuple[torch.export.ExportedProgram, float]:
    """The exported random-init BERT-base with ``num_layers`` layers, and the export time."""
    model, tokenizer = load_model("bert", random_init=True, num_layers=num_layers)
    enc = tokenizer(["The parameter norm grows.", "Attention saturates."], return_tensors="pt",
                    padding=True)
    start = time.perf_counter()
    program = export_model(model, (), {"input_ids": enc["input_ids"],
                                       "attention_mask": enc["attention_mask"],
                                       "output_hidden_states": True})
    return program, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15,
                        help="runs per timing, the best counts (default: 15)")
    args = parser.parse_args()
    timings = {}
    for layers in (12, 48):
        program, export_time = exported_bert(layers)
        nodes = len(program.graph.nodes)
        seconds = min(timeit.repeat(lambda p=program: analyze_program(p), number=1,
                                    repeat=args.repeats))
        timings[layers] = seconds
        report = analyze_program(program)
        print(f"BERT-base, {layers:2d} layers: {nodes:5d} nodes, export {export_time:6.2f} s, "
              f"propagation {seconds:.3f} s ({1e6 * seconds / nodes:.0f} µs/node); degree "
              f"{report.degree} ({report.grade})")
        del program
    ratio = timings[48] / timings[12]
    print(f"propagation, 12 layers: {timings[12]:.3f} s (target ≤ 0.5 s)")
    print(f"ratio 48 / 12 layers:   {ratio:.2f}x (target ≤ 4.4x)")


if __name__ == "__main__":
    main()
