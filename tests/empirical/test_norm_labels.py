"""How the norm tracker names, orders and reports layers, on hand-made parameter names and
vectors whose norms and cosines are known."""

from __future__ import annotations

import math

import pytest
import torch

from empirical.errors import EmpiricalError
from empirical.training.norms import (
    NormTracker,
    layer_labels,
    plot_records,
    record_scalars,
    render_records,
)


def test_blocks_are_ordered_by_index_within_their_stack() -> None:
    """Embeddings first, then each stack in order of appearance with block 2 before block 10,
    then everything else."""
    names = ["decoder.block.10.w", "encoder.block.2.w", "final.w", "decoder.block.2.w",
             "encoder.block.10.w", "embed_tokens.weight"]
    tracker = NormTracker({name: torch.ones(1) for name in names})
    assert tracker.layer_names == ["embeddings", "decoder.block.2", "decoder.block.10",
                                   "encoder.block.2", "encoder.block.10", "other"]
    assert layer_labels(tracker.layer_names) == {
        "embeddings": "embeddings", "decoder.block.2": "decoder layer 3",
        "decoder.block.10": "decoder layer 11", "encoder.block.2": "encoder layer 3",
        "encoder.block.10": "encoder layer 11", "other": "other"}


@pytest.mark.parametrize(("layers", "labels"), [
    (["model.layers.0", "model.layers.1"], ["layer 1", "layer 2"]),
    # BART-style stacks under a common prefix: each block is named by its own stack only.
    (["model.encoder.layers.0", "model.decoder.layers.1"], ["encoder layer 1", "decoder layer 2"]),
    (["layers.3", "embeddings"], ["layer 4", "embeddings"]),
])
def test_blocks_are_named_by_their_stack_when_there_are_several(layers, labels) -> None:
    assert layer_labels(layers) == dict(zip(layers, labels))


def test_norms_and_cosines_of_hand_made_states() -> None:
    """Layer h.0 goes from (3, 4) to (0, 0) and back to (4, 3): a zero vector has no cosine, and
    (3, 4)·(4, 3)/25 = 24/25 is not measured across the zero record (only between neighbours)."""
    shapes = {"h.0.w": torch.zeros(2), "h.1.w": torch.zeros(1)}
    tracker = NormTracker(shapes)
    tracker.record(0, {"h.0.w": torch.tensor([3.0, 4.0]), "h.1.w": torch.tensor([2.0])})
    zero = tracker.record(5, {"h.0.w": torch.zeros(2), "h.1.w": torch.tensor([-2.0])})
    assert zero["norm"] == 2.0 and zero["layers"] == {"h.0": 0.0, "h.1": 2.0}
    assert zero["layer_cosine_prev"] == {"h.0": None, "h.1": -1.0}
    assert zero["cosine_prev"] == pytest.approx(-4 / (2 * math.sqrt(29)))
    back = tracker.record(9, {"h.0.w": torch.tensor([4.0, 3.0]), "h.1.w": torch.tensor([-2.0])})
    assert back["layer_cosine_prev"] == {"h.0": None, "h.1": 1.0}
    assert back["cosine_prev"] == pytest.approx(4 / (2 * math.sqrt(29)))


def test_a_repeated_or_earlier_step_is_refused() -> None:
    tracker = NormTracker({"w": torch.ones(1)})
    tracker.record(3, {"w": torch.ones(1)})
    for step in (3, 2):
        with pytest.raises(EmpiricalError, match=f"steps to increase, got step {step} after step 3"):
            tracker.record(step, {"w": torch.ones(1)})
    tracker.record(4, {"w": torch.ones(1)})
    assert [r["step"] for r in tracker.records] == [3, 4]


def test_dashboard_scalars_leave_out_what_was_not_measured() -> None:
    record = {"step": 2, "norm": 3.0, "grad_norm": None, "loss": 0.5, "cosine_prev": 1.0,
              "layers": {"h.0": 1.0, "h.1": None}}
    assert record_scalars(record, prefix="p/") == {"p/norm": 3.0, "p/cosine_prev": 1.0, "p/loss": 0.5,
                                                  "p/layer/h.0": 1.0}


def test_dashboard_scalars_of_a_complete_record() -> None:
    """Every measured field of a training step becomes its own tag, with its own value."""
    fields = ["norm", "grad_norm", "grad_projection", "update_norm", "update_projection",
              "cosine_prev", "loss"]
    record = {"step": 7, **{name: float(i + 1) for i, name in enumerate(fields)},
              "layer_grad_projection": {"h.0": 9.0}, "layers": {"h.0": 10.0, "other": 11.0}}
    assert record_scalars(record) == {**{f"normsat/{name}": float(i + 1) for i, name in enumerate(fields)},
                                      "normsat/layer/h.0": 10.0, "normsat/layer/other": 11.0}


