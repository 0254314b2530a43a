"""Data-parallel measurements: two gloo ranks started by torchrun give the single-process result."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from empirical import distributed
from empirical.errors import EmpiricalError

WORKER = Path(__file__).with_name("distributed_worker.py")


def _worker_module():
    spec = importlib.util.spec_from_file_location("distributed_worker", WORKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> Path:
    """Run the worker on two CPU ranks (gloo) with torchrun; the folder of what they wrote.

    gloo aborts a rank now and then (SIGABRT, "terminate called without an active exception":
    2 of about 65 launches on this project's CI machine, never on demand), so the launch may
    restart the ranks once, as torchrun does for transient faults. A failure of the worker's own
    code repeats on the restart and still fails the test.
    """
    out = tmp_path_factory.mktemp("ranks")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "--max-restarts", "1", str(WORKER), str(out)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return out


def _values(result: dict) -> list[float]:
    return ([layer["similarity"] for layer in result["similarity"]["layers"]]
            + [layer["similarity"] for layer in result["limit"]["layers"]]
            + [v for row in result["convergence"]["to_limit"] for v in row])


def test_two_ranks_equal_one_process_and_record_their_shares(two_ranks):
    worker = _worker_module()
    single = worker.measure(*worker.tiny_model())
    sharded = json.loads((two_ranks / "result.json").read_text(encoding="utf-8"))
    assert _values(sharded) == pytest.approx(_values(single), abs=1e-9, rel=0)
    assert sharded["similarity"]["n_tokens"] == single["similarity"]["n_tokens"]
    assert sharded["convergence"]["n_tokens"] == single["convergence"]["n_tokens"]
    for key in ("similarity", "limit"):
        ranks = sharded[key]["distributed"]
        assert ranks["world_size"] == 2 and ranks["backend"] == "gloo"
        shares = ranks["tokens_per_rank"]
        assert len(shares) == 2 and all(n > 0 for n in shares)
        assert sum(shares) == sum(sharded[key]["n_tokens"].values())
        assert single[key]["distributed"] == {"world_size": 1, "backend": None,
                                              "tokens_per_rank": [sum(shares)]}
    assert sum(sharded["convergence"]["distributed"]["tokens_per_rank"]) == single["convergence"]["n_tokens"]
    heads, alone = sharded["heads"], single["heads"]
    assert heads["distributed"]["world_size"] == 2 and alone["distributed"]["world_size"] == 1
    assert sum(heads["distributed"]["tokens_per_rank"]) == alone["distributed"]["tokens_per_rank"][0]
    for split, whole in zip(heads["heads"], alone["heads"]):
        assert split["queries"] == whole["queries"] > 0 and split["class"] == whole["class"]
        numbers = ("positions", "positions_std", "split", "fraction", "mass", "entropy", "margin",
                   "agreement", "paper_positions", "paper_split")
        assert [split[k] for k in numbers] == pytest.approx([whole[k] for k in numbers], abs=1e-9, rel=0)
        assert split["scale"] == pytest.approx(whole["scale"], rel=1e-9)


def test_ranks_that_disagree_on_the_corpus_fail_on_every_rank(two_ranks):
    for rank in (0, 1):
        message = (two_ranks / f"rank{rank}.err").read_text(encoding="utf-8")
        assert message.startswith("the ranks disagree on the corpus (SHA-256 rank 0: "), message


def test_one_process_is_its_own_world():
    assert distributed.current() == distributed.World(0, 1, None)
    assert distributed.is_writer()
    assert distributed.shard([1, 2, 3]) == [1, 2, 3]
    with pytest.raises(EmpiricalError, match="at least one batch per rank"):
        distributed.shard([])
    sums = distributed.reduce_sums({"": __import__("torch").tensor([1.0, 2.0])})
    assert sums[""].tolist() == [1.0, 2.0] and distributed.reduce_counts({"a": 3}) == {"a": 3}


@pytest.mark.gpu
def test_measurements_and_claims_run_on_cuda_and_agree_with_the_cpu():
    import torch

    from empirical import claims

    worker = _worker_module()
    model, tokenizer = worker.tiny_model()
    on_cpu = worker.measure(model, tokenizer)
    on_gpu = worker.measure(model.to("cuda"), tokenizer)
    assert _values(on_gpu) == pytest.approx(_values(on_cpu), abs=1e-5)
    assert on_gpu["similarity"]["device"].startswith("cuda")
    ids = tokenizer("The norm grows.")["input_ids"]
    claims.assert_saturated(model, ids, scale=1e6, eps=1e-6)
    claims.assert_homogeneous(model, ids)
    assert next(model.parameters()).device.type == "cuda" and torch.cuda.is_available()


@pytest.mark.parametrize("writer", [True, False])
def test_only_the_writer_rank_prints_the_results(writer, tiny_bert_dir, tmp_path, capsys, monkeypatch):
    from empirical.cli import main
    from empirical.cli.sections.context import Section

    # Under torchrun every rank runs the command to the end; only rank 0 may print.
    monkeypatch.setattr(distributed, "is_writer", lambda: writer)
    monkeypatch.setattr("empirical.cli.report.SECTIONS", [lambda ctx: Section("s", "S", "text")])
    tiny = ["--model", str(tiny_bert_dir), "--sentences", "2", "--num-layers", "1", "--quiet"]
    assert main(["similarity", *tiny, "--json", str(tmp_path / "run.json")]) == 0
    assert main(["report", *tiny, "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    if writer:
        assert "pretrained" in out and "JSON:" in out and "report:" in out
    else:
        assert out == ""
