"""``kernel=``: a kernel computed once (limits.kernels.kernel(model, X_all)) is reused by every prediction —
equal to the predictions that compute their own, never recomputed, and refused when it belongs to another
model or other inputs (limits/precomputed.py)."""
import numpy as np
import pytest

import limits
import limits.predict as P


@pytest.fixture(scope="module")
def task():
    rng = np.random.default_rng(11)
    X = rng.standard_normal((12, 3))
    Xs = rng.standard_normal((5, 3))
    Y = np.stack([np.sin(X[:, 0]), np.cos(X[:, 1])], axis=1)
    m = limits.mlp(3, 2, d_out=2, activation="erf", sigma_w2=1.4, sigma_b2=0.1, lr=0.4)
    return m, X, Y, Xs, limits.kernels.kernel(m, np.vstack([X, Xs]))


def _rel(a, b):
    return np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(np.max(np.abs(np.asarray(b))), 1e-300)


def _never_recomputed(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the kernels were recomputed")

    monkeypatch.setattr(P, "_kernels", boom)
    monkeypatch.setattr(limits.kernels.blocked, "kernel_blocked", boom)


def test_every_prediction_reuses_the_kernel(task, monkeypatch):
    m, X, Y, Xs, k = task
    refs = {"post": P.nngp_posterior(m, X, Y, Xs, noise=0.01), "auto": P.nngp_posterior(m, X, Y, Xs, noise="auto"),
            "gd": P.gradient_descent(m, X, Y, Xs, t=[1.0, np.inf]),
            "ml": P.max_likelihood(m, X, Y), "mln": P.max_likelihood_noise(m, X, Y),
            "reg": P.kernel_regression(m, X, Y, Xs, noise=0.01),
            "regntk": P.kernel_regression(m, X, Y, Xs, kernel="ntk")}
    _never_recomputed(monkeypatch)
    got = {"post": P.nngp_posterior(m, X, Y, Xs, noise=0.01, kernel=k),
           "auto": P.nngp_posterior(m, X, Y, Xs, noise="auto", kernel=k),
           "gd": P.gradient_descent(m, X, Y, Xs, t=[1.0, np.inf], kernel=k),
           "ml": P.max_likelihood(m, X, Y, kernel=k), "mln": P.max_likelihood_noise(m, X, Y, kernel=k),
           "reg": P.kernel_regression(m, X, Y, Xs, noise=0.01, precomputed=k),
           "regntk": P.kernel_regression(m, X, Y, Xs, kernel="ntk", precomputed=k)}
    for name in ("post", "auto"):                       # the same kernels as the joint recursion: identical
        assert got[name].equals(refs[name]), name
    assert got["gd"].equals(refs["gd"])
    assert got["ml"] == pytest.approx(refs["ml"], rel=1e-12) and got["mln"] == pytest.approx(refs["mln"], rel=1e-12)
    for name in ("reg", "regntk"):                      # tiles vs the joint kernel: equal to rounding
        assert _rel(got[name].mean, refs[name].mean) < 1e-10 and _rel(got[name].var, refs[name].var) < 1e-10
        assert got[name].diagnostics["precomputed"]


def test_a_pool_of_inputs_in_any_order_and_a_saved_kernel(task, tmp_path):
    """The kernel of a larger pool, rows shuffled, loaded back from .npz + .json: the same predictions."""
    m, X, Y, Xs, _ = task
    rng = np.random.default_rng(1)
    pool = np.vstack([X, Xs, rng.standard_normal((6, 3))])[rng.permutation(23)]
    limits.kernels.kernel(m, pool).save(tmp_path / "K")
    k = limits.results.load_result(tmp_path / "K")
    a = P.gradient_descent(m, X, Y, Xs, t=[0.5, np.inf], kernel=k)
    b = P.gradient_descent(m, X, Y, Xs, t=[0.5, np.inf])
    assert _rel(a.mean, b.mean) < 1e-12 and _rel(a.cov, b.cov) < 1e-12
    # d_out and lr do not change the kernels: another d_out / lr reuses the same kernel
    c = P.nngp_posterior(m.with_(d_out=1, lr=0.01), X, Y[:, 0], Xs, noise=0.1, kernel=k)
    assert _rel(c.mean[:, 0], P.nngp_posterior(m, X, Y, Xs, noise=0.1).mean[:, 0]) < 1e-12


def test_a_composition(tmp_path):
    L = limits.layers
    net = limits.serial(L.Conv((3,), "SAME", sigma_w2=2.0, sigma_b2=0.05), L.Activation("relu"), L.GlobalAvgPool(),
                        L.Dense(sigma_w2=1.0, sigma_b2=0.05))
    rng = np.random.default_rng(2)
    X, Xs = rng.standard_normal((8, 5, 2)), rng.standard_normal((3, 5, 2))
    Y = rng.standard_normal((8, 2))
    k = limits.kernels.kernel(net, np.concatenate([X, Xs]))
    a = P.nngp_posterior(net, X, Y, Xs, noise=0.05, kernel=k)
    b = P.nngp_posterior(net, X, Y, Xs, noise=0.05)
    assert _rel(a.mean, b.mean) < 1e-12 and _rel(a.cov, b.cov) < 1e-12
    g = P.gradient_descent(net, X, Y, Xs, t=[2.0, np.inf], kernel=k)
    assert _rel(g.mean, P.gradient_descent(net, X, Y, Xs, t=[2.0, np.inf]).mean) < 1e-12
    other = limits.serial(L.Conv((3,), "SAME", sigma_w2=2.0, sigma_b2=0.05), L.Activation("erf"), L.GlobalAvgPool(),
                          L.Dense(sigma_w2=1.0, sigma_b2=0.05))
    with pytest.raises(ValueError, match="another model"):
        P.nngp_posterior(other, X, Y, Xs, noise=0.05, kernel=k)


def test_a_kernel_of_something_else_is_refused(task):
    m, X, Y, Xs, k = task
    cases = [
        (dict(model=m.with_(sigma_w2=1.5)), "another model \\(differing: sigma_w2\\)"),
        (dict(model=m.with_(depth=3)), "another model \\(differing: depth\\)"),
        (dict(X_test=Xs + np.where(np.arange(Xs.size).reshape(Xs.shape) == 7, 1e-15, 0.0)), "row 2 of X_test"),
        (dict(X_train=np.vstack([X, Xs[:1] * 2])), "row 12 of X_train"),
        (dict(kernel=limits.kernels.kernel(m, X, Xs)), "symmetric kernel"),
        (dict(kernel=limits.kernels.kernel(m, np.vstack([X, Xs]), get="nngp"), gd=True), "holds no NTK"),
        (dict(kernel="nngp"), "takes a kernel result"),
        (dict(kernel=np.eye(17)), "must be the result of limits.kernels.kernel"),
    ]
    for change, match in cases:
        kw = {"model": m, "X_train": X, "X_test": Xs, "kernel": k, **change}
        Yk = Y if kw["X_train"].shape[0] == 12 else np.vstack([Y, Y[:1]])
        with pytest.raises(ValueError, match=match):
            if change.get("gd"):
                P.gradient_descent(kw["model"], kw["X_train"], Yk, kw["X_test"], t=1.0, kernel=kw["kernel"])
            else:
                P.nngp_posterior(kw["model"], kw["X_train"], Yk, kw["X_test"], noise=0.1, kernel=kw["kernel"])
    with pytest.raises(ValueError, match="precomputed="):
        P.kernel_regression(m, X, Y, Xs, kernel=k)
    with pytest.raises(ValueError, match="store="):
        P.kernel_regression(m, X, Y, Xs, noise=0.1, solver="cg", precomputed=k)
    own = limits.mlp(3, 2, activation=lambda x: np.tanh(x))       # a user activation: nothing could verify it
    with pytest.raises(ValueError, match="user-defined activation"):
        P.nngp_posterior(own, X, Y[:, 0], Xs, noise=0.1, kernel=limits.kernels.kernel(own, np.vstack([X, Xs])))
