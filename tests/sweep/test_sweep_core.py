"""limits.sweep: grids and seeds, outputs → dataset, store, failures, resume (serial backend)."""
import json

import numpy as np
import pytest

import limits
import limits.sweep as S
from limits.sweep.outputs import flatten

import sweep_points as P


def test_seeds_come_from_seedsequence_spawn_by_grid_index():
    g = S.Grid(product={"width": [4, 8, 16], "depth": [1, 2]}, seeds=3, root=7)
    kids = np.random.SeedSequence(7).spawn(g.n_points)
    pts = list(g.points())
    assert len(pts) == 18 and g.dims == ("width", "depth", "seed")
    for p in pts:
        assert p.seed == int(kids[p.flat].generate_state(1, np.uint64)[0])
        assert p.flat == np.ravel_multi_index(p.index, g.shape)
    # the same point in a bigger grid built in another order keeps its parameters ↔ seed relation
    # only through the grid index; seed_by="replicate" shares seeds across parameters instead
    r = S.Grid(product={"width": [4, 8]}, seeds=3, root=7, seed_by="replicate")
    kids = np.random.SeedSequence(7).spawn(3)
    for p in r.points():
        assert p.seed == int(kids[p.index[-1]].generate_state(1, np.uint64)[0])
    assert len({p.seed for p in g.points()}) == 18


def test_grid_zipped_fixed_and_errors():
    g = S.Grid(product={"width": [4, 8]}, zipped={"pt": {"sigma_w2": [1.0, 2.0, 3.0], "sigma_b2": [0.0, 0.1, 0.2]}},
               fixed={"activation": "erf"})
    assert g.shape == (2, 3) and g.dims == ("width", "pt")
    p = g.point((1, 2))
    assert p.params == {"activation": "erf", "width": 8, "sigma_w2": 3.0, "sigma_b2": 0.2} and p.seed is None
    with pytest.raises(ValueError, match="equal lengths"):
        S.Grid(zipped={"pt": {"a": [1, 2], "b": [1]}})
    with pytest.raises(ValueError, match="more than once"):
        S.Grid(product={"a": [1]}, fixed={"a": 2})
    with pytest.raises(ValueError, match="empty"):
        S.Grid(product={"a": []})
    with pytest.raises(ValueError, match="seeds"):
        S.Grid(product={"a": [1]}, seeds=0)
    with pytest.raises(ValueError, match="non-finite"):
        S.Grid(product={"a": [1.0, float("nan")]})
    with pytest.raises(ValueError, match="backend"):
        S.run(P.noisy, {"width": [2]}, backend="threads")


def test_flatten_result_dict_scalar():
    c = limits.kernels.critical_line("tanh", 0.05)
    arrays, skipped = flatten(c)
    assert set(arrays) == {"sigma_b2", "sigma_w2", "qstar", "chi1", "residual", "converged"}
    assert arrays["sigma_w2"].shape == () and arrays["converged"].dtype == bool
    assert set(skipped) == {"activation", "note"}
    a, _ = flatten({"x": 1.5, "d": {"it": 3, "z": 1 + 2j}, "l": [np.ones(2), np.ones(3)]})
    assert set(a) == {"x", "d_it", "d_z_real", "d_z_imag", "l_0", "l_1"}
    a, _ = flatten(np.arange(3.0))
    assert list(a) == ["value"]
    with pytest.raises(ValueError, match="no numeric output"):
        flatten("text")


def test_result_fields_become_variables_with_named_dims(tmp_path):
    X = np.random.default_rng(0).standard_normal((3, 5))
    ds = S.run(limits.kernels.nngp, S.Grid(product={"depth": [2, 4]}, fixed={"X": X, "activation": "erf"}),
               store=tmp_path / "st", progress=False)
    assert ds["K"].dims == ("depth", "K_dim_0", "K_dim_1", "K_dim_2")
    assert ds.sizes["K_dim_0"] == 5                         # L+1 layers of the deepest net
    for L in (2, 4):
        r = limits.kernels.nngp(X, depth=L, activation="erf")
        K = ds["K"].sel(depth=L).values
        np.testing.assert_array_equal(K[:L + 1], r.K)
        assert np.isnan(K[L + 1:]).all()                    # padding of the shallower net
        np.testing.assert_array_equal(ds["K_out"].sel(depth=L).values, r.K_out)
    assert {"K", "C", "Theta"} <= set(json.loads(ds.attrs["padded"])) and "K_out" not in ds.attrs["padded"]
    back = S.load(tmp_path / "st" / "sweep.nc")
    for v in ("K", "K_out", "failed"):
        np.testing.assert_array_equal(back[v].values, ds[v].values)
    assert back.attrs["n_points"] == 2


