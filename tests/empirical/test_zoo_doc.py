"""docs/zoo.md: its table is the one docs/figures/zoo.py renders from zoo.json, and the degrees
recorded there are what :func:`homogeneity.analyze` gives today (checked for a few families: each
export takes seconds)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def zoo(load_script: Callable[[Path, str], ModuleType]) -> ModuleType:
    return load_script(ROOT / "docs" / "figures" / "zoo.py", "zoo_figure")


@pytest.fixture(scope="module")
def data() -> dict:
    return json.loads((ROOT / "docs" / "figures" / "zoo.json").read_text())


def test_the_doc_shows_the_table_of_the_record(zoo: ModuleType, data: dict) -> None:
    text = (ROOT / "docs" / "zoo.md").read_text()
    shown = text.split(zoo.BEGIN, 1)[1].split(zoo.END, 1)[0].strip()
    assert shown == zoo.table(data)
    assert list(data["families"]) == list(zoo.ROWS)


@pytest.mark.parametrize("family", ["bert", "llama", "qwen2-moe"])
def test_recorded_degrees_are_what_analyze_gives(zoo: ModuleType, data: dict, family: str) -> None:
    now = zoo.degree_entry(family)
    recorded = data["families"][family]["degree"]
    for key in ("output", "degree", "grade", "hidden_states", "weakenings", "unsupported"):
        assert recorded[key] == now[key], key


def test_a_measurement_past_its_budget_keeps_the_value_measured_before(zoo: ModuleType) -> None:
    """A loaded machine must not turn a measured row into a missing one: the old value stays unless
    --replace-missing, and a value measured on another model is not kept."""
    out = {"error": "did not finish within 90 s"}
    old = {"model": {"layers": 2}, "limit_cost": {"ratio": 3.0}, "atlas": {"counts": 1}}
    new = {"model": {"layers": 2}, "limit_cost": out, "atlas": {"counts": 2}}
    merged, notes = zoo.merge_measurements("mixtral", old, new)
    assert merged == {"model": {"layers": 2}, "limit_cost": {"ratio": 3.0}, "atlas": {"counts": 2}}
    assert notes == ["mixtral: limit_cost did not finish within 90 s; kept the value measured before "
                     "(--replace-missing records it as unfinished)"]
    replaced, notes = zoo.merge_measurements("mixtral", old, new, replace_missing=True)
    assert replaced == new
    assert notes == ["mixtral: limit_cost did not finish within 90 s; recorded as unfinished"]
    other = zoo.merge_measurements("mixtral", {**old, "model": {"layers": 6}}, new)[0]
    assert other["limit_cost"] == out
    first = zoo.merge_measurements("mixtral", None, new)
    assert first[0] == new and "no value measured before" in first[1][0]
    # An error the measurement gave is an answer, not a missing value: it replaces the old one.
    refused = {**new, "limit_cost": {"error": "no limit rule for op aten.topk"}}
    assert zoo.merge_measurements("mixtral", old, refused) == (refused, [])


def test_zoo_says_on_stderr_when_a_budget_ran_out(zoo: ModuleType, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """main() with a measurement that runs out: the record keeps the old value and stderr says so."""
    measured = {"model": {"m": 1}, "atlas": {"counts": 1}}
    record = {"families": {"gpt2": {"degree": {}, "measurements": measured}}}
    (tmp_path / "zoo.json").write_text(json.dumps(record))
    doc = tmp_path / "zoo.md"
    doc.write_text(f"{zoo.BEGIN}\n{zoo.END}\n")
    monkeypatch.setattr(zoo, "HERE", tmp_path)
    monkeypatch.setattr(zoo, "DOC", doc)
    monkeypatch.setattr(zoo, "degree_entry", lambda name: {})
    monkeypatch.setattr(zoo, "measurement_entry", lambda name, texts, budget: {
        "model": {"m": 1}, "atlas": {"error": f"did not finish within {budget:.0f} s"}})
    monkeypatch.setattr(zoo, "table", lambda data: "table")
    monkeypatch.setattr(zoo, "write_table", lambda markdown, doc=doc: None)
    monkeypatch.setattr("sys.argv", ["zoo.py", "--families", "gpt2", "--budget", "5"])
    zoo.main()
    saved = json.loads((tmp_path / "zoo.json").read_text())["families"]["gpt2"]["measurements"]
    assert saved["atlas"] == {"counts": 1}
    said = "zoo.py: gpt2: atlas did not finish within 5 s; kept the value measured before"
    assert said in capsys.readouterr().err


def test_a_run_keeps_the_rows_another_run_wrote_meanwhile(zoo: ModuleType, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs at once: while this one measures gpt2, another writes bert into zoo.json. The
    record read again under the lock keeps both (it used to write back what it read at start)."""
    (tmp_path / "zoo.json").write_text(json.dumps({"families": {}}))
    doc = tmp_path / "zoo.md"
    doc.write_text(f"{zoo.BEGIN}\n{zoo.END}\n")
    other = {"degree": {"by": "the other run"}, "measurements": {"model": {"m": 2}}}

    def measure_while_another_run_writes(name: str, texts: list[str], budget: float) -> dict:
        (tmp_path / "zoo.json").write_text(json.dumps({"families": {"bert": other}}))
        return {"model": {"m": 1}}
    monkeypatch.setattr(zoo, "HERE", tmp_path)
    monkeypatch.setattr(zoo, "DOC", doc)
    monkeypatch.setattr(zoo, "degree_entry", lambda name: {})
    monkeypatch.setattr(zoo, "measurement_entry", measure_while_another_run_writes)
    monkeypatch.setattr(zoo, "table", lambda data: ", ".join(data["families"]))
    monkeypatch.setattr("sys.argv", ["zoo.py", "--families", "gpt2"])
    zoo.main()
    saved = json.loads((tmp_path / "zoo.json").read_text())["families"]
    assert saved == {"bert": other, "gpt2": {"degree": {}, "measurements": {"model": {"m": 1}}}}
    assert doc.read_text() == f"{zoo.BEGIN}\nbert, gpt2\n{zoo.END}\n"


