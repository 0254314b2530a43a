"""Time certificates on pretrained MiniLM against the degree analysis, in one process.

Measurements (best of several runs, after one warm-up run that proves the lemmas the graph uses):

- analyze: :func:`homogeneity.analyze` (export and rule pass);
- certify: :func:`homogeneity.certify` (export, rule pass, one law per node), and its ratio to
  analyze;
- check: :func:`homogeneity.check_certificate` (export again, one law per node), and its ratio;
- proofs: proving every lemma once (:func:`homogeneity.verify.check_lemmas` over all targets,
  which also checks each rule on its grid), in a fresh process state for the proofs;
- size: the certificate's JSON in bytes;
- formal: :func:`homogeneity.verify.prove` on the small graphs of the formal-proof tests (a
  one-head attention layer, a bias before LayerNorm, LayerNorm and RMSNorm blocks, saturating
  MLPs), each timed once after a warm-up export.

Targets: certify ≤ 1.5× analyze; check ≤ 5 s; JSON < 2 MB; all lemmas ≤ 120 s; each formal
proof a few seconds at most.
Run: ``python benchmarks/certificate.py``.
"""

from __future__ import annotations

import argparse
import time
import timeit
from collections.abc import Callable

import torch
from torch import nn

from empirical.models import load_model
from homogeneity import analyze, certify, check_certificate
from homogeneity.verify import check_lemmas, prove


class _OneHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.q, self.k, self.v = (nn.Linear(2, 2, bias=False) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        return torch.softmax(self.q(h) @ self.k(h).transpose(-1, -2), -1) @ self.v(h)


def _formal_models() -> dict[str, nn.Module]:
    torch.manual_seed(0)

    def block(middle: nn.Module) -> nn.Module:
        return nn.Sequential(nn.Linear(2, 2, bias=False), middle, nn.Linear(2, 1, bias=False))

    return {
        "one-head attention": _OneHead(),
        "bias before LayerNorm": nn.Sequential(nn.Linear(2, 2, bias=False), nn.Linear(2, 3),
                                               nn.LayerNorm(3, eps=0.0, elementwise_affine=False)),
        "LayerNorm block": block(nn.LayerNorm(2)),
        "RMSNorm block": block(nn.RMSNorm(2)),
        "LayerNorm without eps": block(nn.LayerNorm(2, eps=0.0, bias=False)),
        **{f"{name} MLP": block(act) for name, act in
           (("tanh", nn.Tanh()), ("sigmoid", nn.Sigmoid()), ("GELU", nn.GELU()), ("SiLU", nn.SiLU()))},
    }


def formal() -> None:
    """Time prove() on each small graph (after one warm-up, which pays torch.export's imports)."""
    x = torch.tensor([[1.0, 0.5], [-0.5, 1.0]])
    models = _formal_models()
    prove(models["tanh MLP"], x)
    for name, model in models.items():
        start = time.perf_counter()
        proofs = prove(model, x)
        took = time.perf_counter() - start
        shown = ", ".join(f"degree {p.degree} {p.grade} ({'proved' if p.proved else 'NOT proved'})"
                          for p in proofs)
        print(f"formal proof, {name}: {took:.2f} s: {shown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per timing (default: 5)")
    args = parser.parse_args()
    formal()
    start = time.perf_counter()
    results = check_lemmas()
    proofs = time.perf_counter() - start
    print(f"lemmas: {sum(r.proved for r in results.values())} of {len(results)} targets proved "
          f"in {proofs:.1f} s (target ≤ 120 s)")
    model, tokenizer = load_model("minilm")
    batch = dict(tokenizer(["The parameter norm grows.", "Attention saturates."],
                           return_tensors="pt", padding=True))
    certificate = certify(model, **batch)
    text = certificate.to_json()

    def best(fn: Callable[[], object]) -> float:
        return min(timeit.repeat(fn, number=1, repeat=args.repeats))

    analyzed = best(lambda: analyze(model, **batch))
    certified = best(lambda: certify(model, **batch))
    checked = best(lambda: check_certificate(text, model, **batch))
    print(f"MiniLM, {len(certificate.steps)} steps: analyze {analyzed:.3f} s, certify "
          f"{certified:.3f} s, check {checked:.3f} s")
    print(f"certify / analyze: {certified / analyzed:.2f}x (target ≤ 1.5x)")
    print(f"check / analyze:   {checked / analyzed:.2f}x; check {checked:.2f} s (target ≤ 5 s)")
    print(f"certificate JSON:  {len(text.encode()) / 1e6:.3f} MB (target < 2 MB)")


if __name__ == "__main__":
    main()