def test_reduce_seeds_mean_se(tmp_path):
    g = S.Grid(product={"width": [4, 8], "depth": [1, 3]}, seeds=5, root=3)
    full = S.run(P.noisy, g, progress=False)
    red = S.reduce_seeds(full)
    x = full["trace"].values                                   # (2, 2, 5)
    np.testing.assert_allclose(red["trace_mean"].values, x.mean(-1), rtol=1e-13)
    np.testing.assert_allclose(red["trace_se"].values, x.std(-1, ddof=1) / np.sqrt(5), rtol=1e-12)
    assert (red["n_seeds"].values == 5).all() and "seed" not in red.dims
    np.testing.assert_array_equal(red["theory_se"].values, 0.0)
    red2 = S.run(P.noisy, g, reduce_seeds=True, progress=False, store=tmp_path)
    np.testing.assert_array_equal(red2["trace_mean"].values, red["trace_mean"].values)
    assert red2.attrs["path"].endswith("sweep_reduced.nc") and red2.attrs["full_path"].endswith("sweep.nc")
    np.testing.assert_array_equal(S.load(red2.attrs["path"])["trace_se"].values, red["trace_se"].values)
    np.testing.assert_array_equal(S.load(tmp_path / "sweep.nc")["trace"].values, x)
    with pytest.raises(ValueError, match="seeds"):
        S.run(P.sleepy, {"x": [1.0]}, reduce_seeds=True)
    with pytest.raises(ValueError, match="not .seed."):
        S.Grid(product={"seed": [0, 1]})
    # a point's value does not depend on the rest of the grid (seed by grid index)
    one = S.run(P.noisy, S.Grid(product={"width": [4, 8], "depth": [1, 3]}, seeds=5, root=3), progress=False)
    np.testing.assert_array_equal(one["trace"].values, x)


def test_failing_point_recorded_and_fail_fast(tmp_path):
    g = S.Grid(product={"x": [0.0, 1.0, 2.0, 3.0]}, seeds=2, fixed={"delay": 0.0, "fail_at": 2.0})
    ds = S.run(P.sleepy, g, store=tmp_path / "a", progress=False)
    assert ds.attrs["n_failed"] == 2
    assert ds["failed"].sel(x=2.0).values.all() and not ds["failed"].sel(x=[0.0, 1.0, 3.0]).values.any()
    assert np.isnan(ds["y"].sel(x=2.0).values).all() and np.isfinite(ds["y"].sel(x=3.0).values).all()
    errs = json.loads(ds.attrs["error"])
    assert len(errs) == 2 and all("ArithmeticError: x = 2.0 is the failing point" in e["error"] for e in errs)
    assert S.summary(ds).endswith("") and "2 failed" in S.summary(ds)
    stored = [json.loads(p.read_text()) for p in (tmp_path / "a").rglob("*.json") if p.parent.name != "a"]
    assert sum(m["status"] == "error" for m in stored) == 2
    # rerun: the 6 good points are reused, the failed ones retried (and fail again)
    ds2 = S.run(P.sleepy, g, store=tmp_path / "a", progress=False)
    assert ds2.attrs["reused"] == 6 and ds2.attrs["computed"] == 2 and ds2.attrs["n_failed"] == 2
    ds3 = S.run(P.sleepy, g, store=tmp_path / "a", progress=False, retry_failed=False)
    assert ds3.attrs["reused"] == 8 and ds3.attrs["n_failed"] == 2
    with pytest.raises(S.PointFailed, match="failing point"):
        S.run(P.sleepy, g, store=tmp_path / "b", fail_fast=True, progress=False)
    # stopped at the first failure: the points after it were never run
    n_done = len([p for p in (tmp_path / "b" / "points").rglob("*.json")])
    assert n_done == 5                                      # x = 0, 1 (2 seeds each) + the failing one


