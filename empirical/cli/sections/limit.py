"""Report section: similarity to the exact limit (c = ∞) beside c = 1000, and the convergence curve."""

from __future__ import annotations

import math
from pathlib import Path

from empirical.cli.sections.context import ReportContext, Section
from empirical.measure.convergence import Convergence, limit_convergence
from empirical.measure.similarity import representation_similarity
from empirical.outputs import save_figure

__all__ = ["limit_section", "plot_convergence"]

SCALES = (1.0, 10.0, 100.0, 1000.0, 10000.0)
SENTENCES = 20
"""At most this many sentences of the corpus: an exact limit costs tens of forward passes."""


def plot_convergence(results: dict[str, Convergence], path: Path, *, title: str = "") -> Path:
    """cos(h(x; cθ), s-h(x; θ)) against c, one line per layer, one panel per model variant."""
    # A bare Figure renders with Agg and leaves pyplot's global backend and state alone.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.2 * len(results), 4.0), dpi=120)
    axes = fig.subplots(1, len(results), squeeze=False)
    for ax, (label, result) in zip(axes[0], results.items()):
        for index, name in enumerate(result.layers):
            ax.plot(result.scales, [result.to_limit[c][index] for c in result.scales], marker="o",
                    label=name)
        ax.set_xscale("log")
        ax.set_xlabel("c")
        ax.set_ylabel("cos(h(x; c·θ), s-h(x; θ))")
        ax.set_ylim(-0.1, 1.05)
        ax.grid(alpha=0.3)
        ax.set_title(label)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def _rate(result: Convergence, layer: int) -> str:
    rate = result.rate(layer)
    return "exact" if math.isnan(rate) else f"{rate:.2f}"


def limit_section(ctx: ReportContext) -> Section:
    """Per-layer similarity at c = 1000 and at the exact limit, and how fast c·θ approaches it."""
    pairs = {"pretrained": ctx.pretrained, "random-init": ctx.random_init}
    sentences = list(ctx.corpus)[:SENTENCES]
    at_1000 = {label: representation_similarity(*pair, sentences, scale=1000.0,
                                                progress=ctx.progress)
               for label, pair in pairs.items()}
    converge = {label: limit_convergence(*pair, sentences, scales=SCALES, progress=ctx.progress)
                for label, pair in pairs.items()}
    figure = plot_convergence(converge, ctx.figure("limit_convergence.png"),
                              title=f"{ctx.model}: convergence to the exact limit")
    pretrained, random = converge["pretrained"], converge["random-init"]
    rows = [
        f"| {name} | {at_1000['pretrained'].per_layer[i]:.4f} | {pretrained.to_limit[1.0][i]:.4f} "
        f"| {at_1000['random-init'].per_layer[i]:.4f} | {random.to_limit[1.0][i]:.4f} "
        f"| {_rate(pretrained, i)} | {_rate(random, i)} |"
        for i, name in enumerate(pretrained.layers)
    ]
    markdown = "\n".join([
        f"On the first {len(sentences)} sentences ({pretrained.n_tokens} tokens): mean token "
        "cosine between each hidden state at θ and at 1000·θ, beside the same measure "
        "against the exact saturated network (c = ∞, computed by `saturated` on the traced graph, "
        "masks as −∞, hard-attention ties that matter decided by lower orders, and float32 "
        "near-ties by float64). The rate r fits 1 − cos(h(cθ), s-h) ≈ C·c⁻ʳ "
        f"over c = {', '.join(f'{c:g}' for c in SCALES[1:])}.",
        "",
        "| layer | pretrained c = 1000 | pretrained c = ∞ | random-init c = 1000 | "
        "random-init c = ∞ | rate (pretrained) | rate (random-init) |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"![convergence to the limit]({figure.name})",
    ])
    data = {
        label: {"layers": list(result.layers), "c_1000": list(at_1000[label].per_layer),
                "to_limit": {f"{c:g}": list(v) for c, v in result.to_limit.items()},
                # null where the layer is exact at every c (no rate to fit); JSON has no NaN
                "rates": [None if math.isnan(r) else r
                          for r in (result.rate(i) for i in range(len(result.layers)))]}
        for label, result in converge.items()
    }
    return Section("limit", "Similarity to the exact limit (c = ∞)", markdown, data)
