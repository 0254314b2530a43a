"""Fuzzing the CLI: any options and any corpus bytes end in exit code 0 or 2, never a traceback."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from empirical.cli import main


@pytest.fixture(scope="module")
def workspace(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT folder as ``model``, a folder and a file, shared by every example."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "model").symlink_to(tiny_bert_dir, target_is_directory=True)
    (root / "folder").mkdir()
    (root / "afile").write_text("x")
    return root


def assert_clean_exit(argv: list[str]) -> None:
    """Run the CLI in-process: exit code 0 or 2 (argparse's usage errors included), no traceback."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exited:
            code = int(exited.code or 0)
    assert code in (0, 2), (argv, err.getvalue())
    assert "Traceback" not in err.getvalue(), (argv, err.getvalue())


# Mostly valid values, so that most examples get past argument parsing into the measurement.
NUMBERS = st.integers(1, 6).map(str) | st.sampled_from(["0", "-1", "40", "x", "1.5"])
SCALES = st.sampled_from(["1", "10", "1000", "1e300", "inf"]) | st.sampled_from(
    ["-inf", "nan", "0.5", "abc"])
OUTPUTS = st.sampled_from(["out.json", "new/dir/out.json"]) | st.sampled_from(
    ["folder", "afile/out.json", "out.txt"])
PLOTS = st.sampled_from(["out.png", "out.svg"]) | st.sampled_from(["out.xyz", "folder", "afile/p.png"])
CORPORA = (st.lists(st.text(max_size=40), max_size=5).map(lambda lines: "\n".join(lines).encode())
           | st.binary(max_size=80) | st.text(max_size=80).map(lambda t: t.encode("utf-16")))


@st.composite
def similarity_argv(draw: st.DrawFn, root: Path) -> list[str]:
    argv = ["similarity", "--model", str(root / "model"), "--quiet"]
    for flag, values in (("--sentences", NUMBERS), ("--max-length", NUMBERS),
                         ("--batch-size", NUMBERS), ("--num-layers", NUMBERS),
                         ("--scale", SCALES), ("--dtype", st.sampled_from(["float32", "float64", "int8"])),
                         ("--device", st.sampled_from(["cpu", "cuda", "meta", "cpu:0"]))):
        if draw(st.integers(0, 2)) == 0:  # each option given in a third of the examples
            argv += [flag, draw(values)]
    if draw(st.booleans()):
        argv += ["--random-init", "--seed", draw(st.sampled_from(["0", "7", "-3"]))]
    if draw(st.booleans()):
        argv += ["--json", str(root / draw(OUTPUTS))]
    if draw(st.booleans()):
        argv += ["--plot", str(root / draw(PLOTS))]
    return argv


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), corpus=CORPORA)
def test_similarity_options_and_corpus_bytes(workspace: Path, data: st.DataObject, corpus: bytes) -> None:
    (workspace / "corpus.txt").write_bytes(corpus)
    argv = [*data.draw(similarity_argv(workspace)), "--corpus", str(workspace / "corpus.txt")]
    assert_clean_exit(argv)


@st.composite
def degree_argv(draw: st.DrawFn, root: Path) -> list[str]:
    argv = ["degree", str(root / "model")] if draw(st.booleans()) else ["degree", "--model",
                                                                         str(root / "model")]
    for _ in range(draw(st.integers(0, 2))):
        argv += ["--params", draw(st.sampled_from(["encoder.*", "*.weight", "embeddings.*", "nothing.*",
                                                    "[", "*"]))]
    if draw(st.booleans()):
        argv += ["--depth", draw(NUMBERS)]
    if draw(st.booleans()):
        argv += ["--num-layers", draw(NUMBERS)]
    if draw(st.booleans()):
        argv += ["--random-init"]
    if draw(st.booleans()):
        argv += ["--json", str(root / draw(OUTPUTS))]
    return argv


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_degree_options(workspace: Path, data: st.DataObject) -> None:
    argv = data.draw(degree_argv(workspace))
    assert_clean_exit(argv)
