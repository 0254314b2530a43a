"""Output files: the early check tests exactly the names that will be written, two outputs never
share a file, and a figure gets the format its extension names."""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.outputs import (
    atomic_path,
    check_distinct,
    check_output,
    check_output_dir,
    save_figure,
    temporary_name,
    write_json,
    write_text,
)
from empirical.training.norms import plot_records


def _name_max(folder: Path) -> int:
    return os.pathconf(folder, "PC_NAME_MAX")


def test_a_long_legal_name_is_written_and_one_byte_more_is_refused_before_any_work(tmp_path):
    limit = _name_max(tmp_path)
    longest = tmp_path / ("r" * (limit - len(".json")) + ".json")
    assert len(longest.name) == limit and len(temporary_name(longest)) < 30
    assert check_output(longest, suffixes=[".json"]) == longest
    assert write_json({"ok": True}, longest).read_text() == '{\n  "ok": true\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == [longest.name]  # no temporary file left
    too_long = tmp_path / ("r" * (limit + 1 - len(".json")) + ".json")
    with pytest.raises(EmpiricalError, match=f"is {limit + 1} bytes long, and names in .* may have "
                                             f"at most {limit}"):
        check_output(too_long, suffixes=[".json"])
    with pytest.raises(EmpiricalError, match="may have at most"):  # a folder still to be made
        check_output(tmp_path / ("d" * (limit + 1)) / "run.json")


@settings(max_examples=40, deadline=None)
@given(length=st.integers(1, 300), wide=st.booleans(), nested=st.booleans(),
       suffix=st.sampled_from([".json", ".png", ".safetensors"]))
def test_the_early_check_passes_exactly_the_names_that_can_be_written(length, wide, nested, suffix):
    # "é" is two bytes in UTF-8: the limit counts bytes, not characters.
    stem = ("é" if wide else "a") * length
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / ("sub" if nested else ".") / f"{stem}{suffix}"
        refused, written = _refused_and_written(path)
        assert refused != written, (len(os.fsencode(path.name)), refused, written)


def test_a_nul_byte_in_a_path_is_refused_as_such():
    with pytest.raises(EmpiricalError, match="a path cannot hold a NUL byte"):
        check_output("run\x00.json", suffixes=[".json"])
    check_distinct({"--json": "run\x00.json", "--plot": "run.png"})  # left to check_output


@given(st.sampled_from(["run.json", "./run.json", "sub/../run.json", "sub/./../run.json"]),
       st.sampled_from(["run.json", "./run.json", "sub/../run.json"]))
def test_two_outputs_on_one_file_are_refused_whatever_the_spelling(first, second):
    with pytest.raises(EmpiricalError, match="expected different files for --json and --certificate"):
        check_distinct({"--json": first, "--certificate": second})
    check_distinct({"--json": first, "--certificate": "other.json", "--plot": None})


def test_the_cli_refuses_two_outputs_on_one_path_before_any_work(tmp_path, capsys):
    same = str(tmp_path / "out.json")
    assert main(["degree", "--model", "/no/such/model", "--json", same, "--certificate", same]) == 2
    assert capsys.readouterr().err.strip() == (
        f"normsat degree: error: expected different files for --json and --certificate, got {same} "
        "for both")
    plot = str(tmp_path / "a.png")
    assert main(["projection", "--plot", plot, "--saturation-plot", str(tmp_path / "." / "a.png")]) == 2
    assert "expected different files for --plot and --saturation-plot" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


# Each format's file signature.
MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF-", ".svg": b"<?xml"}


def _refused_and_written(path: Path) -> tuple[bool, bool]:
    """Whether the early check refuses ``path``, and whether a file can really be written there."""
    try:
        check_output(path)
    except EmpiricalError:
        refused = True
    else:
        refused = False
    try:
        write_json([], path)
    except OSError:
        written = False
    else:
        written = True
    return refused, written


@pytest.mark.parametrize("suffix", sorted(MAGIC))
def test_the_norm_figure_gets_the_format_its_extension_names(tmp_path, suffix):
    layers = {"embeddings": 1.0, "blocks.0": 2.0}
    records = [{"step": s, "norm": 1.0 + s, "layers": layers, "layer_cosine_prev": None}
               for s in (0, 1, 2)]
    written = plot_records(records, tmp_path / f"norms{suffix}").read_bytes()
    assert written.startswith(MAGIC[suffix])


