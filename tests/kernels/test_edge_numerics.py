"""Kernels at the edges of the input range (docs/theory/kernels.rst §5): identical, collinear, nearly collinear and
nearly opposite rows, norms 1e-8 … 1e19, against the independent 50-digit reference of limits.devtools.highprec.

A compact grid runs by default (a few CPU-seconds); the dense grid — every case × norm × depth 1–3 × bias × route
(symmetric, cross, kernel_blocked, checkpointed nngp) and compositions — under ``python -m pytest -m exhaustive``.
The committed table (benchmarks/results/calibration/edge_numerics.json) is checked against this code."""
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import limits
from limits.devtools import highprec as hp

ROOT = Path(__file__).resolve().parents[2]
L = limits.layers
TOL = 1e-13            # relative, per NNGP / NTK entry (measured worst 1.2e-14 on the dense grid)


def rows(norm, case, d=3):
    rng = np.random.default_rng(0)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    v = rng.standard_normal(d)
    v -= (v @ u) * u
    v /= np.linalg.norm(v)
    z = rng.standard_normal(d)
    x = norm * u
    y = {"same": x.copy(), "2x": 2 * x, "-x": -x}.get(case)
    if y is None:
        y = norm * (math.cos(case) * u + math.sin(case) * v)
    return np.stack([x, y, norm * z])


def worst(k_nngp, k_ntk, Kr, Tr):
    P = len(Kr)
    return max(max(hp.relative_error(k_nngp[i, j], Kr[i][j]), hp.relative_error(k_ntk[i, j], Tr[i][j]))
               for i in range(P) for j in range(P))


def mlp_error(act, depth, sb, norm, case, route="sym"):
    X = rows(norm, case)
    sw = 2.0 if act == "relu" else 1.0
    m = limits.mlp(3, depth, activation=act, sigma_w2=sw, sigma_b2=sb)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.filterwarnings("error", ".*encountered in", RuntimeWarning)   # no 0/0, no overflow on the way
        if route == "sym":
            k = limits.kernels.kernel(m, X)
            kn, kt = k.nngp, k.ntk
        elif route == "cross":
            k = limits.kernels.kernel(m, X, X)
            kn, kt = k.nngp, k.ntk
        elif route == "blocked":
            k = limits.kernels.kernel_blocked(m, X, block=2, progress=False)
            kn, kt = k.nngp, k.ntk
        else:
            r = limits.kernels.nngp(X, model=m, keep=route)
            kn, kt = r.K_out, r.Theta_out
    assert not [w for w in seen if "overflow" in str(w.message)], [str(w.message) for w in seen]   # no false alarm
    Kr, Tr, _ = hp.mlp(X, act, depth, sigma_w2=sw, sigma_b2=sb)
    return worst(kn, kt, Kr, Tr)


def serial_error(act, sb, norm, case, ln=False):
    layers = [L.Dense(2.0, sb), L.Activation(act), L.Dense(1.5, sb)]
    if ln:
        layers = [L.Dense(2.0, sb), L.Activation(act), L.Dense(1.0, sb), L.LayerNorm(), L.Activation(act),
                  L.Dense(1.0, sb)]
    X = rows(norm, case)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = limits.kernels.kernel(limits.serial(*layers), X)
    Kr, Tr = hp.composition(X, layers)
    return worst(k.nngp, k.ntk, Kr, Tr)


COMPACT = [(a, c, n) for a in ("relu", "erf", "gelu") for c, n in
           (("same", 1e7), (1e-12, 1e19), (1e-6, 1.7e9), (math.pi - 1e-6, 1e-8), ("2x", 1.7e9), ("-x", 1e19))]


@pytest.mark.parametrize("act,case,norm", COMPACT)
def test_mlp_edges_against_the_50_digit_reference(act, case, norm):
    assert mlp_error(act, 2, 0.1, norm, case) <= TOL


@pytest.mark.parametrize("act", ["relu", "erf", "gelu"])
def test_composition_edges_against_the_50_digit_reference(act):
    assert serial_error(act, 0.0, 1e19, "-x") <= TOL
    assert serial_error(act, 0.1, 1.7e9, 1e-12, ln=True) <= TOL


def test_identical_rows_of_large_norm_have_equal_entries_and_no_false_overflow():
    """The issue's case: two identical rows of norm 1e7 (erf NTK was [[7226827.7, 7620791.4], …]); rows like Unix
    times (NTK was +inf with an 'overflowed' warning)."""
    for X in (np.ones((2, 3)) * 1e7 / np.sqrt(3), np.array([[1.7e9], [1.7e9]]), np.array([[1.7e9], [1.7e9 + 3600.0]])):
        m = limits.mlp(X.shape[1], 1, activation="erf")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            k = limits.kernels.kernel(m, X)
        assert np.all(np.isfinite(k.ntk)) and not k.diagnostics["warnings"]
        if np.array_equal(X[0], X[1]):
            assert k.ntk[0, 1] == k.ntk[0, 0] == k.ntk[1, 1] and k.nngp[0, 1] == k.nngp[0, 0]
        Kr, Tr, _ = hp.mlp(X, "erf", 1)
        assert worst(k.nngp, k.ntk, Kr, Tr) <= TOL


