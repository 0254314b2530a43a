"""A run folder's state is input too: every destructive step comes after every check, a folder
holds one run at a time, and a resumed run continues only from the checkpoint its state recorded
(SHA-256, norm, step), refusing anything else by name with nothing written."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch
from hypothesis import given, settings
from hypothesis import strategies as st

import empirical.training.runs as runs
from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.locking import LOCK_NAME, FolderInUse, folder_lock
from empirical.training.callbacks import NormCallback
from empirical.training.resume import load_state, resume_path, save_state
from empirical.training.run_document import check_run_document
from empirical.training.runs import TrainConfig, build_model, checkpoint_path, file_sha256, read_run

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = ["--layers", "1", "--width", "16", "--heads", "2", "--blocks-per-step", "64", "--context",
           "16", "--steps", "4", "--evaluations", "2", "--no-saturation", "--quiet"]


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder`` with its bytes and modification time."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CLI run of 4 steps (checkpoints 0, 1, 4) stopped at step 3: its last checkpoint is step 1."""
    out = tmp_path_factory.mktemp("stopped") / "run"
    real = runs._train_step

    def step(config, model, data, optimizer, tracker, batches, at, device):
        if at == 3:
            raise KeyboardInterrupt
        return real(config, model, data, optimizer, tracker, batches, at, device)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runs, "_train_step", step)
        assert main(["train", *OPTIONS, "--out", str(out)]) == 130
    assert read_run(out, unfinished=True)["stopped"]["last_checkpoint"] == 1
    return out


