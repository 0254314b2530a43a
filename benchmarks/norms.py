"""Cost of norm tracking: per training step, and when scanning checkpoints offline.

Two measurements, each against a baseline run in the same process:

1. Tracking overhead: training steps (forward, backward, AdamW step) of the ``normsat train``
   model (GPT-2 style, :func:`empirical.training.build_model`) on CPU, with and without
   ``NormTracker.after_backward`` / ``after_step`` on every step. Target: ratio ≤ 1.05.
2. Checkpoint scanning: ``scan_checkpoints`` over a run of safetensors checkpoints (page cache
   warm), against just reading the same files (``Path.read_bytes``; target: time ratio ≤ 1.5), and
   against loading each with ``read_state_dict`` and touching every value once (a sum), which is
   the least any scan must do (reported, no target). Peak memory (peak RSS growth, reset through
   ``/proc/self/clear_refs``) as a multiple of one checkpoint's size, target ≤ 2.2 (two
   checkpoints + 10%).

Run: ``python benchmarks/norms.py`` (Linux, for the peak-RSS counter).
"""

from __future__ import annotations

import argparse
import gc
import tempfile
from pathlib import Path

import safetensors.torch
import torch
from timing import best_of

from empirical.checkpoints import read_state_dict, scan_checkpoints
from empirical.norms import NormTracker
from empirical.training import TrainConfig, build_model


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def peak_growth(fn) -> int:
    """Peak RSS during ``fn()`` above the RSS before it, in bytes."""
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    before = _rss_kib("VmRSS")
    fn()
    return (_rss_kib("VmHWM") - before) * 1024


def tracking_overhead(args: argparse.Namespace) -> None:
    config = TrainConfig(arch="pre", layers=args.layers, width=args.width, heads=2,
                         batch_size=args.batch, context=args.context)
    model = build_model(config, vocab_size=args.vocab, pad_id=0)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, args.vocab, (args.batch, args.context),
                        generator=torch.Generator().manual_seed(0))
    tracker = NormTracker(model)
    step = iter(range(10**9))

    def train_step(track: bool) -> None:
        t = next(step)
        loss = model(input_ids=ids, labels=ids).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if track:
            tracker.after_backward(t, loss)
        optimizer.step()
        if track:
            tracker.after_step(t)

    def steps(track: bool) -> None:
        for _ in range(args.steps):
            train_step(track)

    def tracker_only() -> None:  # the tracker's own work, on the gradients of the last step
        t = next(step)
        tracker.after_backward(t)
        tracker.after_step(t)

    steps(True)  # warm-up: allocator, AdamW state, first tracker vectors
    plain, tracked, single, alone = [], [], [], []
    for _ in range(args.repeats):  # interleaved, so load on the machine hits all alike
        plain.append(best_of(lambda: steps(False), 1) / args.steps)
        tracked.append(best_of(lambda: steps(True), 1) / args.steps)
        single.append(best_of(lambda: train_step(False), args.steps))
        alone.append(best_of(tracker_only, args.steps))
    parameters = sum(p.numel() for p in model.parameters())
    t_plain, t_tracked, t_single, t_alone = min(plain), min(tracked), min(single), min(alone)
    print(f"1. tracking: GPT-2 {args.layers} layers, width {args.width}, {parameters:,} parameters, "
          f"batch {args.batch}×{args.context} tokens, AdamW, torch threads {torch.get_num_threads()}")
    print(f"   untracked step {1e3 * t_plain:8.2f} ms")
    print(f"   tracked step   {1e3 * t_tracked:8.2f} ms")
    print(f"   tracker alone  {1e3 * t_alone:8.2f} ms (after_backward + after_step)")
    print(f"   overhead ratio {t_tracked / t_plain:.3f} tracked / untracked (target ≤ 1.05)")
    print(f"                  {(t_single + t_alone) / t_single:.3f} (fastest untracked step + fastest "
          "tracker call) / fastest untracked step, steadier on a busy machine")


def checkpoint_scan(args: argparse.Namespace) -> None:
    config = TrainConfig(arch="pre", layers=args.scan_layers, width=args.scan_width, heads=4,
                         context=128)
    model = build_model(config, vocab_size=args.vocab, pad_id=0)
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for step in range(args.checkpoints):
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(0.01 * torch.randn_like(p))
            path = Path(folder) / f"step-{100 * step:05d}.safetensors"
            safetensors.torch.save_model(model, str(path))
            paths.append(path)
        size = paths[0].stat().st_size

        def read_only() -> None:
            for path in paths:
                path.read_bytes()

        def load_and_touch() -> None:
            for path in paths:
                for tensor in read_state_dict(path).values():
                    tensor.sum()

        def scan() -> None:
            scan_checkpoints(paths)

        read_only()  # warm the page cache, so both read from memory alike
        t_read = best_of(read_only, args.repeats)
        t_touch = best_of(load_and_touch, args.repeats)
        t_scan = best_of(scan, args.repeats)
        peak_read, peak_scan = peak_growth(read_only), peak_growth(scan)
    print(f"2. scanning {args.checkpoints} safetensors checkpoints of {size / 2**20:.1f} MiB "
          f"({args.scan_layers} layers, width {args.scan_width})")
    print(f"   read bytes     {t_read:7.3f} s, peak RSS growth {peak_read / size:5.2f} checkpoints")
    print(f"   load + touch   {t_touch:7.3f} s")
    print(f"   scan           {t_scan:7.3f} s, peak RSS growth {peak_scan / size:5.2f} checkpoints "
          "(target ≤ 2.2)")
    print(f"   scan / read bytes   {t_scan / t_read:.3f} (target ≤ 1.5)")
    print(f"   scan / load + touch {t_scan / t_touch:.3f} (two tensors per value, in float64)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=2700, help="about the compact vocabulary of "
                        "normsat train on the built-in corpus")
    parser.add_argument("--steps", type=int, default=10, help="training steps per timing")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--checkpoints", type=int, default=6)
    parser.add_argument("--scan-layers", type=int, default=6)
    parser.add_argument("--scan-width", type=int, default=512)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    tracking_overhead(args)
    checkpoint_scan(args)


if __name__ == "__main__":
    main()
