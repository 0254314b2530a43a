"""The shared option groups: every command takes them from empirical.cli.options, one flag has one
meaning everywhere, and flags a command would ignore are refused."""

from __future__ import annotations

import argparse

import pytest

from empirical.cli import build_parser, main

GROUPS = {  # command → the shared groups its --help shows
    "similarity": {"model", "corpus", "batching", "device", "outputs", "runtime"},
    "heads": {"model", "corpus", "batching", "device", "outputs", "runtime"},
    "degree": {"model", "device", "outputs", "runtime"},
    "check": {"model", "device", "runtime"},
    "report": {"model", "corpus", "device", "runtime"},
    "norms": {"outputs", "runtime"},
    "projection": {"device", "outputs", "runtime"},
    "train": {"device", "outputs", "runtime"},
    "grid": {"device", "outputs", "runtime"},
    "lemmas": {"outputs", "runtime"},
}


REQUIRED = {"check": ["cert.json"], "grid": ["--lr", "1e-3"], "norms": ["a.pt"]}
"""The least each command needs to parse."""


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_takes_the_shared_groups() -> None:
    parsers = _subparsers()
    assert set(parsers) == set(GROUPS)
    for name, parser in parsers.items():
        titles = {group.title for group in parser._action_groups}
        assert GROUPS[name] <= titles, name


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_debug_after_the_command_name(name: str) -> None:
    parser = _subparsers()[name]
    required = REQUIRED.get(name, [])
    assert parser.parse_args([*required, "--debug"]).debug is True
    assert "debug" not in parser.parse_args(required)  # `normsat --debug COMMAND` keeps its value


def test_one_meaning_per_flag() -> None:
    """--batch-size counts sentences wherever it exists; --steps is a count wherever it exists."""
    parsers = _subparsers()
    for name, parser in parsers.items():
        helps = {option: action.help for action in parser._actions for option in action.option_strings}
        if "--batch-size" in helps:
            assert "sentences per batch" in str(helps["--batch-size"]), name
        if "--steps" in helps:
            assert parser.parse_args([*REQUIRED.get(name, []), "--steps", "5"]).steps == 5, name


def test_commands_have_json_and_quiet() -> None:
    """--json, --quiet and --progress on every command but report (whose --out folder holds its
    report.json) and check (which re-checks a certificate, writing none)."""
    for name, parser in _subparsers().items():
        options = {option for action in parser._actions for option in action.option_strings}
        if name not in ("check", "report"):
            assert {"--json", "--quiet", "--progress"} <= options, name


def test_training_choices_are_shown_and_described_in_one_order() -> None:
    """--arch, --optimizer and --schedule show their choices, and the help describes each choice
    after its own name, in the order the usage lists them."""
    from empirical.training.choices import ARCHITECTURE_HELP, OPTIMIZER_HELP, SCHEDULE_HELP

    for command in ("train", "grid"):
        actions = {a.option_strings[0]: a for a in _subparsers()[command]._actions if a.option_strings}
        for flag, described in (("--arch", ARCHITECTURE_HELP), ("--optimizer", OPTIMIZER_HELP),
                                ("--schedule", SCHEDULE_HELP)):
            action = actions[flag]
            assert action.metavar == "{" + ",".join(described) + "}", flag
            text = str(action.help)
            places = [text.index(f"{name}: {what}") for name, what in described.items()]
            assert places == sorted(places), flag
    assert "pre: GPT-2 (pre-LN)" in str(actions["--arch"].help)


def test_batch_size_defaults_that_differ_say_why() -> None:
    helps = {name: next(a.help for a in parser._actions if "--batch-size" in a.option_strings)
             for name, parser in _subparsers().items()
             if any("--batch-size" in a.option_strings for a in parser._actions)}
    assert helps["similarity"] == "sentences per batch (default: 32)"
    assert str(helps["heads"]).startswith("sentences per batch (default: 16: half of similarity's: ")


def test_norms_takes_the_checkpoints_steps_as_at_steps(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["norms", "a.pt", "b.pt", "--at-steps", "0", "100"])
    assert args.at_steps == [0, 100]
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["norms", "a.pt", "b.pt", "--steps", "0", "100"])
    assert exited.value.code == 2 and "unrecognized arguments: --steps" in capsys.readouterr().err


def test_train_counts_blocks_per_step(capsys: pytest.CaptureFixture[str]) -> None:
    from empirical.cli.commands.train import config_from_args

    for command in ("train", "grid"):
        required = REQUIRED.get(command, [])
        assert build_parser().parse_args([command, *required, "--blocks-per-step", "8"]).blocks_per_step == 8
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, *required, "--batch-size", "8"])
        assert "unrecognized arguments: --batch-size" in capsys.readouterr().err
    assert config_from_args(build_parser().parse_args(["train", "--blocks-per-step", "8"])).batch_size == 8


@pytest.mark.parametrize("flag", [["--model", "bert"], ["--num-layers", "1"], ["--tokenizer", "tok"],
                                  ["--seed", "3"], ["--seed", "0"], ["--cache-dir", "cache"]])
def test_heads_run_refuses_the_model_options_it_would_ignore(
        flag: list[str], tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["heads", "--run", str(tmp_path), *flag, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == (f"normsat heads: error: expected --run without {flag[0]}: a normsat train folder "
                   "names its own model, tokenizer, depth and seed\n")


def test_heads_without_run_seeds_from_zero() -> None:
    args = build_parser().parse_args(["heads"])
    assert args.seed is None  # unset; the measurement uses 0