@pytest.fixture
def run_copy(stopped_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(stopped_run, copy)
    return copy


def _resume_refused(run: Path, capsys: pytest.CaptureFixture[str]) -> str:
    before = _snapshot(run)
    assert main(["train", "--out", str(run), "--resume", "--quiet"]) == 2
    assert _snapshot(run) == before  # nothing written, nothing removed
    assert sorted(p.name for p in run.iterdir() if p.name.startswith(".")) == []
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_the_run_records_each_checkpoint_s_sha256(stopped_run):
    document = read_run(stopped_run, unfinished=True)
    assert document["checkpoint_sha256"] == {
        str(step): file_sha256(checkpoint_path(stopped_run, step)) for step in (0, 1)}
    assert load_state(resume_path(stopped_run)).document["checkpoint_sha256"] == \
        document["checkpoint_sha256"]


def test_a_checkpoint_swapped_for_another_run_s_is_refused_naming_it(run_copy, capsys):
    config = TrainConfig(**read_run(run_copy, unfinished=True)["config"])
    pieces = len(read_run(run_copy, unfinished=True)["vocabulary"])
    other = build_model(dataclasses.replace(config, seed=1), pieces, 0)  # same shapes, other values
    safetensors.torch.save_model(other, str(checkpoint_path(run_copy, 1)))
    err = _resume_refused(run_copy, capsys)
    assert f"cannot resume from the checkpoint {checkpoint_path(run_copy, 1)}: its SHA-256 is" in err
    assert "was replaced, truncated or changed" in err


@given(cut=st.floats(0.0, 0.999))
def test_a_truncated_checkpoint_is_refused(stopped_run, tmp_path_factory, cut):
    run = tmp_path_factory.mktemp("cut") / "run"
    shutil.copytree(stopped_run, run)
    path = checkpoint_path(run, 1)
    data = path.read_bytes()
    path.write_bytes(data[: int(cut * len(data))])
    before = _snapshot(run)
    with pytest.raises(EmpiricalError, match=r"its SHA-256 is .* truncated"):
        runs.train(TrainConfig(**read_run(run, unfinished=True)["config"]), run, resume=True)
    assert _snapshot(run) == before


def _without_checksums(run: Path) -> None:
    """The run's state as a run written before checksums were recorded has it."""
    state = load_state(resume_path(run))
    del state.document["checkpoint_sha256"]
    save_state(resume_path(run), state)
    document = json.loads((run / "train.json").read_text())
    del document["checkpoint_sha256"]
    (run / "train.json").write_text(json.dumps(document))


def test_without_a_recorded_checksum_another_architecture_or_another_norm_is_refused(run_copy, capsys):
    _without_checksums(run_copy)
    document = read_run(run_copy, unfinished=True)
    config = TrainConfig(**document["config"])
    pieces = len(document["vocabulary"])
    original = checkpoint_path(run_copy, 1).read_bytes()
    safetensors.torch.save_model(build_model(dataclasses.replace(config, arch="post"), pieces, 0),
                                 str(checkpoint_path(run_copy, 1)))
    err = _resume_refused(run_copy, capsys)
    assert f"cannot resume from the checkpoint {checkpoint_path(run_copy, 1)}: it is not a checkpoint" in err
    safetensors.torch.save_model(build_model(dataclasses.replace(config, seed=3), pieces, 0),
                                 str(checkpoint_path(run_copy, 1)))
    err = _resume_refused(run_copy, capsys)
    assert "its parameter norm is" in err and "the run recorded" in err and "at step 1" in err
    checkpoint_path(run_copy, 1).write_bytes(original)
    assert main(["train", "--out", str(run_copy), "--resume", "--quiet"]) == 0  # the real one resumes


def test_an_edited_step_is_refused_with_a_clear_message(run_copy, capsys):
    document = json.loads((run_copy / "train.json").read_text())
    document["stopped"]["last_checkpoint"] = 0
    (run_copy / "train.json").write_text(json.dumps(document))
    err = _resume_refused(run_copy, capsys)
    assert "train.json says its last checkpoint is of step 0" in err and "NormTracker" not in err
    document["stopped"]["last_checkpoint"] = 1
    (run_copy / "train.json").write_text(json.dumps(document))
    state = load_state(resume_path(run_copy))
    save_state(resume_path(run_copy), dataclasses.replace(state, step=0))
    err = _resume_refused(run_copy, capsys)
    assert "it is of step 0, but the run it holds stopped after step 1" in err
    assert "the file was edited or is damaged" in err


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda d: d.update(extra=1), "got the unknown key 'extra'"),
    (lambda d: d["config"].pop("schedule"), "expected config in {path} to have the entries"),
    (lambda d: d["config"].update(layers=-1), "layers must be a positive integer, got -1"),
    (lambda d: d["checkpoints"].reverse(), "expected the steps of checkpoints in {path} to increase"),
    (lambda d: d.update(vocabulary="abc"), "expected vocabulary in {path} to be a list of distinct"),
    (lambda d: d.update(stopped=[]), "expected stopped in {path} to be null or an object"),
])
def test_a_train_json_out_of_form_is_refused_naming_file_and_field(run_copy, capsys, edit, expected):
    path = run_copy / "train.json"
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document))
    err = _resume_refused(run_copy, capsys)
    assert expected.format(path=path) in err


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5),
                                                                                 inner, max_size=3),
                    max_leaves=6)


@given(key=st.sampled_from(["schema", "config", "stopped", "records", "checkpoints", "evaluations",
                            "vocabulary", "checkpoint_sha256", "model", "new"]),
       value=JSON, drop=st.booleans())
def test_any_edit_of_a_run_document_is_accepted_or_refused_by_name(stopped_run, key, value, drop):
    document = json.loads((stopped_run / "train.json").read_text())
    if drop:
        document.pop(key, None)
    else:
        document[key] = value
    try:
        check_run_document(document, "train.json")
    except EmpiricalError as err:
        assert "train.json" in str(err)


@given(cut=st.integers(0, 4000))
def test_a_truncated_train_json_is_refused_by_name(stopped_run, tmp_path_factory, cut):
    run = tmp_path_factory.mktemp("json")
    text = (stopped_run / "train.json").read_bytes()
    (run / "train.json").write_bytes(text[:cut])
    with pytest.raises(EmpiricalError, match=r"the run file .*train\.json"):
        read_run(run, unfinished=True)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("finished") / "run"
    assert main(["train", *OPTIONS, "--steps", "3", "--evaluations", "1", "--out", str(run)]) == 0
    return run


