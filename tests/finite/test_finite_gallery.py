"""The finite figures compute and plot (quick settings)."""
import pytest

from limits import gallery


@pytest.mark.slow
@pytest.mark.parametrize("name", ["finite_width_rates", "finite_bp_vs_dtp", "finite_gnt_bp_cosine"])
def test_finite_figures_quick(name, tmp_path):
    made = gallery.make(name, quick=True, outdir=tmp_path)
    assert (tmp_path / f"{name}.png").exists() and (tmp_path / f"{name}.npz").exists()
    data = gallery.load_data(name, tmp_path)["data"]
    assert data