def test_store_resume_and_keys(tmp_path):
    g = S.Grid(product={"width": [4, 8, 16], "depth": [1, 2]}, seeds=2)
    first = S.run(P.noisy, S.Grid(product={"width": [4, 8], "depth": [1, 2]}, seeds=2), store=tmp_path, progress=False)
    assert first.attrs["reused"] == 0 and first.attrs["computed"] == 8
    ds = S.run(P.noisy, g, store=tmp_path, progress=False)
    # values appended to the outermost axis keep every flat index, hence every seed: all 8 reused
    assert ds.attrs["reused"] == 8 and ds.attrs["computed"] == 4
    # seed_by="point": a value added to an inner axis renumbers the later points (new seeds), so
    # only the width-4 points before the insertion keep their keys
    inner = S.run(P.noisy, S.Grid(product={"width": [4, 8], "depth": [1, 2, 3]}, seeds=2), store=tmp_path,
                  progress=False)
    assert inner.attrs["reused"] == 4
    ds2 = S.run(P.noisy, g, store=tmp_path, progress=False)
    assert ds2.attrs["reused"] == 12 and ds2.attrs["computed"] == 0
    # seed_by="replicate" keys do not move when the grid grows
    rep = dict(seeds=2, seed_by="replicate")
    S.run(P.noisy, S.Grid(product={"width": [4, 8], "depth": [1, 2]}, **rep), store=tmp_path / "r", progress=False)
    grown = S.run(P.noisy, S.Grid(product={"width": [4, 8], "depth": [1, 2, 3]}, **rep), store=tmp_path / "r",
                  progress=False)
    assert grown.attrs["reused"] == 8 and grown.attrs["computed"] == 4
    np.testing.assert_array_equal(ds2["trace"].values, ds["trace"].values)
    # a different parameter value, function name or version is a different point
    assert S.point_key("f", "1", {"a": 1}, 5) != S.point_key("f", "1", {"a": 1.5}, 5)
    assert S.point_key("f", "1", {"a": 1}, 5) != S.point_key("f", "2", {"a": 1}, 5)
    assert S.point_key("f", "1", {"a": 1}, 5) != S.point_key("g", "1", {"a": 1}, 5)
    assert S.point_key("f", "1", {"X": np.ones(3)}, None) != S.point_key("f", "1", {"X": np.ones(4)}, None)
    # every stored file is complete: json parses, npz loads without pickle and holds what json lists
    st = S.Store(tmp_path)
    files = st.point_files()
    assert files and all(not p.name.startswith(".") for p in files)
    for js in [p for p in files if p.suffix == ".json"]:
        meta, arrays = st.load(js.stem)
        assert meta["status"] == "ok" and sorted(arrays) == meta["outputs"]


def test_corrupt_point_file_is_recomputed(tmp_path):
    g = S.Grid(product={"width": [4, 8]}, fixed={"depth": 1}, seeds=1)
    S.run(P.noisy, g, store=tmp_path, progress=False)
    npz = sorted((tmp_path / "points").rglob("*.npz"))[0]
    npz.write_bytes(npz.read_bytes()[:20])                      # a truncated file (e.g. a disk fault)
    ds = S.run(P.noisy, g, store=tmp_path, progress=False)
    assert ds.attrs["reused"] == 1 and ds.attrs["computed"] == 1 and ds.attrs["n_failed"] == 0


def test_resolve_refuses_outside_limits():
    assert S.resolve("limits.kernels.critical_line") is limits.kernels.critical_line
    for bad in ("os.system", "builtins.eval", "subprocess.run", "limits.kernels.__import__", "limits;x",
                "limits.kernels._args"):
        with pytest.raises(ValueError):
            S.resolve(bad)
    with pytest.raises(ValueError, match="no attribute"):
        S.resolve("limits.kernels.no_such_function")
    assert S.resolve("sweep_points.noisy", allow=["sweep_points"]) is P.noisy


def test_progress_lines_when_not_a_terminal(monkeypatch):
    import io

    from limits.sweep.progress import SweepProgress

    monkeypatch.delenv("LIMITS_PROGRESS", raising=False)
    buf = io.StringIO()                                   # not a TTY → periodic lines, no bar
    p = SweepProgress(10, done=4, desc="sweep f", interval=0.0, stream=buf)
    assert p.bar is None and p.lines
    p.update(1)
    p.update(1, failed=1)
    p.close()
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("sweep f: 5/10 points (4 reused, 0 failed)") and "ETA" in lines[0]
    assert lines[-1].startswith("sweep f: 6/10 points (4 reused, 1 failed)")
    quiet = io.StringIO()
    p = SweepProgress(10, interval=60.0, stream=quiet)        # a short sweep prints nothing
    p.update(10)
    p.close()
    assert quiet.getvalue() == ""
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    assert not SweepProgress(3, stream=buf).lines
