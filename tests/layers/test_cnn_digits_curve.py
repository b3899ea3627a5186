"""The full-digits CNN-GP learning curve (gallery ``layers_cnn_digits_full_set``): the kernel computed once and
sliced per training subset gives what the public predictions compute from scratch, the splits are nested and
disjoint from the test set, and the block of docs/architectures.rst is what the committed data say."""
from pathlib import Path

import numpy as np
import pytest

import limits
from limits.gallery import cnn_digits_curve as C

ROOT = Path(__file__).resolve().parents[2]
FIGS = ROOT / "figures"


@pytest.fixture(scope="module")
def small():
    """Flatten CNN-GP kernels (one call) of 26 digits ordered as the figure orders them: 8 test images first."""
    X, Y, labels = C.digits()
    order = np.r_[18:26, 0:18]
    X, Y, labels = X[order], Y[order], labels[order]
    net = C.cnn("flatten")
    k = C.timed_kernel(net, X, ("nngp", "ntk"))[0]
    return net, X, Y, labels, k


def test_sliced_kernel_posterior_is_nngp_posterior(small):
    net, X, Y, labels, k = small
    tr, te = np.array([11, 8, 25, 13, 17, 19, 10, 16, 22, 9, 20, 14]), np.arange(8)
    s = {"K": k.nngp[np.ix_(tr, tr)], "K_sx": k.nngp[np.ix_(te, tr)], "K_ss": k.nngp[np.ix_(te, te)]}
    p = limits.predict.posterior_from_kernels(s, net, X[tr], Y[tr], X[te], "auto", None, "test")
    q = limits.predict.nngp_posterior(net, X[tr], Y[tr], X[te], noise="auto")
    assert p.noise == pytest.approx(q.noise, rel=1e-8) and p.output_scale == pytest.approx(q.output_scale, rel=1e-8)
    assert np.max(np.abs(p.mean - q.mean)) < 1e-10 and np.max(np.abs(p.cov - q.cov)) < 1e-10
    assert p.log_marginal_likelihood == pytest.approx(q.log_marginal_likelihood, rel=1e-10)
    err, mse, noise, scale = C.posterior_curve(k.nngp, net, X, Y, labels, 8, tr[None], [12])[:, 0, 0]
    e, m = C._scores(q.mean, Y[te], labels[te])
    assert err == e and abs(mse - m) < 1e-10
    assert noise == pytest.approx(q.noise, rel=1e-8) and scale == pytest.approx(q.output_scale, rel=1e-8)


def test_flow_curve_is_gradient_descent_and_converges_to_ntk_regression(small):
    net, X, Y, labels, k = small
    rows = np.array([np.arange(8, 26), np.arange(25, 7, -1)])           # two nested orders of the 18 training images
    out = C.flow_curve(k.ntk, Y, labels, 8, rows, [10], [5.0, np.inf])   # (err|mse, P, repeat, t)
    for r in range(2):
        tr = rows[r, :10]
        g = limits.predict.gradient_descent(net, X[tr], Y[tr], X[:8], t=[5.0], reduction="mean", cov=False)
        err, mse = C._scores(g.mean[0], Y[:8], labels[:8])
        assert out[0, 0, r, 0] == err and abs(out[1, 0, r, 0] - mse) < 1e-12
        T = k.ntk
        mean_inf = T[np.ix_(np.arange(8), tr)] @ np.linalg.solve(T[np.ix_(tr, tr)], Y[tr])     # t = ∞: Θ_*X Θ⁻¹ Y
        e_inf, m_inf = C._scores(mean_inf, Y[:8], labels[:8])
        assert out[0, 0, r, 1] == e_inf and abs(out[1, 0, r, 1] - m_inf) < 1e-8 * max(1.0, m_inf)


def test_splits_are_nested_disjoint_and_seeded():
    idx, rows = C.splits(100, 60, 20, 30, 4, np.random.default_rng(1))
    idx2, rows2 = C.splits(100, 60, 20, 30, 4, np.random.default_rng(1))
    assert np.array_equal(idx, idx2) and np.array_equal(rows, rows2)
    assert len(set(idx)) == 60 and rows.shape == (4, 30)
    assert rows.min() >= 20 and rows.max() < 60                    # training positions never in the test set
    assert all(len(set(r)) == 30 for r in rows) and not np.array_equal(rows[0], rows[1])
    used, local = C.used_images(20, rows, 10)
    assert np.array_equal(used[:20], np.arange(20)) and np.array_equal(used[local], rows[:, :10])
    with pytest.raises(ValueError, match="exceeds the training pool of 40"):
        C.splits(100, 60, 20, 41, 2, np.random.default_rng(0))


def test_mean_se_has_no_error_bar_where_every_subset_is_the_pool():
    data = {"subsets": np.array([[5, 6, 7, 8], [6, 5, 8, 7], [7, 8, 5, 6]])}
    same = C.same_subsets(data, [2, 4])
    assert same.tolist() == [False, True]
    m, se = C.mean_se(np.array([[0.1, 0.2, 0.3], [0.4, 0.4, 0.4]]), same)
    assert np.allclose(m, [0.2, 0.4]) and se[0] == pytest.approx(0.1 / np.sqrt(3)) and np.isnan(se[1])


def test_readme_block_is_the_committed_data():
    payload = C.stored_payload(FIGS)
    block = (ROOT / C.PAGE).read_text().split(C.BEGIN, 1)[1].split(C.END, 1)[0].strip().splitlines()
    assert block == C.readme_lines(payload), f"{C.PAGE} is stale: python -m limits.gallery.cnn_digits_curve --write"
    d = payload["data"]
    assert not payload["quick"] and payload["params"]["images"] == 1797           # the full digits set
    assert d["cpu_s"] > d["curve_cpu_s"] > 0 and d["wall_s"] > 0
    test = set(np.asarray(d["test_index"]).tolist())
    assert len(test) == payload["params"]["P_test"]
    assert all(not test & set(row.tolist()) for row in np.asarray(d["subsets"]))
    for _, Ps, (err, se), (mse, _) in C.lines(d):
        assert np.all((err >= 0) & (err <= 1)) and np.all(mse > 0) and len(err) == len(Ps)
