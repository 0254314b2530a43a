"""One interrupt policy (docs/errors.md, "Interrupted"): Ctrl-C and SIGTERM keep a run's finished
checkpoints with a train.json that says where it stopped, exit with 128 + the signal, leave no
hidden remnant, and the run resumes to the numbers of a run that was never interrupted."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import safetensors.torch
import torch

import empirical.training.runs as runs
from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.interrupts import Interrupted, deferred, exit_code, signals_as_interrupts
from empirical.models.corpus import load_corpus
from empirical.training.resume import RESUME_FILE, ResumeState, load_state, resume_path, save_state
from empirical.training.runs import (
    TrainConfig,
    TrainingInterrupted,
    checkpoint_path,
    evaluation_steps,
    read_run,
    train,
)

ROOT = Path(__file__).resolve().parents[2]
TINY = {"layers": 1, "width": 16, "heads": 2, "batch_size": 64, "context": 16, "eval_sentences": 2,
        "limit_similarity": False}


def _signal_at(monkeypatch: pytest.MonkeyPatch, stop: int, signum: int) -> None:
    """Deliver ``signum`` to this process at the start of step ``stop``: a real signal, so it
    takes the road a user's Ctrl-C or a scheduler's SIGTERM takes."""
    real = runs._train_step

    def step(config, model, data, optimizer, tracker, batches, at, device):
        if at == stop:
            os.kill(os.getpid(), signum)
        return real(config, model, data, optimizer, tracker, batches, at, device)

    monkeypatch.setattr(runs, "_train_step", step)


def _hidden(folder: Path) -> list[str]:
    return [str(p.relative_to(folder)) for p in folder.rglob(".*")]


@pytest.fixture(scope="module")
def small_corpus():
    return load_corpus(n=200)


@pytest.mark.parametrize(("arch", "optimizer", "schedule"),
                         [("pre", "adamw", "linear"), ("t5", "adafactor", "sqrt")])
def test_a_resumed_run_equals_one_never_interrupted(arch, optimizer, schedule, small_corpus, tmp_path,
                                                    monkeypatch, capsys):
    config = TrainConfig(**TINY, arch=arch, steps=5, evaluations=3, optimizer=optimizer,
                         schedule=schedule, lr=1e-2)
    assert evaluation_steps(5, 3) == [0, 1, 2, 5]
    whole = train(config, tmp_path / "whole", corpus=small_corpus)
    stopped = tmp_path / "stopped"
    _signal_at(monkeypatch, 4, signal.SIGTERM)
    with signals_as_interrupts(), pytest.raises(TrainingInterrupted) as caught:
        train(config, stopped, corpus=small_corpus)
    monkeypatch.undo()
    assert exit_code(caught.value) == 143
    # Where it stopped, on disk: steps 0, 1 and 2 are complete, step 4 was under way.
    document = read_run(stopped, unfinished=True)
    assert document["stopped"] == {"last_checkpoint": 2, "at_step": 4, "signal": "SIGTERM"}
    assert [r["step"] for r in document["records"]] == [1, 2]
    assert sorted(p.name for p in (stopped / "checkpoints").iterdir()) == [
        checkpoint_path(stopped, s).name for s in (0, 1, 2)]
    assert (stopped / RESUME_FILE).is_file() and _hidden(stopped) == []
    with pytest.raises(EmpiricalError, match=r"unfinished one \(interrupted by SIGTERM at step 4"):
        read_run(stopped)
    # Stopped again before its next checkpoint, the resumed run keeps the one it resumed from.
    _signal_at(monkeypatch, 3, signal.SIGINT)
    with signals_as_interrupts(), pytest.raises(TrainingInterrupted) as caught:
        train(config, stopped, corpus=small_corpus, resume=True)
    monkeypatch.undo()
    again = {"last_checkpoint": 2, "at_step": 3, "signal": "SIGINT"}
    assert caught.value.result is not None and caught.value.result.stopped == again
    assert read_run(stopped, unfinished=True)["stopped"] == again
    capsys.readouterr()
    resumed = train(config, stopped, corpus=small_corpus, resume=True, progress=True)
    # The progress bar goes on from the checkpoint resumed from, out of the run's steps.
    bar = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()
    assert f"train {arch}:  40%" in bar[0] and "| 2/5 [" in bar[0]
    assert bar[-1].startswith(f"train {arch}: 100%") and "| 5/5 [" in bar[-1]
    # Parameters, optimizer state, schedule, batch order and the trackers' previous θ restored
    # (twice): every number equals the uninterrupted run's, to the last bit.
    assert resumed.records == whole.records
    assert resumed.checkpoints == whole.checkpoints
    assert resumed.evaluations == whole.evaluations
    assert resumed.fits == whole.fits
    for step in (0, 1, 2, 5):
        assert checkpoint_path(stopped, step).read_bytes() == checkpoint_path(tmp_path / "whole",
                                                                              step).read_bytes()


def test_resuming_refuses_another_configuration_and_a_folder_without_a_run(small_corpus, tmp_path,
                                                                            monkeypatch):
    config = TrainConfig(**TINY, steps=3, evaluations=1)
    with pytest.raises(EmpiricalError, match=r"resume file .* does not exist"):
        train(config, tmp_path / "nothing", corpus=small_corpus, resume=True)
    _signal_at(monkeypatch, 2, signal.SIGINT)
    with signals_as_interrupts(), pytest.raises(TrainingInterrupted) as caught:
        train(config, tmp_path / "run", corpus=small_corpus)
    monkeypatch.undo()  # a resume wrongly let through fails its check instead of signalling pytest
    assert exit_code(caught.value) == 130 and caught.value.result is not None
    assert caught.value.result.stopped == {"last_checkpoint": 0, "at_step": 2, "signal": "SIGINT"}
    other = TrainConfig(**TINY, steps=4, evaluations=1)
    with pytest.raises(EmpiricalError) as refused:
        train(other, tmp_path / "run", corpus=small_corpus, resume=True)
    assert str(refused.value) == (f"cannot resume the run in {tmp_path / 'run'} with another "
                                  f"configuration: it has {asdict(config)}, got {asdict(other)}")
    shorter = load_corpus(n=150)
    assert shorter.sha256 != small_corpus.sha256
    with pytest.raises(EmpiricalError) as refused:
        train(config, tmp_path / "run", corpus=shorter, resume=True)
    assert str(refused.value) == (f"cannot resume the run in {tmp_path / 'run'} on another corpus: it "
                                  f"has sha256 {small_corpus.sha256[:16]}…, got {shorter.sha256[:16]}…")
    with pytest.raises(EmpiricalError) as refused:
        train(config, corpus=small_corpus, resume=True)
    assert str(refused.value) == "resume expected the run folder out of an unfinished run, got out=None"
    # The resume file without the checkpoint it continues from.
    missing = checkpoint_path(tmp_path / "run", 0)
    missing.unlink()
    with pytest.raises(EmpiricalError) as refused:
        train(config, tmp_path / "run", corpus=small_corpus, resume=True)
    assert str(refused.value) == (f"cannot resume: the resume file is of step 0, but its checkpoint "
                                  f"{missing} is missing")


def test_a_signal_during_a_checkpoint_s_write_stops_the_run_at_that_checkpoint(small_corpus, tmp_path,
                                                                              monkeypatch):
    """The signal waits until the checkpoint, the resume file and train.json are written, so the
    checkpoint under way when it came is the run's last, and the run resumes from it."""
    config = TrainConfig(**TINY, steps=3, evaluations=1)
    real = safetensors.torch.save_model

    def signal_then_save(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    monkeypatch.setattr(safetensors.torch, "save_model", signal_then_save)
    out = tmp_path / "run"
    with signals_as_interrupts(), pytest.raises(TrainingInterrupted) as caught:
        train(config, out, corpus=small_corpus)  # stopped in step 0's checkpoint, before step 1
    monkeypatch.undo()
    expected = {"last_checkpoint": 0, "at_step": 0, "signal": "SIGINT"}
    assert caught.value.result is not None and caught.value.result.stopped == expected
    assert read_run(out, unfinished=True)["stopped"] == expected
    assert checkpoint_path(out, 0).is_file() and load_state(resume_path(out)).step == 0
    resumed = train(config, out, corpus=small_corpus, resume=True)
    assert resumed.stopped is None and [r["step"] for r in resumed.records] == [1, 2, 3]


# Short training steps, many checkpoints, a run far too long to end before the signal.
_LONG_RUN = ["train", "--layers", "1", "--width", "16", "--heads", "2", "--blocks-per-step", "64",
             "--context", "16", "--steps", "100000", "--evaluations", "60", "--no-saturation",
             "--quiet"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_keeps_the_finished_checkpoints_and_says_where_the_run_stopped(signum, tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "empirical.cli", *_LONG_RUN, "--out", str(out)],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not checkpoint_path(out, 1).exists():  # a finished checkpoint beyond step 0
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no checkpoint of step 1 within 240 s"
            time.sleep(0.05)
        process.send_signal(signum)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    name = signal.Signals(signum).name
    assert process.returncode == 128 + signum
    assert err.splitlines()[-1] == f"normsat train: interrupted by {name}"
    document = read_run(out, unfinished=True)
    stopped = document["stopped"]
    # at_step is the step begun last: the checkpoint's own when the signal came as it was written
    assert stopped["signal"] == name and stopped["at_step"] >= stopped["last_checkpoint"] >= 1
    kept = [s for s in evaluation_steps(100000, 60) if s <= stopped["last_checkpoint"]]
    assert [e["step"] for e in document["evaluations"]] == kept
    assert [r["step"] for r in document["records"]] == list(range(1, stopped["last_checkpoint"] + 1))
    # The finished checkpoints, each complete (it reloads to the norm measured at its step), and
    # nothing else: no checkpoint past train.json's last, no temporary or hidden file anywhere.
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        checkpoint_path(out, s).name for s in kept]
    for evaluation in document["evaluations"]:
        tensors = safetensors.torch.load_file(checkpoint_path(out, evaluation["step"]))
        norm = math.sqrt(sum(float(t.double().square().sum()) for t in tensors.values()))
        assert norm == pytest.approx(evaluation["norm"], rel=1e-12)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoints", RESUME_FILE, "train.json"]
    assert _hidden(tmp_path) == []
    assert f"continue with: normsat train --out {out} --resume" in err


def test_the_cli_resumes_with_the_run_s_own_options(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    options = ["train", "--layers", "1", "--width", "16", "--heads", "2", "--blocks-per-step", "64",
               "--context", "16", "--steps", "4", "--evaluations", "2", "--no-saturation", "--quiet",
               "--out", str(out)]
    assert evaluation_steps(4, 2) == [0, 1, 4]
    _signal_at(monkeypatch, 3, signal.SIGTERM)
    assert main(options) == 143
    monkeypatch.undo()
    assert read_run(out, unfinished=True)["stopped"]["last_checkpoint"] == 1
    capsys.readouterr()
    assert main(["train", "--out", str(out), "--resume", "--steps", "5"]) == 2
    err = capsys.readouterr().err
    assert "--resume continues the run" in err and "steps 5 (the run's: 4)" in err
    assert main(["train", "--out", str(out), "--resume", "--overwrite"]) == 2
    assert "either --resume or --overwrite" in capsys.readouterr().err
    assert main(["train", "--out", str(out), "--resume", "--quiet", "--steps", "4"]) == 0
    document = read_run(out)
    assert document["stopped"] is None and [r["step"] for r in document["records"]] == [1, 2, 3, 4]
    assert not (out / RESUME_FILE).exists() and (out / "norms.png").is_file()
    assert main(["train", "--out", str(out), "--resume"]) == 2
    assert "got a finished one" in capsys.readouterr().err


def test_a_new_run_folder_has_the_user_s_umask(small_corpus, tmp_path):
    previous = os.umask(0o027)
    try:
        train(TrainConfig(**TINY, steps=3, evaluations=1), tmp_path / "run", corpus=small_corpus)
    finally:
        os.umask(previous)
    run = tmp_path / "run"
    assert (run.stat().st_mode & 0o777, (run / "checkpoints").stat().st_mode & 0o777) == (0o750, 0o750)
    for path in [run / "train.json", run / RESUME_FILE, *(run / "checkpoints").iterdir()]:
        assert path.stat().st_mode & 0o777 == 0o640, path


def test_signals_as_interrupts_restores_the_handlers_and_keeps_an_ignored_signal_ignored():
    before = signal.getsignal(signal.SIGTERM)
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with signals_as_interrupts():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            with pytest.raises(Interrupted) as caught:
                os.kill(os.getpid(), signal.SIGTERM)
        assert caught.value.signum == signal.SIGTERM and signal.getsignal(signal.SIGTERM) is before
    finally:
        signal.signal(signal.SIGINT, ignored)
    assert exit_code(KeyboardInterrupt()) == 130


def test_deferred_holds_a_signal_back_until_the_block_has_finished():
    finished = []
    with signals_as_interrupts(), pytest.raises(Interrupted) as caught, deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        finished.append("the block ran to its end")
    assert finished == ["the block ran to its end"] and caught.value.signum == signal.SIGTERM


def test_the_report_folder_keeps_its_old_files_when_a_report_is_interrupted(tmp_path):
    from empirical.cli.report import write_report
    from empirical.cli.sections.context import Section

    (tmp_path / "report.md").write_text("old report")
    (tmp_path / "similarity.png").write_bytes(b"old figure")

    def figure_then_interrupt(ctx):
        ctx.figure("similarity.png").write_bytes(b"new figure")
        raise Interrupted(signal.SIGTERM)

    with pytest.raises(Interrupted):
        write_report(tmp_path, sections=[figure_then_interrupt], sentences=2, progress=False)
    assert (tmp_path / "report.md").read_text() == "old report"
    assert (tmp_path / "similarity.png").read_bytes() == b"old figure"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md", "similarity.png"]

    def figure(ctx):
        ctx.figure("similarity.png").write_bytes(b"new figure")
        return Section("figure", "Figure", "![similarity](similarity.png)", {})

    write_report(tmp_path, sections=[figure], sentences=2, progress=False)
    assert (tmp_path / "similarity.png").read_bytes() == b"new figure"
    assert "![similarity](similarity.png)" in (tmp_path / "report.md").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md", "results.json", "similarity.png"]
    assert json.loads((tmp_path / "results.json").read_text())["sections"] == {"figure": {}}


# --- the resume file on its own: what save_state writes, load_state reads back ----------------


def _resume_state(previous: bool = True):
    """A state as a run's checkpoint hands it over: optimizer entries with tensors and plain
    numbers (an index with only tensors, one with only numbers), a schedule, a generator state."""
    generator = torch.Generator().manual_seed(11)
    optimizer = {
        "state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.tensor([0.5, -1.5]), "scale": 0.25},
                  2: {"exp_avg_sq": torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)},
                  5: {"step": 7, "clipped": True}},
        "param_groups": [{"lr": 0.01, "betas": [0.9, 0.999], "params": [0, 2, 5]}]}
    return ResumeState(step=4, document={"records": [{"step": 1, "norm": 2.5}], "stopped": None},
                       optimizer=optimizer, schedule={"last_epoch": 4, "base_lrs": [0.01]},
                       generator=generator.get_state(),
                       previous=torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64) if previous else None)


