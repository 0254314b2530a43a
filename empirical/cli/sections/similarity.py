"""Report section: representation similarity of the pretrained model and its random-init twin."""

from __future__ import annotations

from empirical.cli.sections.context import ReportContext, Section
from empirical.measure.plotting import plot_similarity
from empirical.measure.similarity import representation_similarity

__all__ = ["similarity_section"]

SCALE = 1000.0


def similarity_section(ctx: ReportContext) -> Section:
    """cos(h(x; θ), h(x; 1000·θ)) per layer, pretrained vs random-init (the paper's Figure 4)."""
    results = {
        label: representation_similarity(*pair, ctx.corpus, scale=SCALE, progress=ctx.progress)
        for label, pair in (("pretrained", ctx.pretrained), ("random-init", ctx.random_init))
    }
    figure = plot_similarity(results, ctx.figure("similarity.png"),
                             title=f"{ctx.model}: representation similarity, c = {SCALE:g}")
    pretrained, random = results["pretrained"], results["random-init"]
    rows = [
        f"| {name} | {p:.4f} | {r:.4f} |"
        for name, p, r in zip(pretrained.layers, pretrained.per_layer, random.per_layer)
    ]
    markdown = "\n".join([
        f"Mean cosine, over {sum(pretrained.n_tokens.values())} real tokens, between each hidden "
        f"state at θ and at {SCALE:g}·θ (every parameter scaled). Values near 1 mean the layer "
        "already computes what its saturated version computes.",
        "",
        "| layer | pretrained | random-init |",
        "|---|---|---|",
        *rows,
        "",
        f"![similarity]({figure.name})",
    ])
    data = {label: result.to_dict() for label, result in results.items()}
    return Section("similarity", f"Representation similarity at c = {SCALE:g}", markdown, data)
