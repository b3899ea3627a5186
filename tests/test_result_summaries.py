"""Every result prints a one-line summary with its key numbers (never array contents), and every ``.plot``
takes a path, an Axes (a multi-panel plot splits it), a sequence of Axes, or nothing, the same way
(limits.style.plot_target)."""
import dataclasses

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import limits  # noqa: E402
from limits.results import Result, _REGISTRY, short_value  # noqa: E402
from limits.style import plot_target, pyplot  # noqa: E402


def _all_results():
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages(limits.__path__, "limits."):
        if not info.name.startswith(("limits.torch", "limits.devtools")):
            importlib.import_module(info.name)
    return dict(_REGISTRY)


def test_every_result_class_has_a_summary_repr():
    """No result class keeps the dataclass repr (which prints every array in full)."""
    for name, cls in _all_results().items():
        if not name.startswith("limits."):
            continue
        assert cls.__repr__ is Result.__repr__ or "__repr__" in cls.__dict__ and \
            "__create_fn__" not in cls.__repr__.__qualname__, name


def test_short_values():
    assert short_value(np.zeros((500, 10))) == "array(500×10)"
    assert short_value(np.float64(0.123456789)) == "0.1235" and short_value(np.array(3.0)) == "3"
    assert short_value({"a": 1, "b": 2}) == "{2 keys}" and short_value("x" * 100).endswith("…'")
    assert short_value((1, 2)) == "(1, 2)" and short_value(tuple(range(10))) == "tuple(10)"


@pytest.fixture(scope="module")
def task():
    rng = np.random.default_rng(0)
    m = limits.mlp(3, 1, activation="erf", sigma_w2=1.5, sigma_b2=0.1)
    X = rng.standard_normal((12, 3))
    return m, X, np.sin(X[:, 0]), rng.standard_normal((3, 3))


@pytest.fixture(scope="module")
def results(task):
    from limits.finite.coordcheck import width_check

    m, X, Y, Xs = task
    k = limits.kernels.kernel(m, X[:4])
    fw = limits.kernels.finite_width(m, X[:2])
    return {"kernel": k,
            "check": limits.check(k, widths=(16, 32, 64), inits=16, seed=0),
            "finite_width": fw,
            "finite_width_check": limits.check(fw, widths=(8, 16, 32), inits=64, seed=0),
            "posterior": limits.predict.nngp_posterior(m, X, Y, Xs, noise="auto"),
            "gd": limits.predict.gradient_descent(m, X, Y, Xs, t=[0.0, 1.0, 10.0]),
            "coordcheck": width_check(limits.params.named("muP"), widths=(16, 32, 64), seeds=2, L=3, d_in=4, P=4)}


def test_summaries_name_key_numbers_not_arrays(results):
    for name, r in results.items():
        for text in (repr(r), str(r)):
            assert "array([" not in text and "\n" not in repr(r), (name, text)
        assert len(repr(r)) < 700, (name, repr(r))
    p = results["posterior"]
    assert f"{p.noise:.4g}" in str(p) and f"{p.output_scale:.4g}" in str(p) and "fitted" in str(p)
    fw = results["finite_width"]
    assert f"N ≥ {fw.width_for(0.01)}" in str(fw) and f"N ≥ {fw.width_for(0.01, 'Theta')}" in str(fw)
    assert "correlations" in str(results["kernel"]) and "PASS" in repr(results["check"])


def test_width_for_and_the_check_report_agree(results):
    """The check's "N ≥ …" is the largest over the kernels it tests; each kernel's own width is the one
    width_for gives, and both outputs say which is which."""
    fw, c = results["finite_width"], results["finite_width_check"]
    assert c.width_for_tol == fw.width_for(0.01, "all") == max(fw.width_for(0.01), fw.width_for(0.01, "Theta"))
    per = c.details["width_for_tol_per_kernel"]
    assert per == {"read-out NNGP": fw.width_for(0.01), "NTK": fw.width_for(0.01, "Theta")}
    text = c.to_markdown()
    assert f"N ≥ {c.width_for_tol}" in text and f"read-out NNGP: N ≥ {fw.width_for(0.01)}" in text
    assert "width_for" in fw.width_for.__doc__ or "all" in fw.width_for.__doc__
    with pytest.raises(ValueError, match="which"):
        fw.width_for(0.01, "bogus")


PLOTTABLE = ("check", "finite_width", "finite_width_check", "posterior", "gd", "coordcheck")


@pytest.mark.parametrize("name", PLOTTABLE)
def test_plot_takes_a_path_an_axes_or_nothing(results, name, tmp_path):
    from matplotlib.figure import Figure

    plt = pyplot()
    r = results[name]
    fig = r.plot()
    assert isinstance(fig, Figure) and fig.axes
    n_panels = len([a for a in fig.axes if a.get_label() != "<colorbar>"])
    plt.close(fig)
    for path in (tmp_path / f"{name}.png", str(tmp_path / f"{name}.pdf")):
        out = r.plot(path)
        assert isinstance(out, Figure) and (tmp_path / path).stat().st_size > 1000 if isinstance(path, str) \
            else path.stat().st_size > 1000
    host, ax = plt.subplots()
    assert r.plot(ax) is host                                           # drawn into the user's figure
    assert len(host.axes) == n_panels and (n_panels > 1 or host.axes[0] is ax)
    plt.close(host)
    if n_panels > 1:
        host, axes = plt.subplots(1, n_panels)
        assert r.plot(list(axes)) is host and all(a.has_data() for a in axes)
        plt.close(host)
    with pytest.raises(ValueError, match="target"):
        r.plot(3)
    with pytest.raises(ValueError, match="suffix"):
        r.plot(tmp_path / "x.notaformat")


def test_plot_target_rules(tmp_path):
    plt = pyplot()
    host, (a, b) = plt.subplots(1, 2)
    t = plot_target(a, 3)                 # one axes' place split into three, the other untouched
    assert len(t.axes) == 3 and b in host.axes and a not in host.axes and len(host.axes) == 4
    with pytest.raises(ValueError, match="sequence of 2"):
        plot_target([b], 2)
    plt.close(host)
    fig = pyplot().figure()
    free = fig.add_axes([0.1, 0.1, 0.8, 0.8])
    assert len(plot_target(free, 2).axes) == 2
    plt.close(fig)


def test_figures_saved_twice_are_identical(results, tmp_path):
    for ext in ("png", "pdf", "svg"):
        results["check"].plot(tmp_path / f"a.{ext}")
        results["check"].plot(tmp_path / f"b.{ext}")
        assert (tmp_path / f"a.{ext}").read_bytes() == (tmp_path / f"b.{ext}").read_bytes()


def test_sweep_plot_takes_a_path(tmp_path):
    import xarray as xr

    from limits.sweep.plot import plot

    ds = xr.Dataset({"y": ("x", np.array([1.0, 2.0, 4.0]))}, coords={"x": [1.0, 2.0, 3.0]})
    fig = plot(ds, "x", "y", ax=tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 1000 and fig.axes


def test_saved_results_round_trip_with_the_new_fields(results, tmp_path):
    p = results["posterior"]
    p.save(tmp_path / "p")
    q = limits.predict.PosteriorResult.load(tmp_path / "p")
    assert q.equals(p) and q.output_scale == p.output_scale and q.fitted == p.fitted
    # a posterior saved before the scale was fitted loads with s² = 1, nothing fitted
    old = {f.name: getattr(p, f.name) for f in dataclasses.fields(p) if f.name not in ("output_scale", "fitted")}
    r = limits.predict.PosteriorResult(**old)
    assert r.output_scale == 1.0 and r.fitted == ()