@pytest.mark.parametrize(("path", "expected"), [
    ("results/run.json", ".normsat-XXXXXXXX.json"), ("plot", ".normsat-XXXXXXXX"),
    ("a.tar.gz", ".normsat-XXXXXXXX.gz"),
])
def test_the_temporary_name_is_as_long_as_the_one_written(tmp_path, path, expected):
    assert temporary_name(path) == expected
    with atomic_path(tmp_path / path) as temporary:  # mkstemp's own name: prefix, 8 characters, suffix
        assert temporary.name.startswith(".normsat-") and temporary.suffix == Path(path).suffix
        assert len(temporary.name) == len(expected)


def test_a_name_too_long_is_refused_naming_its_start_its_length_and_the_limit(tmp_path):
    limit = _name_max(tmp_path)
    path = tmp_path / ("r" * 300 + ".json")
    with pytest.raises(EmpiricalError) as caught:
        check_output(path, what="--json")
    assert str(caught.value) == (f"cannot write --json {path}: the name {'r' * 40}… is 305 bytes long, "
                                 f"and names in {tmp_path} may have at most {limit}")


def test_a_nul_byte_is_refused_showing_the_path_it_is_in():
    with pytest.raises(EmpiricalError) as caught:
        check_output("runs/a\x00.json", what="--json")
    assert str(caught.value) == "cannot write --json 'runs/a\\x00.json': a path cannot hold a NUL byte"


def test_a_file_where_a_folder_should_be_is_named(tmp_path):
    (tmp_path / "runs").write_text("")
    with pytest.raises(EmpiricalError) as caught:
        check_output(tmp_path / "runs" / "new" / "run.json")
    assert str(caught.value) == (f"cannot write output {tmp_path / 'runs' / 'new' / 'run.json'}: "
                                 f"{tmp_path / 'runs'} is a file, not a folder")


@pytest.fixture
def unwritable(tmp_path):
    """A folder no file can be created in: read-only for a user; for root, /sys (a special file
    system that refuses new files whatever the permission bits say)."""
    if os.geteuid() != 0:
        folder = tmp_path / "locked"
        folder.mkdir(mode=0o555)
        yield folder
        folder.chmod(0o755)
        return
    folder = Path("/sys")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pytest.skip("/sys takes new files here")
    except OSError:
        yield folder


def test_a_folder_that_takes_no_files_is_refused_before_any_work(unwritable):
    with pytest.raises(EmpiricalError) as caught:
        check_output(unwritable / "run.json", what="--json")
    assert re.fullmatch(f"cannot write --json {re.escape(str(unwritable / 'run.json'))}: the folder "
                        f"{re.escape(str(unwritable))} is not writable \\([A-Za-z -]+\\)", str(caught.value))
    with pytest.raises(EmpiricalError) as caught:
        check_output_dir(unwritable / "report-folder", what="--output-dir")
    folder = unwritable / "report-folder"  # named as given, not by a file it will hold
    assert str(caught.value).startswith(f"cannot write --output-dir {folder}: the folder {unwritable} "
                                        "is not writable (")


def test_a_folder_given_for_a_file_and_a_wrong_extension_are_refused_saying_what_was_expected(tmp_path):
    with pytest.raises(EmpiricalError) as caught:
        check_output(tmp_path, what="--json")
    assert str(caught.value) == f"expected a file name for --json, got the existing folder {tmp_path}"
    with pytest.raises(EmpiricalError) as caught:
        check_output(tmp_path / "run.txt", suffixes=[".PNG", ".json", ".png"], what="--plot")
    wrong = str(tmp_path / "run.txt")
    assert str(caught.value) == f"expected --plot to end in one of .json, .png, got {wrong!r}"
    with pytest.raises(EmpiricalError) as caught:  # the label when none is given
        check_output(tmp_path / "run.txt", suffixes=[".json"])
    assert str(caught.value) == f"expected output to end in one of .json, got {wrong!r}"
    assert check_output(tmp_path / "RUN.JSON", suffixes=[".json"]) == tmp_path / "RUN.JSON"


def test_an_existing_file_is_accepted_when_writable_and_refused_when_read_only(tmp_path, monkeypatch):
    existing = tmp_path / "run.json"
    existing.write_text("{}")
    assert check_output(existing, suffixes=[".json"]) == existing
    existing.chmod(0o444)
    if os.geteuid() == 0:  # root may write anything: answer as access(2) answers an unprivileged user
        monkeypatch.setattr(os, "access", lambda path, mode: not (mode & os.W_OK and
                                                                  not os.stat(path).st_mode & 0o200))
    with pytest.raises(EmpiricalError) as caught:
        check_output(existing, what="--json")
    assert str(caught.value) == f"cannot write --json {existing}: the file exists and is read-only"


def test_two_spellings_of_one_file_are_both_named_even_after_an_output_not_asked_for():
    with pytest.raises(EmpiricalError) as caught:
        check_distinct({"--plot": None, "--json": "a.json", "--certificate": "./a.json"})
    assert str(caught.value) == ("expected different files for --json and --certificate, got a.json "
                                 "and ./a.json, the same file")