def test_overwrite_deletes_nothing_when_the_context_is_too_long_for_the_corpus(finished_run, capsys):
    before = _snapshot(finished_run)
    assert main(["train", *OPTIONS, "--context", "100000", "--overwrite", "--out", str(finished_run)]) == 2
    assert "use a smaller context" in capsys.readouterr().err
    assert _snapshot(finished_run) == before


BAD_INPUTS = st.sampled_from([["--context", "100000"], ["--context", "20000"], ["--device", "cuda:3"],
                              ["--layers", "0"], ["--heads", "3"], ["--lr", "nan"], ["--arch", "lstm"],
                              ["--optimizer", "lion"], ["--steps", "2"], ["--resume"]])


@settings(max_examples=10)  # an example that reaches the corpus tokenizes it: seconds each
@given(bad=st.lists(BAD_INPUTS, min_size=1, max_size=2))
def test_overwrite_deletes_nothing_until_every_input_is_checked(finished_run, bad):
    before = _snapshot(finished_run)
    argv = ["train", *OPTIONS, *[item for option in bad for item in option], "--overwrite",
            "--out", str(finished_run)]
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            code = main(argv)
        except SystemExit as exited:  # argparse's own refusals
            code = int(exited.code or 0)
    assert code == 2, err.getvalue()
    assert "Traceback" not in err.getvalue(), err.getvalue()
    assert _snapshot(finished_run) == before


def _holder(folder: Path) -> subprocess.Popen[str]:
    """Another process holding ``folder``'s lock until its input closes."""
    code = ("import sys; from empirical.locking import folder_lock\n"
            "with folder_lock(sys.argv[1]):\n    print('held', flush=True); sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def test_a_second_run_on_a_locked_folder_is_refused_naming_the_first_process(tmp_path, capsys):
    run = tmp_path / "run"
    holder = _holder(run)
    try:
        assert main(["train", *OPTIONS, "--out", str(run)]) == 2
        err = capsys.readouterr().err
        assert f"--out {run} is in use by another run (process {holder.pid}: -c " in err
        with pytest.raises(FolderInUse, match=f"process {holder.pid}"):
            runs.train(TrainConfig(layers=1, width=16, heads=2, steps=3), run)
        assert sorted(p.name for p in run.iterdir()) == [LOCK_NAME]  # nothing of ours written
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    assert not run.exists()  # the holder created it and left it empty: gone with the lock


@given(depth=st.integers(1, 4), fail=st.booleans())
def test_a_lock_is_shared_when_nested_and_leaves_nothing_behind(tmp_path_factory, depth, fail):
    parent = tmp_path_factory.mktemp("locks")
    folder = parent / "a" / "b"

    def nest(level: int) -> None:
        with folder_lock(folder) as held:
            assert (held / LOCK_NAME).read_text().startswith(f"{os.getpid()} ")
            if level < depth:
                nest(level + 1)
            elif fail:
                raise RuntimeError("the run failed")

    if fail:
        with pytest.raises(RuntimeError):
            nest(1)
    else:
        nest(1)
    assert not folder.exists() and (parent / "a").is_dir()  # only what the lock created goes


def test_a_stale_lock_file_of_a_killed_run_does_not_block_the_next(tmp_path):
    (tmp_path / LOCK_NAME).write_text("999999 normsat train\n")  # no process holds it
    with folder_lock(tmp_path):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_dangling_symlink_as_out_is_refused_saying_so(tmp_path, capsys):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    assert main(["train", *OPTIONS, "--out", str(link)]) == 2
    err = capsys.readouterr().err
    assert f"{link} is a symbolic link to {tmp_path / 'nowhere'}, which does not exist" in err


def test_a_refused_out_names_the_path_the_user_gave(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "run"
    assert main(["train", *OPTIONS, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"cannot write --out {out}: {tmp_path / 'file'} is a file, not a folder" in err
    assert "report" not in err


def test_norm_callback_refuses_a_folder_as_json_path_at_construction(tmp_path):
    with pytest.raises(EmpiricalError, match=f"expected a file name for json_path, got the existing "
                                             f"folder {tmp_path}"):
        NormCallback(json_path=tmp_path)
    assert NormCallback(json_path=tmp_path / "norms.json").json_path == tmp_path / "norms.json"
