"""normsat report: Markdown, figures and results.json from the section functions."""

from __future__ import annotations

import json

from empirical.cli.report import SECTIONS, write_report
from empirical.cli.sections.context import Section
from empirical.cli.sections.similarity import similarity_section
from empirical.cli.sections.training import loss_sentence, saturation_sentence


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


def _evaluations(losses, similarities=None):
    """Hand-made evaluations of a normsat.train run: steps 0, 100, …; the last layer's similarity
    to the limit at c = ∞ when given."""
    evaluations = []
    for index, loss in enumerate(losses):
        evaluation = {"step": 100 * index, "loss": loss}
        if similarities is not None:
            evaluation["saturation"] = {"1000": {"embeddings": 1.0, "layer 1": 0.5, "layer 2": 0.5},
                                        "inf": {"embeddings": 1.0, "layer 1": 0.5,
                                                "layer 2": similarities[index]}}
        evaluations.append(evaluation)
    return evaluations


def test_the_training_section_describes_the_shape_of_saturation_not_its_endpoints():
    peaked = saturation_sentence(_evaluations([3.0] * 5, [0.011, 0.84, 0.835, 0.2, -0.153]))
    assert peaked == ("Saturation while training: the similarity of layer 2 to the exact limit "
                      "(c = ∞) rose from 0.011 at step 0 to a peak of 0.840 at steps 100–200 (held "
                      "within 0.05), then fell to -0.153 at step 400.")
    fell = saturation_sentence(_evaluations([3.0, 2.0, 1.0], [0.812, 0.7, 0.431]))
    assert fell is not None and fell.endswith("fell from 0.812 at step 0 to 0.431 at step 200.")
    level = saturation_sentence(_evaluations([3.0, 2.0], [0.5, 0.5]))
    assert level is not None and level.endswith("stayed at 0.500 (within 0.01) from step 0 to step 100.")
    assert saturation_sentence(_evaluations([3.0, 2.0])) is None  # a run without saturation


def test_the_training_section_says_whether_the_run_overfits():
    overfits = loss_sentence(_evaluations([9.0, 4.47, 5.0, 7.14]))
    assert overfits == ("Held-out loss was lowest at step 100 (4.470) and rose to 7.140 by step 300: "
                        "the run overfits.")
    steady = loss_sentence(_evaluations([9.0, 6.0, 5.5]))
    assert steady == "Held-out loss was lowest at the last evaluation, step 200 (5.500): the run does " \
                     "not overfit."
