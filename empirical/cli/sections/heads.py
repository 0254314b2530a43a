"""Report section: the head atlas of the pretrained and the random-init model."""

from __future__ import annotations

from empirical.cli.sections.context import ReportContext, Section
from empirical.measure.heads import CLASSES, HeadAtlas, head_atlas, plot_atlas

__all__ = ["heads_section"]

SENTENCES = 20
"""At most this many sentences of the corpus: the atlas needs the exact limit of every batch."""


def _summary(label: str, atlas: HeadAtlas) -> list[str]:
    """One Markdown row per layer: its heads' classes, and the layer's mean statistics."""
    rows = []
    for layer in sorted({h.layer for h in atlas.heads}):
        heads = [h for h in atlas.heads if h.layer == layer]
        classes = "".join(h.kind[0].upper() for h in heads)
        mean = sum(h.positions for h in heads) / len(heads)
        split = sum(h.split for h in heads) / len(heads)
        paper = [h.paper_split for h in heads if h.paper_split is not None]
        paper_text = f"{sum(paper) / len(paper):.3f}" if paper else "-"
        # indices from 0, labelled as the similarity section's layers (layer 1: the first block)
        rows.append(f"| {label} | layer {layer + 1} | `{classes}` | {mean:.2f} | {split:.3f} "
                    f"| {paper_text} |")
    return rows


def heads_section(ctx: ReportContext) -> Section:
    """Classes and statistics per head, in the exact limit, beside the paper's approximation."""
    sentences = list(ctx.corpus)[:SENTENCES]
    atlases = {label: head_atlas(*pair, sentences, progress=ctx.progress)
               for label, pair in (("pretrained", ctx.pretrained), ("random-init", ctx.random_init))}
    figure = plot_atlas(atlases, ctx.figure("heads.png"), title=f"{ctx.model}: head atlas")
    thresholds = next(iter(atlases.values())).thresholds
    counts = "; ".join(f"{label}: " + ", ".join(f"{atlas.counts()[k]} {k}" for k in CLASSES)
                       for label, atlas in atlases.items())
    markdown = "\n".join([
        f"On the first {len(sentences)} sentences: for every head, the positions each query attends "
        "to in the exact saturated network (hard attention; a leading-order tie that a lower "
        "order of the model breaks is broken, rows no order decides are left out and counted as "
        "undetermined). A head is "
        f"global when its queries attend on average to at least {thresholds.global_fraction:g} of "
        f"their allowed positions, local when to at most {thresholds.local_positions:g} positions, "
        f"mixed otherwise ({counts}). Classes per layer, one letter per head (L, M, G); the "
        "split probability is the fraction of queries attending to more than one position, "
        "exactly and as the paper approximated it (weights above 1e-5 at 1000·θ).",
        "",
        "| model | layer | heads | mean # positions | split probability | paper's split |",
        "|---|---|---|---|---|---|",
        *[row for label, atlas in atlases.items() for row in _summary(label, atlas)],
        "",
        f"![head atlas]({figure.name})",
    ])
    data = {label: atlas.to_dict() for label, atlas in atlases.items()}
    return Section("heads", "Head atlas: local and global heads", markdown, data)
