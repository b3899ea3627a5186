"""Shared infrastructure: result I/O, stats, checks, gallery registry, validation report, CLI."""
import json
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import limits
from limits import checks, gallery, results, stats, validate


@dataclass(frozen=True)
class _Demo(results.Result):
    K: list
    meta: dict
    shape: tuple
    x: float
    flag: bool
    name: str
    nothing: object = None


def _demo():
    rng = np.random.default_rng(0)
    return _Demo(K=[rng.standard_normal((3, 3)) for _ in range(3)],
                 meta={"iters": 7, "residual": 1.5e-12, "nested": {"a": np.arange(4)}},
                 shape=(2, 3), x=float("nan"), flag=True, name="erf", nothing=None)


def test_result_roundtrip_identical(tmp_path):
    r = _demo()
    npz, js = r.save(tmp_path / "demo")
    assert npz.name == "demo.npz" and js.name == "demo.json"
    back = _Demo.load(tmp_path / "demo")
    assert back.equals(r)
    assert isinstance(back.shape, tuple) and back.K[1].dtype == np.float64
    # the .npz holds no object arrays: it loads with allow_pickle=False
    with np.load(npz, allow_pickle=False) as z:
        assert all(z[k].dtype != object for k in z.files)
    assert not list(tmp_path.glob("*.tmp"))          # no temporary files left behind


def test_result_refuses_object_arrays_and_wrong_type(tmp_path):
    bad = _Demo(K=[np.array([1, "a"], dtype=object)], meta={}, shape=(), x=0.0, flag=False, name="")
    with pytest.raises(TypeError, match="pickle"):
        bad.save(tmp_path / "bad")

    @dataclass(frozen=True)
    class Other(results.Result):
        v: float

    Other(1.0).save(tmp_path / "o")
    with pytest.raises(ValueError, match="Other"):
        _Demo.load(tmp_path / "o")


