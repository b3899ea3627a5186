"""Exactness of the fast PC paths (issue 16): the energy-only equilibrium equals the full
``equilibrium(...).energy`` to 1e-12 relative; the structured (Woodbury) inverse of the activity
Hessian equals a dense solve; the extreme eigenvalues equal dense ``eigvalsh`` to 1e-8 relative.
No timings here (speed is measured in benchmarks/bench_pc.py)."""
import numpy as np
import pytest

from limits import pc


def rand_net(rng, dims, scale=1.0):
    return [scale * rng.standard_normal((dims[i + 1], dims[i])) / np.sqrt(dims[i]) for i in range(len(dims) - 1)]


ENERGY_CONFIGS = [
    dict(dims=[3, 5, 5, 5, 2]),
    dict(dims=[3, 6, 6, 6, 6, 1], skips="1-skip", multipliers=[1, 0.5, 0.5, 0.5, 0.3]),
    dict(dims=[2, 4, 4, 4, 4, 4, 3], skips=2),
    dict(dims=[3, 5, 5, 5, 2], layer_weights=[0.5, 2.0, 1.5, 3.0]),
    dict(dims=[3, 5, 5, 5, 2], nudge=0.7),
    dict(dims=[3, 5, 4, 6, 2], biases=True),
    dict(dims=[3, 4, 4, 4, 4, 2], skips=[0, 1, 1, 0, 0], layer_weights=[1, 2, 1, 0.5, 4], nudge=2.0,
         multipliers=[0.7, 1.2, 0.9, 1.1, 0.8], biases=True),
    dict(dims=[4, 4, 4, 4, 4], skips=[0, 1, 1, 1], multipliers=0.6),        # τ_L = 1 (d_out = N)
    dict(dims=[5, 3], layer_weights=2.0),                                     # L = 1
    dict(dims=[3, 5, 5, 5, 2], decay=0.3),                                    # block route
]


@pytest.mark.parametrize("cfg", ENERGY_CONFIGS)
def test_equilibrium_energy_equals_full_equilibrium(cfg):
    rng = np.random.default_rng(11)
    cfg = dict(cfg)
    dims = cfg.pop("dims")
    W = rand_net(rng, dims, 1.3)
    if cfg.pop("biases", False):
        cfg["biases"] = [rng.standard_normal(d) for d in dims[1:]]
    B = 9
    X = rng.standard_normal((B, dims[0]))
    Y = rng.standard_normal((B, dims[-1]))
    e = pc.equilibrium(W, X, Y, **cfg)
    f = pc.equilibrium_energy(W, X, Y, **cfg)
    assert isinstance(f, float)
    assert abs(f - e.energy) <= 1e-12 * e.energy
    fi = pc.equilibrium_energy(W, X, Y, per_sample=True, **cfg)
    np.testing.assert_allclose(fi, e.energies, rtol=1e-12, atol=0)


def test_equilibrium_energy_reference_and_scale():
    # scalar chain 1 → 2 → 1.5: s = 12.25, r = −2, F* = ½·4/12.25 = 8/49
    assert abs(pc.equilibrium_energy([[[1.0]], [[2.0]], [[1.5]]], [[1.0]], [[1.0]]) - 8 / 49) < 1e-15
    # a realistic width/depth (SP init, d_out = 10, B = 64): still equal to 1e-12 relative
    W, a = pc.init_weights(48, 24, "sp", d_in=16, d_out=10, seed=3)
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((64, 16)), rng.standard_normal((64, 10))
    for kw in (dict(multipliers=a), dict(skips="1-skip", multipliers=0.2)):
        full = pc.equilibrium(W, X, Y, **kw).energy
        assert abs(pc.equilibrium_energy(W, X, Y, **kw) - full) <= 1e-12 * full


