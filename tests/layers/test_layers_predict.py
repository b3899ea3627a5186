"""Predictions for compositions, and the theories that refuse them."""
import numpy as np
import pytest

import limits
from limits.model import ModelError

L = limits.layers


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((7, 4, 4, 2)), rng.standard_normal((7, 2)), rng.standard_normal((3, 4, 4, 2))


CNN = limits.serial(L.Conv((3, 3), "SAME", 2.0, 0.1), L.Activation("relu"), L.Conv((3, 3), "CIRCULAR", 2.0, 0.1),
                    L.Activation("erf"), L.GlobalAvgPool(), L.Dense(1.0, 0.05))


def test_nngp_posterior_of_a_composition_is_the_gp_posterior():
    X, Y, Xs = _data()
    p = limits.predict.nngp_posterior(CNN, X, Y, Xs, noise=1e-2)
    K = limits.kernels.kernel(CNN, X).nngp
    Ksx = limits.kernels.kernel(CNN, Xs, X).nngp
    Kss = limits.kernels.kernel(CNN, Xs).nngp
    A = np.linalg.solve(K + 1e-2 * np.eye(7), np.column_stack([Y, Ksx.T]))
    assert np.max(np.abs(p.mean - Ksx @ A[:, :2])) < 1e-12
    assert np.max(np.abs(p.cov - (Kss - Ksx @ A[:, 2:]))) < 1e-12
    r = limits.predict.kernel_regression(CNN, X, Y, Xs, kernel="nngp", noise=1e-2)
    assert np.max(np.abs(r.mean - p.mean)) < 1e-12 and np.max(np.abs(r.var - p.var)) < 1e-12
    assert L.Serial.from_dict(p.model) == CNN


def test_gradient_descent_of_a_composition_converges_to_ntk_regression():
    X, Y, Xs = _data(1)
    g = limits.predict.gradient_descent(CNN, X, Y, Xs, t=[0.0, 1e8])
    T = limits.kernels.kernel(CNN, X).ntk
    Tsx = limits.kernels.kernel(CNN, Xs, X).ntk
    assert np.max(np.abs(g.mean[0])) == 0.0
    assert np.max(np.abs(g.mean[-1] - Tsx @ np.linalg.solve(T, Y))) < 1e-8
    r = limits.predict.kernel_regression(CNN, X, Y, Xs, kernel="ntk")
    assert np.max(np.abs(r.mean - g.mean[-1])) < 1e-8 and np.max(np.abs(r.var - g.var[-1])) < 1e-8


def test_model_and_its_composition_predict_alike():
    rng = np.random.default_rng(2)
    X, Y, Xs = rng.standard_normal((8, 5)), rng.standard_normal(8), rng.standard_normal((4, 5))
    m = limits.resnet(5, 3, activation="erf", sigma_w2=1.2, sigma_b2=0.1, rho=0.7)
    a = limits.predict.gradient_descent(m, X, Y, Xs, t=[1.0, 10.0])
    b = limits.predict.gradient_descent(m.to_serial(), X, Y, Xs, t=[1.0, 10.0])
    assert np.max(np.abs(a.mean - b.mean)) < 1e-10 and np.max(np.abs(a.cov - b.cov)) < 1e-10


@pytest.mark.parametrize("call, name", [
    (lambda m, X: limits.nfd.kernel_ode(X, model=m), "NFD"),
    (lambda m, X: limits.nfd.particles(X, model=m), "NFD"),
    (lambda m, X: limits.kernels.response(X, model=m, width=16), "response functions"),
    (lambda m, X: limits.kernels.kernel_fluctuations(X, model=m, width=16), "fluctuation"),
    (lambda m, X: limits.kernels.nngp(X, model=m), "limits.kernels.kernel"),
])
def test_mlp_only_theories_refuse_compositions(call, name):
    m = limits.serial(L.Dense(), L.Activation("erf"), L.Dense())
    X = np.random.default_rng(0).standard_normal((4, 3))
    with pytest.raises(ModelError, match=f"composition of layers.*{name}"):
        call(m, X)


def test_cnn_learning_curve_figure_registered_and_stored_data_consistent():
    import json
    from pathlib import Path

    figs = limits.gallery.figures()
    assert "layers_cnn_digits_learning_curves" in figs
    root = Path(__file__).resolve().parents[2] / "figures"
    d = limits.gallery.load_data("layers_cnn_digits_learning_curves", outdir=root)["data"]
    meta = json.loads((root / "layers_cnn_digits_learning_curves.json").read_text())
    assert d["finite_P"].shape == (len(d["widths"]), len(d["P_points"]))
    assert np.all(np.isfinite(d["ntk_P"])) and np.all(d["nngp_P"] < d["ntk_P"])   # init variance adds to the loss
    assert meta["figure"] == "layers_cnn_digits_learning_curves"
