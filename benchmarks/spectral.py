"""The weights' spectral norm bounds: how tight and how costly, certified against nested.

For random weights of the zoo's shapes and of larger models (N(0, 0.02²), seed 0), the bound
:func:`saturated.spectral.spectral_norm_bound` gives (a Cholesky certificate of the Gram matrix's
top eigenvalue) and the nested Gram products it falls back to, each as a multiple of the largest
singular value from an SVD, and their CPU seconds (best of ``--repeat``, alternating, in one
process). Run: ``OMP_NUM_THREADS=1 python benchmarks/spectral.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from saturated import spectral

SHAPES = [(256, 688), (768, 768), (3072, 768), (2048, 2048), (2048, 8192)]


def _cpu_seconds(bound: Callable[..., float], matrix: torch.Tensor, *args: int, repeat: int
                 ) -> tuple[float, float]:
    """bound(matrix, *args) and its best CPU seconds over ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        value = bound(matrix, *args)
        times.append(time.process_time() - start)
    return value, min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(0)
    print(f"{'shape':>12} {'certified':>12} {'nested':>10} {'seconds':>8} {'nested s':>9} {'ratio':>6}")
    for shape in SHAPES:
        weight = torch.randn(*shape, generator=generator) * 0.02
        wide = weight.double()
        tall = wide if wide.shape[0] >= wide.shape[1] else wide.T
        largest = float(torch.linalg.matrix_norm(wide, 2))
        certified, seconds = _cpu_seconds(spectral.spectral_norm_bound, weight, repeat=args.repeat)
        nested, nested_seconds = _cpu_seconds(spectral._bound, tall, 4, repeat=args.repeat)
        print(f"{shape!s:>12} {certified / largest - 1:12.1e} {nested / largest:9.3f}× "
              f"{seconds:8.3f} {nested_seconds:9.3f} {seconds / nested_seconds:6.2f}", flush=True)
    print("certified: the bound over the largest singular value, minus 1; ratio: its seconds over nested's")


if __name__ == "__main__":
    main()