def test_atomic_write_survives_failure(tmp_path, monkeypatch):
    p = tmp_path / "f.txt"
    results.atomic_write_text(p, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(results.os, "replace", boom)
    with pytest.raises(OSError):
        results.atomic_write_text(p, "new")
    assert p.read_text() == "old"
    assert not list(tmp_path.glob(".*.tmp"))


@settings(max_examples=25, deadline=None)
@given(st.floats(-3, 3), st.floats(0.01, 1.0), st.integers(0, 10_000))
def test_loglog_fit_recovers_power_law(slope, noise, seed):
    rng = np.random.default_rng(seed)
    x = 2.0 ** np.arange(4, 12)
    y = 3.0 * x**slope * np.exp(noise * 0.01 * rng.standard_normal(x.size))
    fit = stats.loglog_fit(x, y)
    assert abs(fit.slope - slope) < 0.05
    assert fit.ci_low <= fit.slope <= fit.ci_high


def test_loglog_fit_ci_covers_truth_at_nominal_rate():
    """Coverage of the 95% CI over many noisy replicates is close to 95% (not a tautology)."""
    rng = np.random.default_rng(1)
    x = 2.0 ** np.arange(5, 11)
    hits = hits_w = 0
    n = 400
    for _ in range(n):
        sig = 0.05
        y = x**-0.5 * np.exp(sig * rng.standard_normal(x.size))
        hits += stats.loglog_fit(x, y).contains(-0.5)
        hits_w += stats.loglog_fit(x, y, yerr=sig * x**-0.5).contains(-0.5)
    assert 0.92 <= hits / n <= 0.98          # unweighted: t-interval, nominal coverage
    assert hits_w / n >= 0.94                # weighted: SE floored at the stated errors (conservative)


def test_stats_and_checks_bad_input():
    with pytest.raises(ValueError):
        stats.loglog_fit([1, 2], [1, 2])
    with pytest.raises(ValueError):
        stats.loglog_fit([1, 2, 3], [1, -2, 3])
    with pytest.raises(ValueError, match="width"):
        checks.positive_int(0, "width")
    with pytest.raises(ValueError, match="depth"):
        checks.positive_int(2.5, "depth")
    with pytest.raises(ValueError, match="X"):
        checks.finite_array([[1.0, np.nan]], "X")
    with pytest.raises(ValueError, match="K"):
        checks.psd_matrix([[1.0, 2.0], [2.0, 1.0]], "K")
    with pytest.raises(ValueError, match="rng"):
        checks.generator(rng=42)
    with pytest.raises(ValueError, match="seed"):
        checks.generator()
    m, se = stats.mean_se(np.array([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_allclose(m, [2.0, 3.0])
    np.testing.assert_allclose(se, [1.0, 1.0])


def test_gallery_make_cache_and_replot(tmp_path):
    calls = []

    def compute(params, rng):
        calls.append(params["n"])
        x = np.linspace(0, 1, params["n"])
        return {"x": x, "y": x**2 + 0.0 * rng.standard_normal(x.size), "label": "demo"}

    def plot(data, params):
        from limits.style import pyplot

        fig, ax = pyplot().subplots()
        ax.plot(data["x"], data["y"], label=data["label"])
        return fig

    name = "_test_demo_figure"
    gallery._FIGURES.pop(name, None)
    gallery.register(name, component="core", compute=compute, plot=plot, params={"n": 50},
                     quick={"n": 5}, caption="demo")
    try:
        m1 = gallery.make(name, quick=True, outdir=tmp_path)
        assert not m1.cached and calls == [5]
        for ext in ("npz", "json", "png", "pdf"):
            assert (tmp_path / f"{name}.{ext}").stat().st_size > 0
        m2 = gallery.make(name, quick=True, outdir=tmp_path)
        assert m2.cached and calls == [5]                       # unchanged parameters: reused
        gallery.make(name, quick=False, outdir=tmp_path)
        assert calls == [5, 50]                                 # changed parameters: recomputed
        payload = gallery.load_data(name, tmp_path)
        assert payload["params"] == {"n": 50} and payload["data"]["x"].shape == (50,)
        (tmp_path / f"{name}.png").unlink()
        gallery.replot(name, tmp_path)
        assert (tmp_path / f"{name}.png").exists() and calls == [5, 50]
        with pytest.raises(ValueError, match="registered twice"):
            gallery.register(name, component="core", compute=compute, plot=plot, params={})
    finally:
        gallery._FIGURES.pop(name, None)
    with pytest.raises(ValueError, match="unknown figure"):
        gallery.get("no_such_figure")


def test_every_registered_figure_is_well_formed():
    figs = gallery.figures()
    assert len(figs) >= 20
    assert gallery.default_names()
    for name, spec in figs.items():
        assert spec.caption and spec.component
        json.dumps(spec.resolved_params(True), default=str)


def test_validation_case_verdicts_and_report():
    ok = validate.Case.statistical("core", "ok", theory=[1.0, 2.0], estimate=[1.01, 1.98], se=[0.01, 0.01])
    bad = validate.Case.statistical("core", "bad", theory=1.0, estimate=1.5, se=0.01)
    fit = stats.loglog_fit([10, 20, 40, 80], [1.0, 0.5, 0.25, 0.125])
    rate_bad = validate.Case.statistical("core", "rate", 0.0, 0.0, 1.0, rate=fit, rate_expected=-0.5)
    ex = validate.Case.exact("core", "exact", 1.0, 1.0 + 1e-12)
    ex_bad = validate.Case.exact("core", "exact bad", 1.0, 1.0 + 1e-6)
    assert [c.verdict for c in (ok, bad, rate_bad, ex, ex_bad)] == ["pass", "fail", "fail", "pass", "fail"]
    rep = validate.Report((ok, bad, ex))
    md = rep.to_markdown()
    assert "2 of 3 cases pass" in md and "**FAIL**" in md
    assert not rep.passed


def test_validate_unknown_component_raises():
    with pytest.raises(ValueError, match="unknown component"):
        validate.run(["no_such_component"])


def test_cli_help_lists_commands(capsys):
    from limits.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for cmd in ("run", "figure", "validate", "table", "nngp", "pc", "dmft", "nfd", "finite"):
        assert cmd in out
    assert main(["figure", "--list"]) == 0
    assert "seed004_fig2" in capsys.readouterr().out
    assert main(["figure", "no_such_figure"]) == 2


def test_lazy_subpackages():
    assert "params" in dir(limits)
    with pytest.raises(AttributeError):
        limits.no_such_thing


def test_validation_report_detectable_bias_column():
    # entrywise test at z_crit = 4: the best-resolved entry decides, (4 + z_0.8)·se/|t|
    c = validate.Case.statistical("core", "ok", theory=[1.0, 2.0], estimate=[1.01, 1.98], se=[0.01, 0.01])
    assert c.detectable_relative and abs(c.detectable - (4 + 0.8416212335729143) * 0.005) < 1e-12
    fit = stats.loglog_fit([10, 20, 40, 80], [1.0, 0.5, 0.25, 0.125])
    s = validate.Case.statistical("core", "slope", -1.0, -1.0, 0.02, rate=fit, rate_expected=-1.0)
    assert not s.detectable_relative and abs(s.detectable - 4.8416212335729143 * 0.02) < 1e-12
    ex = validate.Case.exact("core", "exact", 1.0, 1.0)
    md = validate.Report((c, s, ex)).to_markdown()
    assert "| detectable bias |" in md and "| 2.42% |" in md and "±0.0968 (abs.)" in md
    row = [ln for ln in md.splitlines() if ln.startswith("| core | exact |")][0]
    assert row.split("|")[-3].strip() == ""       # exact identities have no statistical power


def test_detectable_bias_of_rate_only_and_forced_cases():
    fit = stats.loglog_fit([4, 16, 64], [1.0, 0.52, 0.24], [0.02, 0.02, 0.02])
    c = validate.Case.statistical("core", "rate only", 0.01, 0.011, 0.001, z_crit=1e9, rate=fit, rate_expected=-0.5)
    assert not c.detectable_relative
    assert abs(c.detectable - (0.5 * (fit.ci_high - fit.ci_low) + 0.8416212335729143 * fit.slope_se)) < 1e-12
    forced = validate.Case.statistical("core", "forced fail", 0.0, -1.0, 0.1, z_crit=0.0)
    assert np.isnan(forced.detectable) and forced.verdict == "fail"
    row = [ln for ln in validate.Report((forced,)).to_markdown().splitlines() if "forced fail" in ln][0]
    assert row.split("|")[-3].strip() == ""


def test_full_report_lists_cases_below_the_power_target():
    weak = validate.Case.statistical("core", "weak", theory=1.0, estimate=1.0, se=0.01)      # 4.84 %
    strong = validate.Case.statistical("core", "strong", theory=1.0, estimate=1.0, se=0.001)  # 0.48 %
    md = validate.Report((weak, strong)).to_markdown(power_target=0.02)
    sec = md.split("## Cases whose detectable bias exceeds 2%")[1]
    assert "**core / weak**: 4.84%" in sec and "5.86× its samples" in sec and "strong" not in sec
    assert "exceeds" not in validate.Report((weak,)).to_markdown()         # quick reports: no section
