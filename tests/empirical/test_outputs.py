"""Output files: the early check tests exactly the names that will be written, two outputs never
share a file, and a figure gets the format its extension names."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical.cli import main
from empirical.errors import EmpiricalError
from empirical.outputs import check_distinct, check_output, temporary_name, write_json
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


@pytest.mark.parametrize("suffix", sorted(MAGIC))
def test_the_norm_figure_gets_the_format_its_extension_names(tmp_path, suffix):
    layers = {"embeddings": 1.0, "blocks.0": 2.0}
    records = [{"step": s, "norm": 1.0 + s, "layers": layers, "layer_cosine_prev": None}
               for s in (0, 1, 2)]
    written = plot_records(records, tmp_path / f"norms{suffix}").read_bytes()
    assert written.startswith(MAGIC[suffix])
