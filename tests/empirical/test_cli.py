"""The normsat command line: help, similarity runs with JSON and plots, errors as exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from empirical.cli import build_parser, main


def test_every_subcommand_explains_its_options(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "similarity" in capsys.readouterr().out
    subcommands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name, parser in subcommands.items():
        text = parser.format_help()
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"normsat {name} {action.option_strings[0]} has no help"
        assert name in text


def test_similarity_writes_table_json_and_plot(tmp_path, capsys):
    code = main(["similarity", "--model", "minilm", "--num-layers", "2", "--sentences", "4",
                 "--compare-random", "--scale", "100", "--quiet",
                 "--json", str(tmp_path / "sim.json"), "--plot", str(tmp_path / "sim.png")])
    out = capsys.readouterr().out
    assert code == 0 and "layer 2" in out and "random-init" in out
    data = json.loads((tmp_path / "sim.json").read_text())
    assert data["schema"] == "normsat.similarity-runs/1"
    assert [run["label"] for run in data["runs"]] == ["pretrained", "random-init"]
    for run in data["runs"]:
        assert run["model"]["name"] == "minilm" and run["scale"] == 100.0
        assert len(run["layers"]) == 3 and run["corpus"]["n_sentences"] == 4
    assert [r["model"]["random_init"] for r in data["runs"]] == [False, True]
    assert (tmp_path / "sim.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["similarity", "--model", "nope"], "unknown model 'nope'"),
        (["similarity", "--model", "t5"], "no pretrained weights for 't5'"),
        (["similarity", "--num-layers", "1", "--scale", "0.1"], "to be a number ≥ 1 or inf, got 0.1"),
        (["similarity", "--num-layers", "1", "--corpus", "/does/not/exist.txt"], "does not exist"),
    ],
)
def test_bad_input_is_exit_code_two_with_a_message(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_console_script_is_installed():
    done = subprocess.run([sys.executable, "-m", "empirical.cli", "similarity", "--help"],
                          capture_output=True, text=True, check=True)
    assert "--compare-random" in done.stdout
