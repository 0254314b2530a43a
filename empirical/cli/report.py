"""``normsat report``: the main job, a Markdown report with figures and one JSON file.

A report is a list of sections; a section is one function that takes the shared
:class:`ReportContext` and returns a :class:`Section`. Adding an analysis to the report means adding
one function to :data:`SECTIONS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from empirical.cli.sections.context import ReportContext, Section
from empirical.cli.sections.degree import degree_section
from empirical.cli.sections.heads import heads_section
from empirical.cli.sections.limit import limit_section
from empirical.cli.sections.similarity import similarity_section
from empirical.cli.sections.training import training_section
from empirical.models.factories import is_factory
from empirical.models.provenance import versions
from empirical.outputs import staged_files, write_json, write_text

__all__ = ["NEEDS_RANDOM_TWIN", "SECTIONS", "ReportContext", "Section", "sections_for", "write_report"]

SCHEMA = "normsat.report/1"


LAYERS = (
    "Every table and figure numbers layers as the similarity section does: `embeddings` is the "
    "hidden state before the first block, layer 1 the first transformer block and layer L the last. "
    "Module paths (the degree section) keep the model's own indices from 0 (`encoder.layer.0` is "
    "layer 1), and so do the `layer` and `head` fields of the head atlas in `results.json`; its "
    "figure numbers heads from 1, as it does layers."
)
"""The report's one statement of its layer numbering."""

SectionFunction = Callable[[ReportContext], Section]
SECTIONS: list[SectionFunction] = [similarity_section, degree_section, limit_section, heads_section,
                                   training_section]
"""The report's sections, in order."""

NEEDS_RANDOM_TWIN = (similarity_section, limit_section, heads_section)
"""The sections that compare the model with its random-init twin (skipped for a factory)."""


def _skipped(section: SectionFunction, reason: str) -> SectionFunction:
    """In place of ``section``: a section that says why it was not measured."""
    key = section.__name__.removesuffix("_section")

    def skip(ctx: ReportContext) -> Section:
        return Section(key, f"{key.capitalize()}: skipped", f"Skipped: {reason}.",
                       {"skipped": reason})

    return skip


def sections_for(name: str) -> list[SectionFunction]:
    """The report's sections for the model ``name``: a factory has no random-init twin, so the
    sections that compare with one are replaced by a statement of why they are missing."""
    if not is_factory(name):
        return list(SECTIONS)
    reason = (f"the model comes from the factory {name}, which has no random-init twin to compare "
              "its weights with; name a model or a folder to measure this section")
    return [_skipped(section, reason) if section in NEEDS_RANDOM_TWIN else section
            for section in SECTIONS]


def write_report(
    out: str | Path, *, sections: Sequence[SectionFunction] | None = None, **context: Any
) -> Path:
    """Run every section and write ``out/report.md``, its figures and ``out/results.json``.

    Everything is written into a staging folder inside ``out`` and moved into ``out`` at the end
    (:func:`empirical.outputs.staged_files`): a report that fails or is interrupted leaves ``out``
    as it was, never new figures beside an old ``report.md``.

    Args:
        out: the report folder (created if needed).
        sections: the section functions (default: :data:`SECTIONS`).
        **context: fields of :class:`ReportContext` (model, sentences, seed, progress).

    Returns:
        The path of ``report.md``.
    """
    folder = Path(out)
    with staged_files(folder) as staging:  # an interrupted report leaves the folder as it was
        _write(staging, sections, context)
    return folder / "report.md"


def _write(staging: Path, sections: Sequence[SectionFunction] | None, context: dict[str, Any]) -> None:
    """Every section's figures, ``report.md`` and ``results.json``, into ``staging``."""
    ctx = ReportContext(out=staging, **context)
    built = [section(ctx) for section in (SECTIONS if sections is None else sections)]
    lines = [
        "# normsat report",
        "",
        f"Model `{ctx.model}` ({_models_compared(ctx.model, ctx.seed)}); corpus "
        f"`{ctx.corpus.source}`, {len(ctx.corpus)} sentences (sha256 `{ctx.corpus.sha256[:16]}…`).",
        "",
        LAYERS,
        "",
    ]
    for section in built:
        lines += [f"## {section.title}", "", section.markdown.strip(), ""]
    write_text("\n".join(lines), staging / "report.md")
    results = {
        "schema": SCHEMA,
        "model": ctx.model,
        "seed": ctx.seed,
        "corpus": ctx.corpus.to_dict(),
        "versions": versions(),
        "sections": {section.key: section.data for section in built},
    }
    write_json(results, staging / "results.json")


def _models_compared(model: str, seed: int) -> str:
    """What the header says was measured: a factory's model has no random-init twin."""
    if is_factory(model):
        return "from a factory, no random-init twin"
    return f"pretrained and random-init, seed {seed}"