def test_a_depth_run_keeps_the_rows_another_run_wrote_meanwhile(
        load_script: Callable[[Path, str], ModuleType], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """depth.py reads its record again under the lock before it writes: a row another run wrote
    while this one measured stays, and this run's replaces the one of its family and depth."""
    depth = load_script(ROOT / "docs" / "figures" / "depth.py", "depth_figure")
    record, doc = tmp_path / "depth.json", tmp_path / "zoo.md"
    record.write_text(json.dumps([{"family": "llama", "layers": 16, "by": "before"}]))
    doc.write_text(f"{depth.BEGIN}\n{depth.END}\n")

    def measure_while_another_run_writes(name: str, layers: int, sentences: int) -> dict:
        record.write_text(json.dumps([{"family": "llama", "layers": 16, "by": "before"},
                                      {"family": "gemma", "layers": 16, "by": "the other run"}]))
        return {"family": name, "layers": layers, "by": "this run"}
    monkeypatch.setattr(depth, "RECORD", record)
    monkeypatch.setattr(depth, "DOC", doc)
    monkeypatch.setattr(depth, "measure", measure_while_another_run_writes)
    monkeypatch.setattr(depth, "table", lambda rows: ", ".join(f"{r['family']} {r['by']}" for r in rows))
    monkeypatch.setattr("sys.argv", ["depth.py", "--families", "llama"])
    depth.main()
    assert doc.read_text() == f"{depth.BEGIN}\nllama this run, gemma the other run\n{depth.END}\n"
    assert [row["by"] for row in json.loads(record.read_text())] == ["this run", "the other run"]


def test_the_depth_table_is_the_one_its_record_renders(
        load_script: Callable[[Path, str], ModuleType]) -> None:
    depth = load_script(ROOT / "docs" / "figures" / "depth.py", "depth_figure")
    rows = json.loads((ROOT / "docs" / "figures" / "depth.json").read_text())
    text = (ROOT / "docs" / "zoo.md").read_text()
    assert text.split(depth.BEGIN, 1)[1].split(depth.END, 1)[0].strip() == depth.table(rows)
    for row in rows:  # the refinement never determines less than float64 alone
        assert all(after >= before for before, after in zip(row["float64"], row["refined"]))
    measured = [(row["family"], row["layers"]) for row in rows]
    assert len(set(measured)) == len(measured)  # one row per family and depth
    for family in depth.FAMILIES:  # as the text says: at 8 and 16 layers and at the family's own depth
        own = depth.family_config(family).num_hidden_layers
        assert {(family, 8), (family, 16), (family, own)} <= set(measured)
    assert depth._percent([1.0, 1.0, 1.0, 0.5]) == "1–2: 100%, 3: 50%"