@pytest.mark.parametrize("previous", [True, False])
def test_a_resume_file_reads_back_every_part_of_the_state(previous, tmp_path):
    state = _resume_state(previous)
    path = resume_path(tmp_path / "run")
    assert path == tmp_path / "run" / "resume.safetensors"
    assert save_state(path, state) == path
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["resume.safetensors"]
    loaded = load_state(path)  # the default device: the CPU
    assert (loaded.step, loaded.document, loaded.schedule) == (4, state.document, state.schedule)
    assert loaded.optimizer["param_groups"] == state.optimizer["param_groups"]
    assert list(loaded.optimizer["state"]) == [0, 2, 5]  # integer indices, in order
    for index, values in state.optimizer["state"].items():
        back = loaded.optimizer["state"][index]
        assert sorted(back) == sorted(values), index
        for name, value in values.items():
            if isinstance(value, torch.Tensor):
                assert back[name].device.type == "cpu"
                assert back[name].dtype == value.dtype and torch.equal(back[name], value), (index, name)
            else:
                assert back[name] == value and type(back[name]) is type(value), (index, name)
    assert torch.equal(loaded.generator, state.generator)
    if previous:
        assert loaded.previous is not None and torch.equal(loaded.previous, state.previous)
    else:
        assert loaded.previous is None
    # The file itself: tensors by name, the rest as JSON under one metadata key.
    tensors = safetensors.torch.load_file(path)
    assert sorted(tensors) == sorted(["generator", "optimizer.0.step", "optimizer.0.exp_avg",
                                      "optimizer.2.exp_avg_sq"] + (["tracker.previous"] if previous else []))
    with safetensors.safe_open(str(path), framework="pt") as handle:
        meta = json.loads(handle.metadata()["normsat.resume"])
    assert meta["optimizer"]["scalars"] == {"0": {"scale": 0.25}, "5": {"step": 7, "clipped": True}}
    assert meta["optimizer"]["indices"] == [0, 2, 5] and meta["step"] == 4


