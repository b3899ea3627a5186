"""TP/DTP with linear feedback at the ridge fixed point (seed 003 App. C.1)."""
import numpy as np
import pytest

import limits.finite as F
from limits.finite import data, tp


def test_ridge_fixed_point_is_stationary_both_sides():
    rng = np.random.default_rng(0)
    for B, n_next, n_prev in ((4, 7, 5), (9, 3, 6)):
        A_next = rng.standard_normal((2, B, n_next))
        A_prev = rng.standard_normal((2, B, n_prev))
        mu = 0.3
        Q = tp.ridge_feedback(A_next, A_prev, mu)                       # (S, n_prev, n_next)
        # ∇_Q [‖Q a_next − a_prev‖² + μ‖Q‖²] = 2 (Q A_nextᵀ − A_prevᵀ) A_next + 2 μ Q = 0
        grad = np.matmul(np.matmul(Q, A_next.transpose(0, 2, 1)) - A_prev.transpose(0, 2, 1), A_next) + mu * Q
        assert np.max(np.abs(grad)) < 1e-10 * max(1.0, np.max(np.abs(Q)))
        # seed formula Q* = h_{l−1}(h_lᵀh_l + μI)⁻¹h_lᵀ in column convention
        for s in range(2):
            h_prev, h_next = A_prev[s].T, A_next[s].T
            Qs = h_prev @ np.linalg.solve(h_next.T @ h_next + mu * np.eye(B), h_next.T)
            np.testing.assert_allclose(Q[s], Qs, rtol=1e-10, atol=1e-12)


def test_tp_equals_dtp_in_the_ridgeless_limit():
    # S.133: when every representation (incl. the output) has full row rank B, TP targets → DTP
    # targets as μ → 0 (Q* reconstructs a_{k−1} exactly); here B = 4 ≤ d_out = 5 ≤ width
    net = F.mlp(6, 12, 2, d_out=5, activation="tanh")
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((4, 6)), rng.standard_normal((4, 5))
    w = F.init_weights(net, 2, seed=2)
    fwd = F.forward(net, w, X)
    _, g = F.mse_loss(fwd.f, Y)
    d_tp, _ = tp.targets(net, fwd, g, beta=0.5, mu=0.0, variant="tp")
    d_dtp, _ = tp.targets(net, fwd, g, beta=0.5, mu=0.0, variant="dtp")
    for a, b in zip(d_tp, d_dtp):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


def test_dtp_penultimate_target_matches_seed_formula():
    # â_{L−1} − a_{L−1} = −β a_{L−1}ᵀ... (S.130 with l = L−1): −β h_{L−1} (h_Lᵀh_L + μ)⁻¹ h_Lᵀ δ_L
    net = F.mlp(5, 8, 1, d_out=2, activation="erf")
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((3, 5)), rng.standard_normal((3, 2))
    w = F.init_weights(net, 1, seed=4)
    fwd = F.forward(net, w, X)
    _, g = F.mse_loss(fwd.f, Y)
    mu, beta = 0.1, 0.7
    diffs, _ = tp.targets(net, fwd, g, beta=beta, mu=mu, variant="dtp")
    hL = fwd.f[0].T                       # d_out × B (columns = samples)
    hLm1 = fwd.inp["out"][0].T            # N × B
    delta = g[0].T                        # d_out × B
    expected = -beta * hLm1 @ np.linalg.solve(hL.T @ hL + mu * np.eye(3), hL.T) @ delta
    np.testing.assert_allclose(diffs[-1][0], expected.T, rtol=1e-10, atol=1e-12)


def test_dtp_training_reduces_loss_and_readout_is_bp():
    X, Y = data.toy_task(seed=0, labels="teacher")
    X = X / np.sqrt(40)
    net = F.mlp(40, 64, 2, d_out=1, activation="tanh", lr=0.2)
    w = F.init_weights(net, 2, seed=1)
    r = F.train(net, X, Y, 40, weights=w, algorithm="dtp", tp_beta=0.5, tp_mu=1e-3, record_every=20)
    assert np.all(r.loss[-1] < 0.7 * r.loss[0])
    # one step: read-out update equals the BP read-out update
    r1 = F.train(net, X, Y, 1, weights=w, algorithm="dtp", tp_beta=0.5, tp_mu=1e-3)
    rb = F.train(net, X, Y, 1, weights=w)
    np.testing.assert_allclose(r1.final_weights().W["out"], rb.final_weights().W["out"], rtol=1e-13)
    assert not np.allclose(r1.final_weights().W["1.1"], rb.final_weights().W["1.1"])


def test_tp_bad_input():
    X, Y = data.toy_task(seed=0)
    with pytest.raises(ValueError, match="net"):
        F.train(F.resnet(40, 8, 2), X, Y, 1, seed=0, algorithm="tp")
    with pytest.raises(ValueError, match="algorithm"):
        F.train(F.mlp(40, 8, 1), X, Y, 1, seed=0, algorithm="hebb")
    with pytest.raises(ValueError, match="variant"):
        tp.targets(F.mlp(40, 8, 1), None, None, variant="x")
