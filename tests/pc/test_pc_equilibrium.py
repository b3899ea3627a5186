"""Closed-form PC equilibrium (docs/theory/pc.rst §2): reference values, telescoped vs block Cholesky vs dense
solve, seed forms (seed 000 Eq. 6/25/104, seed 001 Eq. 32, seed 003 Thm 4.2/B.3), bad input."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import limits
from limits import pc


def rand_net(rng, dims, scale=1.0):
    return [scale * rng.standard_normal((dims[i + 1], dims[i])) / np.sqrt(dims[i]) for i in range(len(dims) - 1)]


# ----------------------------------------------------------------------------- reference values
def test_reference_scalar_chain_L2():
    e = pc.equilibrium([[[1.0]], [[2.0]]], [[1.0]], [[1.0]])
    assert abs(e.energy - 0.1) < 1e-14
    assert abs(e.s - 5.0) < 1e-14


def test_reference_scalar_chain_L3():
    W = [[[1.0]], [[2.0]], [[1.5]]]
    e = pc.equilibrium(W, [[1.0]], [[1.0]])
    assert abs(e.s - 12.25) < 1e-13
    assert abs(e.energy - 8.0 / 49.0) < 1e-14           # 0.1632653...
    assert abs(e.energy - 0.1632653) < 1e-7
    np.testing.assert_allclose([e.z[0][0, 0], e.z[1][0, 0]], [25 / 49, 38 / 49], atol=1e-14)
    np.testing.assert_allclose(pc.activity_hessian(W, dense=True), [[5, -2], [-2, 3.25]], atol=0)
    # sign convention: ε_l = z_l − prediction_l, r = y − f; here r = −2 so all errors are negative
    assert all(err[0, 0] < 0 for err in e.errors)
    np.testing.assert_allclose(e.errors[-1][0, 0], -2 / 12.25, atol=1e-15)
    assert abs(e.mse / e.energy - e.s) < 1e-12          # F* = MSE / s (seed 000 Eq. 5)


# ----------------------------------------------------------------------------- three routes agree
CONFIGS = [
    dict(dims=[3, 5, 5, 5, 2]),
    dict(dims=[3, 6, 6, 6, 6, 1], skips="1-skip", multipliers=[1, 0.5, 0.5, 0.5, 0.3]),
    dict(dims=[2, 4, 4, 4, 4, 4, 3], skips=2),
    dict(dims=[3, 5, 5, 5, 2], layer_weights=[0.5, 2.0, 1.5, 3.0]),
    dict(dims=[3, 5, 5, 5, 2], nudge=0.7),
    dict(dims=[3, 5, 4, 6, 2], biases=True),
    dict(dims=[3, 4, 4, 4, 4, 2], skips=[0, 1, 1, 0, 0], layer_weights=[1, 2, 1, 0.5, 4], nudge=2.0),
]


@pytest.mark.parametrize("cfg", CONFIGS)
def test_telescoped_equals_block_and_dense(cfg):
    rng = np.random.default_rng(1)
    cfg = dict(cfg)
    dims = cfg.pop("dims")
    W = rand_net(rng, dims, 1.3)
    if cfg.pop("biases", False):
        cfg["biases"] = [rng.standard_normal(d) for d in dims[1:]]
    B = 7
    X = rng.standard_normal((B, dims[0]))
    Y = rng.standard_normal((B, dims[-1]))
    e1 = pc.equilibrium(W, X, Y, **cfg)
    e2 = pc.equilibrium(W, X, Y, method="block", **cfg)
    assert e2.converged
    assert abs(e1.energy - e2.energy) <= 1e-10 * max(1, e1.energy)
    for a, b in zip(e1.z, e2.z):
        np.testing.assert_allclose(a, b, atol=1e-10, rtol=0)
    for a, b in zip(e1.errors, e2.errors):
        np.testing.assert_allclose(a, b, atol=1e-10, rtol=0)
    # dense solve of H_z z = b (small sizes only)
    net = pc.make_net(W, cfg.get("multipliers"), cfg.get("skips"), cfg.get("layer_weights"), cfg.get("biases"))
    lay = pc.layout(net, nudge=cfg.get("nudge"))
    Hd = pc.activity_hessian(W, cfg.get("multipliers"), cfg.get("skips"), cfg.get("layer_weights"),
                             nudge=cfg.get("nudge"), dense=True)
    zd = np.linalg.solve(Hd, pc.rhs(net, lay, X, Y))
    np.testing.assert_allclose(np.concatenate([z.T for z in e1.z] + ([e1.z_out.T] if e1.z_out is not None else [])),
                               zd, atol=1e-10)
    # stationarity: gradient of the energy vanishes at z*
    F0 = pc.energy(W, X, Y, e1.z, z_out=e1.z_out, **{k: v for k, v in cfg.items()})
    assert abs(F0 - e1.energy) < 1e-12 * max(1, F0)
    # matrix-free operator equals sparse matrix
    v = rng.standard_normal(lay.n)
    np.testing.assert_allclose(pc.hessian_operator(net, lay) @ v, Hd @ v, atol=1e-12)


def test_energy_is_minimum_along_random_directions():
    rng = np.random.default_rng(2)
    W = rand_net(rng, [3, 5, 5, 2])
    X, Y = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    e = pc.equilibrium(W, X, Y)
    for _ in range(5):
        dz = [0.1 * rng.standard_normal(z.shape) for z in e.z]
        assert pc.energy(W, X, Y, [z + d for z, d in zip(e.z, dz)]) > e.energy


def test_activity_decay_block_solve_and_shift():
    rng = np.random.default_rng(3)
    W = rand_net(rng, [3, 5, 5, 5, 2])
    X, Y = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    e = pc.equilibrium(W, X, Y, decay=0.5)
    H0 = pc.activity_hessian(W, dense=True)
    H1 = pc.activity_hessian(W, decay=0.5, dense=True)
    np.testing.assert_allclose(np.linalg.eigvalsh(H1), np.linalg.eigvalsh(H0) + 0.5, atol=1e-12)
    net = pc.make_net(W)
    lay = pc.layout(net, decay=0.5)
    zd = np.linalg.solve(H1, pc.rhs(net, lay, X, Y))
    np.testing.assert_allclose(np.concatenate([z.T for z in e.z]), zd, atol=1e-10)
    assert abs(pc.energy(W, X, Y, e.z, decay=0.5) - e.energy) < 1e-12


# ----------------------------------------------------------------------------- seed forms
def test_seed000_eq6_and_eq5():
    rng = np.random.default_rng(4)
    W = rand_net(rng, [4, 6, 6, 6, 1], 1.5)
    X, Y = rng.standard_normal((9, 4)), rng.standard_normal((9, 1))
    e = pc.equilibrium(W, X, Y)
    assert abs(e.s - pc.s_seed000_eq6(W)) < 1e-12 * e.s
    assert abs(e.energy - e.mse / pc.s_seed000_eq6(W)) < 1e-12


def test_seed000_eq25_multipliers():
    rng = np.random.default_rng(5)
    N, D, gamma0 = 16, 5, 1.3
    a_exp = [0.0, 0.5, 0.5, 0.5]
    W = [rng.standard_normal((N, D)), rng.standard_normal((N, N)), rng.standard_normal((N, N)),
         rng.standard_normal((1, N))]
    gamma = gamma0 * np.sqrt(N)
    mult = [N ** -a_exp[0] / np.sqrt(D)] + [N ** -a for a in a_exp[1:]]
    mult[-1] /= gamma
    assert abs(pc.s_theta(W, mult) - pc.s_seed000_eq25(W, a_exp, N, gamma)) < 1e-12


def test_seed000_eq104_resnet():
    rng = np.random.default_rng(6)
    N, D, L, alpha, gamma0 = 12, 4, 6, 0.5, 0.8
    W = [rng.standard_normal((N, D))] + [rng.standard_normal((N, N)) for _ in range(L - 2)] + [rng.standard_normal((1, N))]
    mult = [1 / np.sqrt(D)] + [1 / (L**alpha * np.sqrt(N))] * (L - 2) + [1 / (gamma0 * N)]
    assert abs(pc.s_theta(W, mult, skips="1-skip") - pc.s_seed000_eq104(W, N, alpha, gamma0)) < 1e-12


def test_seed001_eq32_and_eq31():
    rng = np.random.default_rng(7)
    N, L = 8, 6
    W = [rng.standard_normal((N, 3))] + [rng.standard_normal((N, N)) for _ in range(L - 2)] + [rng.standard_normal((2, N))]
    mult = [3 ** -0.5] + [(N * L) ** -0.5] * (L - 2) + [1 / N]      # μPC (seed 001 Table 1)
    X, Y = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    e = pc.equilibrium(W, X, Y, mult, "1-skip")
    S32 = pc.S_seed001_eq32(W, mult)
    np.testing.assert_allclose(e.S, S32, atol=1e-12)
    F31 = np.mean([0.5 * r @ np.linalg.solve(S32, r) for r in e.residual])
    assert abs(e.energy - F31) < 1e-12


@pytest.mark.parametrize("beta", [None, 0.3, 5.0])
def test_seed003_theorem42_and_B3(beta):
    rng = np.random.default_rng(8)
    dims = [3, 6, 5, 7, 2]
    W = rand_net(rng, dims, 1.2)
    g = [0.7, 1.5, 2.0, 3.0]
    x, y = rng.standard_normal(3), rng.standard_normal(2)
    fp = pc.seed003_fixed_point(W, x, y, g, beta)
    e = pc.equilibrium(W, x[None], y[None], layer_weights=g, nudge=beta)
    for l in range(4):
        np.testing.assert_allclose(fp.e[l][:, 0], e.errors[l][0], atol=1e-12)
    for l in range(3):
        np.testing.assert_allclose(fp.v[l][:, 0], e.z[l][0], atol=1e-12)
    # the closed form in S is (λ_L S) = I + C_γ (+ γ_L/β I)
    expect = fp.C + np.eye(2) + (g[-1] / beta * np.eye(2) if beta else 0)
    np.testing.assert_allclose(g[-1] * e.S, expect, atol=1e-12)
    # pinned sign: with e_l = v_l − W_l v_{l−1}, e*_L = (I + C_γ)⁻¹ (y − f), the printed Eq. 15
    # (W_{L:1}x − y) has the opposite sign
    f = e.forward[-1][0]
    if beta is None:
        np.testing.assert_allclose(fp.e[-1][:, 0], np.linalg.solve(expect, y - f), atol=1e-12)
        np.testing.assert_allclose(fp.e[-1][:, 0], y - W[-1] @ e.z[-1][0], atol=1e-12)


def test_seed003_eq16_printed_upper_limit_is_off_by_one():
    """Eq. 16 as printed sums i = 2..l−1; that misses a term once l ≥ 2 (checked against H_z⁻¹b)."""
    rng = np.random.default_rng(9)
    W = rand_net(rng, [2, 4, 4, 4, 1], 1.5)
    g = [1.0, 1.0, 1.0, 1.0]
    x, y = rng.standard_normal(2), rng.standard_normal(1)
    e = pc.equilibrium(W, x[None], y[None])
    fp = pc.seed003_fixed_point(W, x, y, g)
    u = np.linalg.solve(np.eye(1) + fp.C, y - W[3] @ W[2] @ W[1] @ W[0] @ x)
    l = 2
    printed = W[1] @ W[0] @ x + (W[3] @ W[2]).T @ u        # i-sum empty for l = 2 as printed
    assert np.max(np.abs(printed - e.z[1][0])) > 1e-3
    np.testing.assert_allclose(fp.v[l - 1][:, 0], e.z[l - 1][0], atol=1e-12)


# ----------------------------------------------------------------------------- properties
@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 3), st.integers(0, 10_000), st.booleans())
def test_hessian_pd_and_solution(H, N, d_out, seed, skip):
    rng = np.random.default_rng(seed)
    dims = [2] + [N] * H + [d_out]
    W = rand_net(rng, dims, 2.0)
    Hd = pc.activity_hessian(W, skips="1-skip" if skip else None, dense=True)
    np.testing.assert_allclose(Hd, Hd.T, atol=0)
    assert np.linalg.eigvalsh(Hd)[0] > 0                  # Theorem A.1 (Sylvester)
    Hu = pc.activity_hessian(W, skips="1-skip" if skip else None, unsupervised=True, dense=True)
    assert np.linalg.eigvalsh(Hu)[0] > -1e-10 * max(1, np.abs(Hu).max())   # PSD unsupervised


def test_ep_energy_not_convex():
    Hn = pc.ep_hessian([[[1.0]], [[1.5]]], beta=0.0, dense=True)
    assert np.linalg.eigvalsh(Hn)[0] < 0                  # w_2 > 1 → negative eigenvalue
    np.testing.assert_allclose(np.linalg.eigvalsh(Hn), [1 - 1.5, 1 + 1.5])
    Hp = pc.ep_hessian([[[1.0]], [[0.5]]], beta=0.0, dense=True)
    assert np.linalg.eigvalsh(Hp)[0] > 0
    assert np.linalg.eigvalsh(pc.ep_hessian([[[1.0]], [[1.5]]], regulariser=False, dense=True))[0] < 0


def test_save_load_roundtrip(tmp_path):
    rng = np.random.default_rng(10)
    W = rand_net(rng, [3, 4, 4, 2])
    e = pc.equilibrium(W, rng.standard_normal((3, 3)), rng.standard_normal((3, 2)))
    e.save(tmp_path / "eq")
    assert pc.Equilibrium.load(tmp_path / "eq").equals(e)


# ----------------------------------------------------------------------------- bad input
def test_bad_inputs():
    W = [np.ones((3, 2)), np.ones((4, 3)), np.ones((1, 4))]
    X, Y = np.ones((5, 2)), np.ones((5, 1))
    with pytest.raises(ValueError, match="weights\\[1\\]"):
        pc.equilibrium([np.ones((3, 2)), np.ones((4, 2)), np.ones((1, 4))], X, Y)
    with pytest.raises(ValueError, match="X"):
        pc.equilibrium(W, np.ones((5, 3)), Y)
    with pytest.raises(ValueError, match="Y"):
        pc.equilibrium(W, X, np.ones((5, 2)))
    with pytest.raises(ValueError, match="samples"):
        pc.equilibrium(W, X, np.ones((4, 1)))
    with pytest.raises(ValueError, match="weights\\[0\\].*NaN"):
        pc.equilibrium([np.full((3, 2), np.nan), np.ones((4, 3)), np.ones((1, 4))], X, Y)
    with pytest.raises(ValueError, match="layer_weights"):
        pc.equilibrium(W, X, Y, layer_weights=[1, -1, 1])
    with pytest.raises(ValueError, match="multipliers"):
        pc.equilibrium(W, X, Y, multipliers=[1, 1])
    with pytest.raises(ValueError, match="skips"):
        pc.equilibrium(W, X, Y, skips="1-skip")          # widths 3 → 4 cannot have identity skip
    with pytest.raises(ValueError, match="nudge"):
        pc.equilibrium(W, X, Y, nudge=-1)


def test_unsupervised_equilibrium_is_stationary_and_minimal():
    rng = np.random.default_rng(21)
    W = rand_net(rng, [6, 4, 4, 3], 1.1)                      # d_in > d_out: F* = 0 (input explains y)
    Y = rng.standard_normal((3, 3))
    e = pc.equilibrium(W, None, Y)
    assert e.energy < 1e-24 and e.z_in.shape == (3, 6)
    W = rand_net(rng, [2, 4, 4, 3], 1.1)                      # d_in < d_out: generalised least squares
    e = pc.equilibrium(W, None, Y)
    net = pc.make_net(W)
    lay = pc.layout(net, unsupervised=True)
    Hu = pc.activity_hessian(W, unsupervised=True, dense=True)
    b = pc.rhs(net, lay, None, Y)
    z = np.concatenate([e.z_in.T] + [v.T for v in e.z])
    np.testing.assert_allclose(Hu @ z - b, 0, atol=1e-10)    # ∇_z F = 0 over all free layers incl. z_0
    zmin = np.linalg.lstsq(Hu, b, rcond=None)[0]
    zs = np.split(zmin, np.cumsum(lay.sizes)[:-1])
    Fmin = pc.energy(W, zs[0].T, Y, [v.T for v in zs[1:]])
    assert abs(Fmin - e.energy) < 1e-12


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3), st.integers(0, 10_000),
       st.sampled_from([None, "1-skip", 2]), st.booleans(), st.booleans())
def test_property_telescoped_equals_dense_solve(H, N, d_in, d_out, seed, skips, weighted, nudged):
    rng = np.random.default_rng(seed)
    dims = [d_in] + [N] * H + [d_out]
    W = rand_net(rng, dims, 1.5)
    lam = rng.uniform(0.2, 5.0, H + 1) if weighted else None
    nudge = float(rng.uniform(0.1, 3.0)) if nudged else None
    if skips == 2 and H < 3:
        skips = None
    X, Y = rng.standard_normal((2, d_in)), rng.standard_normal((2, d_out))
    e = pc.equilibrium(W, X, Y, skips=skips, layer_weights=lam, nudge=nudge)
    net = pc.make_net(W, None, skips, lam)
    lay = pc.layout(net, nudge=nudge)
    if lay.n == 0:
        return
    Hd = pc.activity_hessian(W, None, skips, lam, nudge=nudge, dense=True)
    zd = np.linalg.solve(Hd, pc.rhs(net, lay, X, Y))
    zc = np.concatenate([z.T for z in e.z] + ([e.z_out.T] if nudge else []))
    np.testing.assert_allclose(zc, zd, atol=1e-9 * max(1, np.abs(zd).max()))
    if not weighted and not nudged:
        assert e.energy <= e.mse + 1e-12            # S = I + Σ G Gᵀ ⪰ I  ⇒  F* ≤ MSE


def test_telescoped_is_accurate_where_hessian_is_ill_conditioned():
    """SP 1-skip ResNet: κ(H_z) is huge, κ(S) small; the telescoped z* matches an extended-precision
    evaluation to ~1e-14 relative, far better than the κ(H_z)·ε_mach accuracy of any H_z solve."""
    from limits.validate.pc import _telescoped_longdouble

    rng = np.random.default_rng(31)
    W, a = pc.init_weights(24, 24, "sp", d_in=4, d_out=2, rng=rng)
    X, Y = rng.standard_normal((3, 4)), rng.standard_normal((3, 2))
    net = pc.make_net(W, a, "1-skip")
    zref = _telescoped_longdouble(net, X, Y)
    e = pc.equilibrium(W, X, Y, a, "1-skip")
    z1 = np.concatenate([z.T for z in e.z])
    assert np.abs(z1 - zref).max() <= 1e-12 * np.abs(zref).max()
    assert e.cond_S < 1e3
    assert pc.extreme_eigenvalues(W, a, "1-skip").kappa > 1e6


def test_dummy_output_latent_adds_2I_block():
    rng = np.random.default_rng(41)
    W = rand_net(rng, [3, 4, 4, 2])
    W2, a2 = pc.with_dummy_latents(W, output=True)
    Hd = pc.activity_hessian(W2, a2, dense=True)
    np.testing.assert_allclose(Hd[-2:, -2:], 2 * np.eye(2), atol=0)
    X, Y = rng.standard_normal((2, 3)), rng.standard_normal((2, 2))
    e = pc.equilibrium(W2, X, Y, a2)
    assert e.S.shape == (2, 2) and e.energy <= pc.equilibrium(W, X, Y).energy + 1e-15   # S_new = S_old + I
