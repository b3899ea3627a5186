"""The coordinate check's figure (issue 41): names horizontal and readable, every step drawn (a row failing at init
or at step 1 shows), failing rows marked ✗ in red, rows without a measured change in orange."""
import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")
matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import limits.torch as lt  # noqa: E402
from limits.torch import demos  # noqa: E402
from limits.torch.coordcheck_plot import RED, ORANGE  # noqa: E402


@pytest.fixture(scope="module")
def check():
    return lt.coord_check(demos.mlp, (8, 16, 32), demos.mlp_data(), expect="muP", seeds=2, steps=2, progress=False)


def _labels(fig):
    return [(t.get_text(), matplotlib.colors.to_hex(t.get_color())) for t in fig.axes[0].get_yticklabels()]


def test_every_step_is_drawn_with_readable_names(check, tmp_path):
    fig = check.plot(tmp_path / "cc.png")
    left, right = fig.axes[:2]
    assert [t for t, _ in _labels(fig)] == list(check.tensors)
    assert all(t.get_rotation() == 0 and t.get_fontsize() >= 8 for t in left.get_yticklabels())
    legend = [t.get_text() for t in right.get_legend().get_texts()]
    assert "fitted, step 1 (95 % CI)" in legend and "fitted, step 2 (95 % CI)" in legend
    assert fig.get_size_inches()[1] >= 0.24 * len(check.tensors)
    assert (tmp_path / "cc.png").stat().st_size > 10_000


def test_a_row_failing_at_step_1_only_is_marked(check):
    """Mark the first tensor inconsistent at step 1 (not at the last step): the old figure, last step only, hid it."""
    cons = check.consistent.copy()
    i = check.kinds.index("tensor")
    cons[i, 1, 1], cons[i, 2, 1] = 0, 1
    fig = dataclasses.replace(check, consistent=cons).plot()
    labels = _labels(fig)
    assert labels[i] == (f"✗ {check.tensors[i]}", RED)
    assert "not as predicted" in [t.get_text() for t in fig.axes[1].get_legend().get_texts()]


def test_rows_without_a_measured_change_are_named(check):
    samples = check.samples.copy()
    i = check.kinds.index("tensor")
    samples[:, :, i, 1:, 1] = 0.0                       # the row never changed
    fig = dataclasses.replace(check, samples=samples).plot()
    assert _labels(fig)[i] == (f"{check.tensors[i]} — did not change", ORANGE)
    assert "1 without a measured change" in fig.axes[0].get_title(loc="left")


def test_bad_arguments():
    r = lt.coord_check(demos.mlp, (8, 16, 32), demos.mlp_data(), expect="muP", seeds=2, steps=1, progress=False)
    with pytest.raises(ValueError, match="quantity"):
        r.plot(quantity="nope")
    with pytest.raises(ValueError, match="step must lie in"):
        r.plot(step=5)
    assert np.isfinite(r.slope).any()


def test_the_docs_example_is_drawn_from_its_committed_check(tmp_path):
    """docs/_static/torch_coordcheck_plot.png: the broken μP transformer (SP read-out) at widths 64–512, drawn from
    the committed check (benchmarks/coordcheck_plot_example.py --replot); the culprit row is marked."""
    from pathlib import Path

    from limits.torch.coordcheck import TorchCoordCheck

    root = Path(__file__).resolve().parents[2]
    r = TorchCoordCheck.load(root / "benchmarks" / "results" / "calibration" / "coordcheck_plot_example")
    assert r.failing_tensors()[0] == "out.weight" and [int(w) for w in r.widths] == [64, 128, 256, 512]
    fig = r.plot(tmp_path / "example.png")
    assert ("✗ out.weight", RED) in _labels(fig)
    assert (root / "docs" / "_static" / "torch_coordcheck_plot.png").stat().st_size > 50_000