def test_deep_ordered_phase_pairs_found_at_every_layer():
    """relu with σ_w² = 1, σ_b² = 1: every correlation → 1 with depth (1 − c below double resolution at 60 layers),
    pairs that were not delicate at the read-in: the NTK was 3e-10 off, now exact through every route."""
    X = np.random.default_rng(1).standard_normal((3, 4))
    m = limits.mlp(4, 60, activation="relu", sigma_w2=1.0, sigma_b2=1.0)
    Kr, Tr, _ = hp.mlp(X, "relu", 60, sigma_w2=1.0, sigma_b2=1.0, dps=30)
    for k in (limits.kernels.kernel(m, X), limits.kernels.kernel(m, X[:2], X[1:])):
        P1, P2 = k.ntk.shape
        off = 0 if P1 == P2 == 3 else 1
        assert max(hp.relative_error(k.ntk[i, j], Tr[i][j + off]) for i in range(P1) for j in range(P2)) <= TOL


def test_read_in_overflow_is_refused_naming_the_input_scale():
    X = np.random.default_rng(0).standard_normal((3, 4)) * 1e155
    with pytest.raises(ValueError, match=r"X1: the read-in kernel .*max \|X1\| = \S+"):
        limits.kernels.kernel(limits.serial(L.Dense(), L.Activation("relu"), L.Dense()), X)
    with pytest.raises(ValueError, match=r"read-in kernel K0 .*max \|X\|"):
        limits.kernels.kernel(limits.mlp(4, 1), X)


def test_committed_edge_table_is_this_code_and_meets_the_tolerance():
    """benchmarks/results/calibration/edge_numerics.json: every covered row's "after" is this code's value and
    within TOL of the reference; the rows marked NOT COVERED (Conv compositions) are where it says; the docs table
    (docs/theory/kernels.rst §5) is the data's."""
    from benchmark_scripts import load

    m = load("edge_numerics")
    data = json.loads(m.OUT.read_text())
    specs = {r["case"]: r for r in data["rows"]}
    for label, spec, X in m.cases():
        K, T = m.compute(spec, X)
        for r in (r for r in data["rows"] if r["case"] == label):
            q, ij = r["quantity"].split("[")
            i, j = map(int, ij.rstrip("]").split(","))
            assert (K if q == "K_out" else T)[i, j] == pytest.approx(r["after"], rel=1e-14, abs=0), (label, q)
            if label.startswith("NOT COVERED"):
                continue
            assert r["rel_after"] <= TOL, (label, r["quantity"])
    assert any(k.startswith("NOT COVERED") for k in specs)
    doc = (ROOT / "docs" / "theory" / "kernels.rst").read_text()
    block = doc.split(m.BEGIN, 1)[1].split(m.END, 1)[0].strip().splitlines()
    assert [line.strip() for line in block if line.strip()] == [
        line.strip() for line in m.rst_table(data) if line.strip()], "python benchmarks/edge_numerics.py --write"


# ------------------------------------------------------------------ the dense grid
DENSE = [(a, d, sb, n, c) for a in ("relu", "erf", "gelu", "linear") for d in (1, 2, 3) for sb in (0.0, 0.1)
         for n in (1e-8, 1.0, 1e7, 1.7e9, 1e19) for c in ("same", "2x", "-x", 1e-12, 1e-6, 1e-3, math.pi - 1e-6)]


@pytest.mark.exhaustive
@pytest.mark.parametrize("route", ["sym", "cross", "blocked", "checkpoint"])
def test_dense_grid_every_route(route):
    bad = [(a, d, sb, n, c, e) for a, d, sb, n, c in DENSE if (e := mlp_error(a, d, sb, n, c, route)) > TOL]
    assert not bad, bad[:5]


@pytest.mark.exhaustive
def test_dense_grid_compositions():
    bad = [(a, sb, n, c, ln, e) for a in ("relu", "erf", "gelu") for sb in (0.0, 0.1) for ln in (False, True)
           for n in (1e-8, 1.0, 1e7, 1.7e9, 1e19) for c in ("same", "2x", "-x", 1e-12, 1e-6, 1e-3, math.pi - 1e-6)
           if (e := serial_error(a, sb, n, c, ln)) > TOL]
    assert not bad, bad[:5]
