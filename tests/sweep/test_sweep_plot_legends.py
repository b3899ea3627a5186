"""`limits sweep plot` legends and axes: rounded values, a colour bar for many numeric hues, the time
coordinate instead of an array index, log axes where the data span decades."""
import numpy as np
import pytest
import xarray as xr

from limits.style import pyplot
from limits.sweep.plot import fmt_value, plot, x_coordinate


def _loss_dataset(n_hue):
    g = np.geomspace(0.1, 1.0, n_hue)
    t = np.linspace(0.0, 5.0, 101)                             # dt = 0.05: positive times span two decades
    loss = np.exp(-np.outer(g, t) * 3) + 1e-4
    return xr.Dataset({"t": (("gamma0", "t_dim_0"), np.broadcast_to(t, (n_hue, t.size)).copy()),
                       "loss": (("gamma0", "loss_dim_0"), loss)},
                      coords={"gamma0": g, "t_dim_0": np.arange(101), "loss_dim_0": np.arange(101)})


def test_legend_values_are_rounded_and_x_is_time_on_log_axes():
    ds = _loss_dataset(6)
    fig = plot(ds, "loss_dim_0", "loss", hue="gamma0")
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert "loss, gamma0=0.1585" in labels and not any("0.15848931" in s for s in labels)
    assert ax.get_xlabel() == "t" and ax.get_xscale() == "log" and ax.get_yscale() == "log"
    x = ax.get_lines()[0].get_xdata()
    assert np.allclose(x, np.linspace(0, 5, 101)[1:])          # the time coordinate, t = 0 left off the log axis
    pyplot().close(fig)
    fig = plot(ds, "loss_dim_0", "loss", hue="gamma0", logx=False, logy=False)
    assert fig.axes[0].get_xscale() == "linear" and len(fig.axes[0].get_lines()[0].get_xdata()) == 101
    pyplot().close(fig)


def test_many_numeric_hues_get_a_colour_bar():
    ds = _loss_dataset(40)
    fig = plot(ds, "loss_dim_0", "loss", hue="gamma0")
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == "gamma0"          # the colour bar
    assert fig.axes[0].get_legend() is None
    colours = {tuple(np.round(line.get_color(), 6)) for line in fig.axes[0].get_lines()}
    assert len(colours) == 40                                                     # no repeated colours
    pyplot().close(fig)


def test_x_coordinate_keeps_ordinary_dims_and_refuses_varying_time():
    ds = _loss_dataset(3)
    assert x_coordinate(ds, "gamma0")[1] == "gamma0"
    bad = ds.assign(t=ds.t * ds.gamma0)                       # a different time grid per point: keep the index
    xs, label = x_coordinate(bad, "loss_dim_0")
    assert label == "loss_dim_0" and np.array_equal(xs, np.arange(101))


@pytest.mark.parametrize("v,s", [(0.15848931924611134, "0.1585"), (3, "3"), ("tanh", "tanh"), (1e-7, "1e-07")])
def test_fmt_value(v, s):
    assert fmt_value(v) == s
