"""Time certificates on pretrained MiniLM against the degree analysis, in one process.

Measurements (best of several runs, after one warm-up run that proves the lemmas the graph uses):

- analyze: :func:`homogeneity.analyze` (export and rule pass);
- certify: :func:`homogeneity.certify` (export, rule pass, one law per node), and its ratio to
  analyze;
- check: :func:`homogeneity.check_certificate` (export again, one law per node), and its ratio;
- proofs: proving every lemma once (:func:`homogeneity.verify.check_lemmas` over all targets,
  which also checks each rule on its grid), in a fresh process state for the proofs;
- size: the certificate's JSON in bytes;
- formal: each test of ``tests/homogeneity/test_formal_limits.py`` (:func:`homogeneity.verify.prove`
  on a one-head attention layer, a bias before LayerNorm, LayerNorm and RMSNorm blocks,
  saturating MLPs, wrong rules refuted), as pytest times it in a fresh process; the first test
  also pays torch.export's imports.

Targets: certify ≤ 1.5× analyze; check ≤ 5 s; JSON < 2 MB; all lemmas ≤ 120 s; each formal
proof a few seconds at most.
Run: ``python benchmarks/certificate.py``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path

from empirical.models.loading import load_model
from homogeneity import analyze, certify, check_certificate
from homogeneity.verify import check_lemmas

FORMAL_TESTS = Path(__file__).resolve().parents[1] / "tests" / "homogeneity" / "test_formal_limits.py"


def formal() -> None:
    """Run the formal-proof tests in a fresh process and print each test's time (pytest's own)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--durations=0", "--durations-min=0", str(FORMAL_TESTS)],
                          capture_output=True, text=True, cwd=FORMAL_TESTS.parents[2])
    lines = done.stdout.splitlines()
    times = [line for line in lines if " call " in line]
    print(f"formal proofs ({lines[-1] if lines else 'no output'}), per test:")
    for line in times:
        print(f"  {line}")


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
