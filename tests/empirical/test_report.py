"""normsat report: Markdown, figures and results.json from the section functions."""

from __future__ import annotations

import json

from empirical.cli.report import SECTIONS, write_report
from empirical.cli.sections.context import Section
from empirical.cli.sections.similarity import similarity_section


def test_report_with_the_similarity_section(tmp_path):
    path = write_report(tmp_path, sections=[similarity_section], sentences=3, progress=False)
    text = path.read_text()
    assert "| layer | pretrained | random-init |" in text and "![similarity](similarity.png)" in text
    assert (tmp_path / "similarity.png").stat().st_size > 1000
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["schema"] == "normsat.report/1" and results["corpus"]["n_sentences"] == 3
    section = results["sections"]["similarity"]
    assert set(section) == {"pretrained", "random-init"}
    assert len(section["pretrained"]["layers"]) == 7


def test_a_section_is_one_function(tmp_path):
    def greeting(ctx):
        return Section("greeting", "Hello", f"{len(ctx.corpus)} sentences", {"n": len(ctx.corpus)})

    write_report(tmp_path, sections=[greeting], sentences=2, progress=False)
    assert "## Hello\n\n2 sentences" in (tmp_path / "report.md").read_text()
    assert json.loads((tmp_path / "results.json").read_text())["sections"] == {"greeting": {"n": 2}}
    assert similarity_section in SECTIONS
