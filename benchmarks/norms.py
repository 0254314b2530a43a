"""Cost of norm tracking: per training step, and when scanning checkpoints offline.

Two measurements, each against a baseline run in the same invocation:

1. Tracking overhead: training steps (forward, backward, AdamW step) of the ``normsat train``
   model (GPT-2 style, :func:`empirical.training.runs.build_model`) on CPU, with and without
   ``NormTracker.after_backward`` / ``after_step`` on every step. Target: ratio ≤ 1.05.
   Logging overhead: writing one record to a ``SummaryWriter`` (``NormTracker(writer=...)``) and
   adding it to the Trainer's logs (``NormCallback.on_log``), against the untracked step.
   Target: ratio ≤ 1.01.
2. Checkpoint scanning: ``scan_checkpoints`` over a run of safetensors checkpoints (page cache
   warm) against reading the same files: ``read_state_dict`` and a sum of every tensor (safetensors
   maps files lazily, so the sum is what reads them; target: time ratio ≤ 1.5), and, for
   reference, ``Path.read_bytes``. Each measurement runs in a fresh child process (after its
   imports and a warm-up of the kernels it uses), which reports its time and its peak RSS growth
   (``VmHWM`` after a reset through ``/proc/self/clear_refs``; mapped file pages count), as a
   multiple of one checkpoint's size: target ≤ 2.2 (two checkpoints + 10%) for the scan. The
   three are interleaved over the repeats, so load on a shared machine hits all alike.

Run: ``python benchmarks/norms.py`` (Linux, for the peak-RSS counters).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import safetensors.torch
import torch
from timing import best_of

from empirical.models.formats import read_state_dict
from empirical.training.checkpoints import scan_checkpoints
from empirical.training.norms import NormTracker
from empirical.training.runs import TrainConfig, build_model


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _child(what: str, paths: list[Path]) -> dict[str, float]:
    """One scan measurement in this (fresh) process: seconds and peak RSS growth in bytes."""

    def read_bytes() -> None:
        for path in paths:
            path.read_bytes()

    def load_and_sum() -> None:
        for path in paths:
            for tensor in read_state_dict(path).values():
                tensor.sum()

    def scan() -> None:
        scan_checkpoints(paths)

    fn = {"read bytes": read_bytes, "load + sum": load_and_sum, "scan": scan}[what]
    # Warm-up on two tiny checkpoints: library code and kernels are loaded before the peak is reset.
    with tempfile.TemporaryDirectory() as folder:
        tiny = [Path(folder) / f"step-{i}.safetensors" for i in range(2)]
        for path in tiny:
            safetensors.torch.save_file({"w": torch.randn(300, 300)}, str(path))
        scan_checkpoints(tiny)
        for path in tiny:
            sum(t.sum() for t in read_state_dict(path).values())
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    before = _rss_kib("VmRSS")
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak": (_rss_kib("VmHWM") - before) * 1024.0}


def _in_child(what: str, paths: list[Path], threads: int | None) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", what, *(["--threads", str(threads)] if threads
                                                             else []), *map(str, paths)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


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
    logging_overhead(tracker, t_single, args)


def logging_overhead(tracker: NormTracker, t_step: float, args: argparse.Namespace) -> None:
    """Per-step cost of writing a record to TensorBoard and of adding it to the Trainer's logs."""
    from torch.utils.tensorboard import SummaryWriter
    from transformers import TrainerControl, TrainerState

    from empirical.training.callbacks import NormCallback

    callback = NormCallback()
    callback.tracker = tracker
    state, control = TrainerState(), TrainerControl()
    record = tracker.records[-1]
    with tempfile.TemporaryDirectory() as folder, SummaryWriter(folder) as writer:
        tracker.writer = writer

        def write() -> None:
            tracker._write(record)

        def on_log() -> None:
            callback._logged_step = None
            callback.on_log(None, state, control, logs={})  # type: ignore[arg-type]

        t_write = min(best_of(write, args.steps) for _ in range(args.repeats))
        t_log = min(best_of(on_log, args.steps) for _ in range(args.repeats))
        tracker.writer = None
    print(f"   logging: {len(tracker.layer_names)} layers, one record per step")
    print(f"   SummaryWriter  {1e3 * t_write:8.3f} ms per record, ratio {(t_step + t_write) / t_step:.4f} "
          "(target ≤ 1.01)")
    print(f"   Trainer logs   {1e3 * t_log:8.3f} ms per record, ratio {(t_step + t_log) / t_step:.4f} "
          "(target ≤ 1.01)")


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
        for path in paths:  # warm the page cache, so every measurement reads from memory alike
            path.read_bytes()
        kinds = ("read bytes", "load + sum", "scan")
        runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
        for _ in range(args.repeats):
            for kind in kinds:
                runs[kind].append(_in_child(kind, paths, args.threads))
    best = {kind: min(r["seconds"] for r in runs[kind]) for kind in kinds}
    print(f"2. scanning {args.checkpoints} safetensors checkpoints of {size / 2**20:.1f} MiB "
          f"({args.scan_layers} layers, width {args.scan_width}), each measurement in a fresh "
          f"process, {args.repeats} repeats")
    for kind in kinds:
        peaks = [r["peak"] / size for r in runs[kind]]
        slowest = max(r["seconds"] for r in runs[kind])
        print(f"   {kind:<11} {best[kind]:7.3f} s (fastest; slowest {slowest:.3f}), "
              f"peak RSS growth {min(peaks):.2f}–{max(peaks):.2f} checkpoints")
    print(f"   scan / (load + sum) {best['scan'] / best['load + sum']:.3f} (target ≤ 1.5)")
    print(f"   scan / read bytes   {best['scan'] / best['read bytes']:.3f}")
    print(f"   scan peak           {max(r['peak'] for r in runs['scan']) / size:.2f} checkpoints "
          "(largest of the repeats; target ≤ 2.2)")


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
    parser.add_argument("--only", choices=("tracking", "scan"), default=None,
                        help="run one of the two measurements")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        print(json.dumps(_child(args.child, args.paths)))
        return
    if args.only != "scan":
        tracking_overhead(args)
    if args.only != "tracking":
        checkpoint_scan(args)


if __name__ == "__main__":
    main()