def test_a_resumed_optimizer_takes_the_same_next_step(tmp_path):
    """AdamW's moments and step count written and read back: the optimizer built anew and loaded
    from the file makes the step the original makes, to the last bit."""
    def model_and_optimizer():
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2)
        return model, torch.optim.AdamW(model.parameters(), lr=0.1)

    def step(model, optimizer, x):
        optimizer.zero_grad()
        model(x).square().sum().backward()
        optimizer.step()

    x = torch.tensor([[1.0, -2.0, 0.5]])
    model, optimizer = model_and_optimizer()
    for _ in range(2):
        step(model, optimizer, x)
    path = tmp_path / "resume.safetensors"
    save_state(path, ResumeState(step=2, document={}, optimizer=optimizer.state_dict(), schedule={},
                                 generator=torch.Generator().get_state(), previous=None))
    saved = load_state(path)
    again, resumed = model_and_optimizer()
    again.load_state_dict(model.state_dict())
    resumed.load_state_dict(saved.optimizer)
    step(model, optimizer, x)
    step(again, resumed, x)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), again.parameters()))


def test_optimizer_tensors_go_to_the_device_asked_for(tmp_path):
    """The meta device stands in for an accelerator: the optimizer's tensors move there, the
    generator state and the previous parameters stay on the CPU (where they are used)."""
    path = tmp_path / "resume.safetensors"
    save_state(path, _resume_state())
    loaded = load_state(path, device="meta")
    for index, name in ((0, "step"), (0, "exp_avg"), (2, "exp_avg_sq")):
        assert loaded.optimizer["state"][index][name].device.type == "meta", (index, name)
    assert loaded.optimizer["state"][5] == {"step": 7, "clipped": True}
    assert loaded.generator.device.type == "cpu" and loaded.previous.device.type == "cpu"


