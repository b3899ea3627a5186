"""The benchmark's plain-numpy reference agrees with limits.predict; neural-tangents is skipped cleanly;
the learning-curve figures are registered and their data are consistent."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import limits

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_predict.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_predict", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("act", ["erf", "relu"])
def test_plain_reference_equals_limits(bench, act):
    rng = np.random.default_rng(1)
    X, Xs = rng.standard_normal((30, 5)), rng.standard_normal((7, 5))
    Y = rng.standard_normal((30, 1))
    ts = np.array([0.5, 5.0, 50.0])
    m = limits.mlp(5, 3, activation=act, sigma_w2=1.5, sigma_b2=0.05)
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=ts, reduction="mean")
    mean, cov = bench.plain_predict(X, Y, Xs, ts, act, 3, 1.5, 0.05, 1.0 / 30)
    assert np.max(np.abs(mean - g.mean)) < 1e-10 and np.max(np.abs(cov - g.cov)) < 1e-10


def test_neural_tangents_skipped_cleanly(bench):
    import sys

    sys.path.insert(0, str(BENCH.parent))
    from _timing import Peer

    peer, why = Peer.start(bench.NT_SETUP, python="/nonexistent/python")
    assert peer is None and "skipped" in why and "/nonexistent/python" in why


def test_figures_registered():
    figs = limits.gallery.figures()
    for name in ("predict_digits_learning_curves", "predict_teacher_learning_curves"):
        assert figs[name].component == "predict"


def test_expected_test_loss_identity():
    """GDResult.test_loss at t = 0 is ½(‖Y*‖² + d_out tr K_**)/P_test (f_0 ~ GP(0, K))."""
    rng = np.random.default_rng(2)
    X, Xs = rng.standard_normal((9, 3)), rng.standard_normal((5, 3))
    Y, Ys = rng.standard_normal((9, 2)), rng.standard_normal((5, 2))
    m = limits.mlp(3, 1, d_out=2, activation="erf", sigma_b2=0.1)
    g = limits.predict.gradient_descent(m, X, Y, Xs, t=[0.0, 4.0])
    K = limits.kernels.kernel(m, Xs).nngp
    assert abs(g.test_loss(Ys)[0] - 0.5 * (np.sum(Ys ** 2) + 2 * np.trace(K)) / 5) < 1e-12
    r = g.mean[1] - Ys
    assert abs(g.test_loss(Ys)[1] - 0.5 * (np.sum(r ** 2) + 2 * np.trace(g.cov[1])) / 5) < 1e-12


@pytest.mark.slow
def test_teacher_figure_quick(tmp_path):
    r = limits.gallery.make("predict_teacher_learning_curves", quick=True, outdir=tmp_path)
    assert Path(r.paths["png"]).exists() and Path(r.paths["npz"]).exists()
