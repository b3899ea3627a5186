"""concretise: parameterisation exponents → per-layer numbers (seed 000 §2–3, TP4)."""
import math

import numpy as np
import pytest
import sympy as sp

import limits.finite as F

MF = {"convention": "variance", "input": {"a": 0, "b": 0, "c": 0}, "hidden": {"a": 0.5, "b": 0, "c": 0},
      "output": {"a": 0.5, "b": 0, "c": 0}, "d": 0.5}


def test_mean_field_variance_convention_numbers():
    # seed 000 §A.8: MF has γ = γ0 √N and η = η0 γ0² N
    N, D = 256, 40
    net = F.concretise(MF, N, 5, d_in=D, eta0=0.025, gamma0=2.0)
    assert net.n_blocks == 3
    assert math.isclose(net.readin.mult, 1 / math.sqrt(D), rel_tol=1e-14)
    assert math.isclose(net.blocks[0].layers[0].mult, N**-0.5, rel_tol=1e-14)
    assert math.isclose(net.readout.mult, N**-0.5, rel_tol=1e-14)
    assert all(math.isclose(d.std, 1.0) for d in net.layers().values())
    assert math.isclose(net.out_scale, 1 / (2.0 * math.sqrt(N)), rel_tol=1e-14)
    for d in net.layers().values():
        assert math.isclose(d.lr, 0.025 * 4.0 * N, rel_tol=1e-14)


class _FakeParams:
    """Mimics limits.params.Parameterisation: sympy exponents, a symbol, a depth exponent."""
    convention = "std"
    depth_alpha = sp.Rational(1, 2)
    depth_lr_exponent = sp.Integer(0)
    optimizer = "sgd"
    g = sp.Symbol("gamma_bar_L")

    def exponent(self, layer, symbol):
        tab = {"input": {"a": sp.Rational(-1, 2), "b": sp.Rational(1, 2), "c": -self.g - 1},
               "hidden": {"a": 0, "b": sp.Rational(1, 2), "c": -self.g},
               "output": {"a": sp.Rational(1, 2), "b": sp.Rational(1, 2), "c": sp.Integer(1)}}
        if symbol == "d":
            return sp.Integer(0)
        return sp.sympify(tab[layer][symbol])


def test_std_convention_with_symbols_and_depth():
    p = _FakeParams()
    N, L = 64, 6
    with pytest.raises(ValueError, match="gamma_bar_L"):
        F.concretise(p, N, L, d_in=10)
    net = F.concretise(p, N, L, d_in=10, residual=True, subs={"gamma_bar_L": 0.5}, eta0=0.1)
    assert math.isclose(net.readin.mult, N**0.5 / math.sqrt(10), rel_tol=1e-14)
    assert math.isclose(net.readin.std, N**-0.5, rel_tol=1e-14)      # std = N^{-b}
    assert math.isclose(net.readin.lr, 0.1 * N**1.5, rel_tol=1e-14)   # c = -γ̄ - 1
    assert math.isclose(net.blocks[0].layers[0].lr, 0.1 * N**0.5, rel_tol=1e-14)
    assert math.isclose(net.readout.lr, 0.1 / N, rel_tol=1e-14)
    assert math.isclose(net.readout.mult, N**-0.5, rel_tol=1e-14)
    assert math.isclose(net.blocks[0].branch, L**-0.5, rel_tol=1e-14)
    assert net.out_scale == 1.0


def test_branch_blocks_and_lr_depth_overrides():
    net = F.concretise(MF, 32, 10, d_in=5, residual=True, branch=0.3, blocks=4, block_layers=2,
                       lr_depth={"hidden": 1.0})
    assert net.n_blocks == 4 and len(net.blocks[0].layers) == 2
    assert net.blocks[0].branch == 0.3
    assert math.isclose(net.blocks[0].layers[0].lr, net.readin.lr / 10, rel_tol=1e-14)


def test_with_real_params_package_if_available():
    params = pytest.importorskip("limits.params")
    try:
        p = params.named("muP", convention="variance", algorithm="bp")
    except Exception as exc:  # params under construction: report, do not hide
        pytest.fail(f"limits.params.named failed: {exc}")
    N = 128
    net = F.concretise(p, N, 4, d_in=N)
    # variance-convention μP (seed 000 Table 2): a_1 = -1/2, b = 1, c = 1, d = 1/2
    assert math.isclose(net.readin.mult, N**0.5 / math.sqrt(N), rel_tol=1e-12)
    assert math.isclose(net.blocks[0].layers[0].std, N**-0.5, rel_tol=1e-12)
    assert math.isclose(net.out_scale, N**-0.5, rel_tol=1e-12)
    assert math.isclose(net.readout.lr, 1.0, rel_tol=1e-12)


def test_concretise_bad_input():
    with pytest.raises(ValueError, match="N"):
        F.concretise(MF, 0, 4)
    with pytest.raises(ValueError, match="L"):
        F.concretise(MF, 8, 0)
    with pytest.raises(ValueError, match="L must be"):
        F.concretise(MF, 8, 1)
    with pytest.raises(ValueError, match="convention"):
        F.concretise({"convention": "weird"}, 8, 4)
    with pytest.raises(ValueError, match="activation"):
        F.concretise(MF, 8, 4, activation="bogus")


def test_concretised_mf_preactivations_are_order_one():
    # desideratum 1 (seed 000): h_l = Θ(1) at init under MF for any N
    X = np.random.default_rng(0).standard_normal((4, 20))
    rms = []
    for N in (64, 1024):
        net = F.concretise(MF, N, 4, d_in=20)
        ek = F.empirical_kernels(net, X, 20, seed=1)
        rms.append(np.sqrt(np.mean(np.diagonal(ek.mean, axis1=1, axis2=2), axis=1)))
    np.testing.assert_allclose(rms[0], rms[1], rtol=0.25)