def test_an_output_folder_may_exist_or_be_new_but_not_be_a_file(tmp_path):
    assert check_output_dir(tmp_path) == tmp_path
    assert check_output_dir(tmp_path / "new" / "report") == tmp_path / "new" / "report"
    assert list(tmp_path.iterdir()) == []  # nothing created
    (tmp_path / "taken").write_text("")
    with pytest.raises(EmpiricalError) as caught:
        check_output_dir(tmp_path / "taken")
    assert str(caught.value) == (f"expected a folder for output folder, but {tmp_path / 'taken'} is an "
                                 "existing file")


def test_text_and_json_are_written_as_utf8_whatever_the_locale(tmp_path, ascii_locale):
    assert write_text("modèle ≥ 1\n", tmp_path / "a.md") == tmp_path / "a.md"
    assert (tmp_path / "a.md").read_bytes() == "modèle ≥ 1\n".encode()
    write_json({"model": "modèle", "path": Path("runs/a")}, tmp_path / "a.json")
    assert json.loads((tmp_path / "a.json").read_bytes().decode("utf-8")) == {"model": "modèle",
                                                                              "path": "runs/a"}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_json_refuses_a_non_finite_number_and_leaves_the_old_file(tmp_path, value):
    (tmp_path / "a.json").write_text("old")
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        write_json({"gap": value}, tmp_path / "a.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]
    assert (tmp_path / "a.json").read_text() == "old"


def test_a_figure_without_an_extension_is_png_whatever_the_default_format(tmp_path):
    import matplotlib
    from matplotlib.figure import Figure

    figure = Figure(figsize=(1, 1))
    figure.add_subplot().plot([0, 1])
    with matplotlib.rc_context({"savefig.format": "pdf"}):
        written = save_figure(figure, tmp_path / "plot", dpi=30).read_bytes()
    assert written.startswith(b"\x89PNG\r\n\x1a\n")
    # The options reach savefig: 1 inch at 30 dots per inch, the width in the PNG header (IHDR).
    assert int.from_bytes(written[16:20], "big") == 30


def _path_of_length(folder: Path, length: int, name: str) -> Path:
    """A path under ``folder``, in folders of at most 200 bytes still to be made, ending in ``name``,
    whose absolute form is ``length`` bytes long."""
    rest = length - len(os.fsencode(str(folder.absolute()))) - len("/") - len(name)
    parts = []
    while rest > 0:
        part = min(200, rest - 1) if rest - 1 != 1 else 1
        parts.append("d" * part)
        rest -= part + 1
    path = folder.joinpath(*parts, name)
    assert len(os.fsencode(str(path.absolute()))) == length
    return path


@pytest.mark.parametrize("name", ["r.json", "r" * 30 + ".json"])  # shorter, longer than the temporary
@pytest.mark.parametrize("below", [0, 1, 16, 17])
def test_the_early_check_passes_exactly_the_paths_that_can_be_written(tmp_path, name, below):
    # The file is written as a temporary sibling first: the longer of the two paths must fit.
    length = os.pathconf(tmp_path, "PC_PATH_MAX") - below
    path = _path_of_length(tmp_path, length, name)
    refused, written = _refused_and_written(path)
    assert refused != written, (length, name, refused, written)


@pytest.mark.parametrize(("name", "which"), [
    ("r" * 30 + ".json", "the path is"),
    ("r.json", "the path of its temporary file (.normsat-XXXXXXXX.json) is"),
])
def test_a_path_too_long_is_refused_naming_its_start_and_the_longest_length(tmp_path, name, which):
    limit = os.pathconf(tmp_path, "PC_PATH_MAX")
    path = _path_of_length(tmp_path, limit, name)
    longest = limit + max(0, len(".normsat-XXXXXXXX.json") - len(name))
    with pytest.raises(EmpiricalError) as caught:
        check_output(path, what="--json")
    assert str(caught.value) == (f"cannot write --json {str(path)[:60]}…: {which} {longest} bytes long, "
                                 f"and paths in {tmp_path} must be shorter than {limit}")


@pytest.mark.parametrize("suffix", [".txt", ".Xpng"])
def test_a_figure_extension_naming_no_format_is_refused_and_nothing_is_left(tmp_path, suffix):
    # The format is the whole extension after its dot: nothing more is stripped to find a known one.
    from matplotlib.figure import Figure

    figure = Figure(figsize=(1, 1))
    with pytest.raises(ValueError, match=f"Format '{suffix[1:].lower()}' is not supported"):
        save_figure(figure, tmp_path / f"plot{suffix}")
    assert list(tmp_path.iterdir()) == []
