"""Report section: the homogeneity degree table of the default model (pretrained MiniLM)."""

from __future__ import annotations

import torch

from empirical.cli.commands.degree import model_inputs, numeric_degrees
from empirical.cli.sections.context import ReportContext, Section
from homogeneity.analysis import analyze

__all__ = ["degree_section"]


def degree_section(ctx: ReportContext) -> Section:
    """Degree and grade of every output, layer and sublayer, and why grades weaken (paper App. B)."""
    model, tokenizer = ctx.pretrained
    with torch.no_grad():
        report = analyze(model, **model_inputs(model, tokenizer))
    markdown = "\n".join([
        f"Derived from the traced graph of `{ctx.model}` by the rule table of "
        f"`homogeneity`: the last hidden state is **{report.degree}-homogeneous "
        f"({report.grade})** in all parameters. Exact: f(cθ) = cᵏf(θ); approximate: the error "
        "vanishes exponentially (softmax, tanh, GELU); asymptotic: cᵏ is only the leading order "
        "(biases added to higher-degree terms, LayerNorm eps).",
        "",
        report.markdown(depth=4),
    ])
    # Numbers as JSON numbers, as in `normsat degree --json`; symbolic degrees stay text.
    data = numeric_degrees({key: value for key, value in report.to_dict().items() if key != "nodes"})
    return Section("degree", "Homogeneity degree", markdown, data)