def test_a_resume_state_that_is_not_strict_json_is_refused_and_nothing_written(tmp_path):
    state = dataclasses.replace(_resume_state(), document={"records": [{"loss": math.nan}]})
    with pytest.raises(ValueError, match="not JSON compliant"):
        save_state(tmp_path / "resume.safetensors", state)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_resume_file_is_refused_saying_what_was_expected(tmp_path):
    path = tmp_path / "resume.safetensors"
    with pytest.raises(EmpiricalError) as caught:
        load_state(path)
    assert str(caught.value) == (
        f"expected the resume file {path} of an unfinished run, but it does not exist (a finished "
        "run has none; a run stopped before its first checkpoint has nothing to resume)")


def test_a_file_that_is_not_a_resume_file_is_refused_saying_why(tmp_path):
    """A safetensors file without the resume metadata (a checkpoint, say), and bytes that are no
    safetensors file at all."""
    checkpoint = tmp_path / "checkpoint.safetensors"
    safetensors.torch.save_file({"w": torch.ones(2)}, str(checkpoint), metadata={"format": "pt"})
    with pytest.raises(EmpiricalError) as caught:
        load_state(checkpoint)
    assert str(caught.value) == (f"expected a normsat resume file at {checkpoint}, got one that cannot "
                                 "be read: no normsat.resume metadata")
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"not a safetensors file")
    with pytest.raises(EmpiricalError) as caught:
        load_state(garbage)
    assert str(caught.value).startswith(f"expected a normsat resume file at {garbage}, got one that "
                                        "cannot be read: ")