def test_cosines_of_an_unchanged_and_a_negated_model_stay_within_one() -> None:
    """θ recorded twice has cosine 1, and −θ after it −1, in total and per layer. The per-layer
    dot products and squared norms are rounded differently, so for this model several raw ratios
    land an ulp outside [−1, 1]; a cosine is clamped to where cosines live."""
    torch.manual_seed(2)
    model = torch.nn.Module()
    model.h = torch.nn.ModuleList([torch.nn.Linear(6, 6) for _ in range(8)])
    tracker = NormTracker(model)
    tracker.record(0)
    same = tracker.record(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.neg_()
    negated = tracker.record(2)
    for record, sign in ((same, 1.0), (negated, -1.0)):
        cosines = [record["cosine_prev"], *record["layer_cosine_prev"].values()]
        assert len(cosines) == 9 and all(-1.0 <= c <= 1.0 for c in cosines)
        assert cosines == pytest.approx([sign] * 9, abs=4e-16)


# -- the figure of the records ---------------------------------------------------------------------

#: Twelve layers (more than matplotlib's ten colours) over three records: `h.3` is zero at every
#: record, so it never has a cosine; the first record has none at all.
_LAYERS = ["embeddings", *(f"h.{i}" for i in range(10)), "other"]
_RECORDS = [
    {"step": step, "norm": norm,
     "layers": {layer: norm * (i + 1) / 20 if layer != "h.3" else 0.0 for i, layer in enumerate(_LAYERS)},
     "layer_cosine_prev": None if cosine is None else {
         layer: None if layer == "h.3" else cosine - i / 100 for i, layer in enumerate(_LAYERS)}}
    for step, norm, cosine in [(0, 5.0, None), (4, 6.0, 0.9), (10, 8.0, 0.95)]
]


def _lines(ax) -> list[tuple[list[float], list[float], str | None]]:
    return [([float(x) for x in line.get_xdata()], [float(y) for y in line.get_ydata()],
             line.get_label()) for line in ax.get_lines()]


def test_the_figure_draws_every_recorded_value_with_its_layer_label_and_colour() -> None:
    """Panel by panel, each line holds exactly the values of the records (a loop over them here),
    labelled as layer_labels names its layer and coloured alike in both layer panels."""
    from matplotlib.colors import to_rgba
    from matplotlib.font_manager import FontProperties

    fitted = ("sqrt: a·√t", [0.0, 5.0, 10.0], [5.0, 6.5, 8.0])
    fig = render_records(_RECORDS, fitted=fitted, title="a run")
    assert tuple(fig.get_size_inches()) == (13.0, 3.8) and fig.dpi == 110
    total, per_layer, cosine = fig.axes
    steps = [0.0, 4.0, 10.0]

    norm_points, curve = total.get_lines()
    assert _lines(total) == [(steps, [5.0, 6.0, 8.0], "‖θ‖"), (fitted[1], fitted[2], fitted[0])]
    assert norm_points.get_marker() == "o" and norm_points.get_linestyle() == "None"
    assert norm_points.get_markersize() == 3
    assert curve.get_linestyle() == "-" and to_rgba(curve.get_color()) == to_rgba("C3")
    x_small = FontProperties(size="x-small").get_size_in_points()
    legend = total.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["‖θ‖", fitted[0]]
    assert {t.get_fontsize() for t in legend.get_texts()} == {x_small}
    assert legend._loc == 4  # "lower right": the corner a rising curve leaves empty
    falling = [{**record, "norm": 10.0 - record["norm"]} for record in _RECORDS]
    assert render_records(falling).axes[0].get_legend()._loc == 1  # "upper right", above a falling one

    names = layer_labels(_LAYERS)
    assert _lines(per_layer) == [(steps, [r["layers"][layer] for r in _RECORDS], names[layer])
                                 for layer in _LAYERS]
    legend = per_layer.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [names[layer] for layer in _LAYERS]
    assert {t.get_fontsize() for t in legend.get_texts()} == {x_small}
    expected_cosines = []
    for layer in _LAYERS:
        points = [(float(r["step"]), r["layer_cosine_prev"][layer]) for r in _RECORDS
                  if r["layer_cosine_prev"] is not None and r["layer_cosine_prev"][layer] is not None]
        if points:
            expected_cosines.append(([s for s, _ in points], [c for _, c in points], names[layer]))
    assert "h.3" not in [label for *_, label in expected_cosines] and len(expected_cosines) == 11
    assert _lines(cosine) == expected_cosines
    colour = {layer: to_rgba(f"C{i % 10}") for i, layer in enumerate(_LAYERS)}
    assert [to_rgba(line.get_color()) for line in per_layer.get_lines()] == list(colour.values())
    assert [to_rgba(line.get_color()) for line in cosine.get_lines()] == [
        colour[layer] for layer in _LAYERS if layer != "h.3"]
    assert {line.get_marker() for line in cosine.get_lines()} == {"."}
    legend = cosine.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == [label for *_, label in expected_cosines]
    assert {t.get_fontsize() for t in legend.get_texts()} == {x_small}
    assert legend._loc == 6  # "center left", outside the panel at its right
    anchor = legend.get_bbox_to_anchor().transformed(cosine.transAxes.inverted())
    assert (anchor.x0, anchor.y0) == pytest.approx((1.02, 0.5))

    assert [(ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes] == [
        ("step", "parameter norm ‖θ‖"), ("step", "parameter norm per layer"),
        ("step", r"cos($\theta_t$, $\theta_{\mathrm{prev}}$) per layer")]
    for ax in fig.axes:
        grid = ax.xaxis.get_gridlines()[0]
        assert grid.get_visible() and grid.get_alpha() == 0.3
    assert fig._suptitle.get_text() == "a run"


@pytest.mark.filterwarnings("ignore:No artists with labels found")  # the empty cosine panel
def test_a_figure_of_one_record_without_a_fit_or_title() -> None:
    """One record: one point per panel, no fitted curve, no cosine, no title."""
    fig = render_records(_RECORDS[:1])
    total, per_layer, cosine = fig.axes
    assert _lines(total) == [([0.0], [5.0], "‖θ‖")]
    assert len(per_layer.get_lines()) == len(_LAYERS) and not cosine.get_lines()
    assert fig._suptitle is None
    with pytest.raises(EmpiricalError, match=r"^plot expected at least one record, got none$"):
        render_records([])


def test_the_figure_keeps_its_layout_and_colours_under_another_style() -> None:
    """Three panels side by side; under a style with dashed lines and a seven-colour cycle the fit
    is still a solid line and each layer has one colour in both layer panels."""
    import matplotlib as mpl
    from cycler import cycler
    from matplotlib.colors import to_rgba

    seven = ["#000001", "#000002", "#000003", "#000004", "#000005", "#000006", "#000007"]
    with mpl.rc_context({"lines.linestyle": "--", "axes.prop_cycle": cycler(color=seven)}):
        fig = render_records(_RECORDS, fitted=("fit", [0.0, 10.0], [5.0, 8.0]))
        total, per_layer, cosine = fig.axes
        boxes = [ax.get_position() for ax in fig.axes]
        assert len({round(b.y0, 6) for b in boxes}) == 1
        assert boxes[0].x1 < boxes[1].x0 < boxes[1].x1 < boxes[2].x0
        assert total.get_lines()[1].get_linestyle() == "-"
        layer_colour = {line.get_label(): to_rgba(line.get_color()) for line in per_layer.get_lines()}
        assert list(layer_colour.values()) == [to_rgba(f"C{i % 10}") for i in range(len(_LAYERS))]
        assert layer_colour["layer 10"] == layer_colour["embeddings"]  # the 11th line starts C0 … C9 again
        for line in cosine.get_lines():
            assert to_rgba(line.get_color()) == layer_colour[line.get_label()]


def test_plot_records_writes_the_figure_of_its_records(tmp_path, monkeypatch) -> None:
    """plot_records hands the fit and the title on to the figure it writes."""
    import empirical.training.norms as norms

    drawn = []
    real = norms.save_figure
    monkeypatch.setattr(norms, "save_figure", lambda fig, path: drawn.append(fig) or real(fig, path))
    fitted = ("exp", [0.0, 10.0], [5.0, 8.0])
    path = plot_records(_RECORDS, tmp_path / "n.png", fitted=fitted, title="a run")
    assert path.read_bytes()[:4] == b"\x89PNG"
    (fig,) = drawn
    assert _lines(fig.axes[0])[1] == (*fitted[1:], "exp")
    assert fig._suptitle.get_text() == "a run"
    plot_records(_RECORDS, tmp_path / "plain.png")
    assert drawn[1]._suptitle is None and len(drawn[1].axes[0].get_lines()) == 1