def test_equilibrium_energy_bad_input():
    W = [np.ones((3, 2)), np.ones((1, 3))]
    with pytest.raises(ValueError, match="weights"):
        pc.equilibrium_energy([np.ones((3, 2)), np.ones((1, 4))], np.ones((2, 2)), np.ones((2, 1)))
    with pytest.raises(ValueError, match="weights"):
        pc.equilibrium_energy([np.full((3, 2), np.nan), np.ones((1, 3))], np.ones((2, 2)), np.ones((2, 1)))
    with pytest.raises(ValueError, match="X"):
        pc.equilibrium_energy(W, np.ones((2, 5)), np.ones((2, 1)))
    with pytest.raises(ValueError, match="nudge"):
        pc.equilibrium_energy(W, np.ones((2, 2)), np.ones((2, 1)), nudge=-1.0)
    with pytest.raises(ValueError, match="decay"):
        pc.equilibrium_energy(W, np.ones((2, 2)), np.ones((2, 1)), decay=np.nan)
    with pytest.raises(ValueError, match="overflow"):
        pc.equilibrium_energy([np.full((3, 3), 1e200)] * 4, np.ones((1, 3)), np.ones((1, 3)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("layer", [0, 1, 2])
def test_equilibrium_energy_names_nonfinite_weight(bad, layer):
    # the NaN/inf scan is fused into the chain (a row of ones gives the column sums 1ᵀW_l)
    W = [np.ones((3, 2)), np.ones((3, 3)), np.ones((1, 3))]
    W[layer][0, 0] = bad
    with pytest.raises(ValueError, match=rf"weights\[{layer}\] contains NaN or inf"):
        pc.equilibrium_energy(W, np.ones((2, 2)), np.ones((2, 1)))


def test_equilibrium_energy_nonfinite_weight_behind_zero_jacobian():
    # G_2 has a zero column where W_2 holds inf: the ones row still exposes it
    W = [np.ones((3, 2)), np.zeros((3, 3)), np.array([[1.0, 0.0, 0.0]])]
    W[1][1, 0] = np.inf
    with pytest.raises(ValueError, match=r"weights\[1\]"):
        pc.equilibrium_energy(W, np.ones((2, 2)), np.ones((2, 1)))


def test_equilibrium_energy_large_finite_weights_are_not_rejected():
    # column sums overflow (1e308·3) but every weight is finite: not a NaN/inf error
    W = [np.ones((3, 2)), np.full((3, 3), 1e308), np.zeros((1, 3))]
    assert pc.equilibrium_energy(W, np.ones((2, 2)), 2 * np.ones((2, 1))) == pytest.approx(2.0, rel=1e-15)


# ----------------------------------------------------------------------------- structured inverse / spectra
HESS_CONFIGS = [
    dict(dims=[3, 5, 5, 5, 2]),
    dict(dims=[3, 6, 6, 6, 6, 1], skips="1-skip", multipliers=[1, 0.5, 0.5, 0.5, 0.3]),
    dict(dims=[2, 4, 4, 4, 4, 4, 3], skips=2),
    dict(dims=[3, 5, 5, 5, 2], layer_weights=[0.5, 2.0, 1.5, 3.0]),
    dict(dims=[3, 5, 5, 5, 2], nudge=0.7),
    dict(dims=[3, 4, 4, 4, 4, 2], skips=[0, 1, 1, 0, 0], layer_weights=[1, 2, 1, 0.5, 4], nudge=2.0),
    dict(dims=[4, 4, 4, 4, 4], skips=[0, 1, 1, 1]),                          # τ_L = 1 (output skip)
    dict(dims=[4, 4, 4, 4, 4], skips=[0, 1, 1, 1], nudge=0.5, multipliers=1.7),
]


def _hess_case(cfg, seed=5):
    rng = np.random.default_rng(seed)
    cfg = dict(cfg)
    dims = cfg.pop("dims")
    W = rand_net(rng, dims, 1.3)
    net = pc.make_net(W, cfg.get("multipliers"), cfg.get("skips"), cfg.get("layer_weights"))
    lay = pc.layout(net, nudge=cfg.get("nudge"))
    Hd = pc.activity_hessian(W, cfg.get("multipliers"), cfg.get("skips"), cfg.get("layer_weights"),
                             nudge=cfg.get("nudge"), dense=True)
    return rng, W, cfg, net, lay, Hd


@pytest.mark.parametrize("cfg", HESS_CONFIGS)
def test_chain_inverse_equals_dense_solve(cfg):
    from limits.pc.hessian import ChainInverse

    rng, W, cfg, net, lay, Hd = _hess_case(cfg)
    ci = ChainInverse(net, lay)
    B = rng.standard_normal((lay.n, 4))
    np.testing.assert_allclose(ci.solve(B), np.linalg.solve(Hd, B), rtol=0, atol=1e-11 * np.abs(np.linalg.solve(Hd, B)).max())
    np.testing.assert_allclose(Hd @ ci.solve(B[:, 0]), B[:, 0], atol=1e-11 * np.abs(B).max())
    # the Woodbury capacitance is the telescoped rescaling S (seed 001 Eq. 31–32), nudged or not
    Lq = np.tril(ci.Qf[0])
    np.testing.assert_allclose(Lq @ Lq.T, pc.rescaling(net, nudge=cfg.get("nudge")), rtol=1e-12, atol=1e-12)
    # matrix-free operator on a block of vectors
    np.testing.assert_allclose(pc.hessian_operator(net, lay).matmat(B), Hd @ B, atol=1e-12 * np.abs(Hd).max() * 10)


def test_chain_inverse_rejects_decay_and_free_input():
    from limits.pc.hessian import ChainInverse

    W = rand_net(np.random.default_rng(0), [3, 4, 4, 2])
    net = pc.make_net(W)
    with pytest.raises(ValueError, match="decay"):
        ChainInverse(net, pc.layout(net, decay=0.1))
    with pytest.raises(ValueError, match="clamped input"):
        ChainInverse(net, pc.layout(net, unsupervised=True))
    with pytest.raises(ValueError, match="inverse"):
        pc.extreme_eigenvalues(W, method="lanczos", inverse="lu")
    with pytest.raises(ValueError, match="inverse='chain'"):
        pc.extreme_eigenvalues(W, method="lanczos", inverse="chain", decay=0.1)


SPECTRA = [("sp", None, {}), ("mupc", "1-skip", {}), ("orthogonal", None, {}), ("sp", "1-skip", {"nudge": 0.5}),
           ("mupc", "1-skip", {"layer_weights": 2.0})]


@pytest.mark.parametrize("param,skips,kw", SPECTRA)
def test_lanczos_chain_inverse_matches_dense_eigvalsh(param, skips, kw):
    # λ_min / λ_max of H_z from Lanczos (λ_min through ChainInverse) equal dense eigvalsh to 1e-8 relative
    W, a = pc.init_weights(24, 12, param, seed=7)
    d = pc.extreme_eigenvalues(W, a, skips, method="dense", **kw)
    s = pc.extreme_eigenvalues(W, a, skips, method="lanczos", inverse="chain", **kw)
    assert s.converged
    assert abs(s.lambda_max - d.lambda_max) <= 1e-8 * d.lambda_max
    assert abs(s.lambda_min - d.lambda_min) <= 1e-8 * d.lambda_min
    assert abs(s.kappa - d.kappa) <= 1e-8 * d.kappa


@pytest.mark.slow
@pytest.mark.parametrize("param,skips", [("sp", None), ("mupc", "1-skip")])
def test_chain_inverse_matches_block_cholesky_at_medium_size(param, skips):
    W, a = pc.init_weights(96, 96, param, seed=8)
    c = pc.extreme_eigenvalues(W, a, skips, method="lanczos", inverse="chain")
    b = pc.extreme_eigenvalues(W, a, skips, method="lanczos", inverse="cholesky")
    assert abs(c.lambda_min - b.lambda_min) <= 1e-8 * b.lambda_min
    assert abs(c.lambda_max - b.lambda_max) <= 1e-10 * b.lambda_max
