"""O(1/N) corrections of compositions (limits.kernels.finite_width(limits.serial(...)); docs/theory/finite_width.rst §8):
the layer rules against the MLP/ResNet Z-estimator, against finite compositions (limits.check), refusals by name."""
from dataclasses import replace

import numpy as np
import pytest

import limits
from limits.checking.finite_width import check_finite_width
from limits.errors import ModelError
from limits.kernels.finite_width_serial import finite_width_serial, model_of

L = limits.layers
X = np.array([[1.0, 0.2, -0.5], [0.3, -0.9, 0.4]])
XC = np.random.default_rng(0).normal(size=(2, 3, 2))


def _cnn(act="erf"):
    c = lambda: L.Conv(filter_shape=(3,), padding="SAME", sigma_w2=1.5, sigma_b2=0.1)   # noqa: E731
    return limits.serial(c(), L.Activation(act), c(), L.Activation(act), L.GlobalAvgPool(), L.Dense(1.0, 0.05))


@pytest.mark.parametrize("act", ["erf", "relu", "tanh"])
def test_layer_rules_reproduce_the_mlp_recursion(act):
    """An MLP written as layers: the layer-by-layer rules (identity features, Activation, Dense) give the
    Z-estimator's K1 and N·Var of the read-out kernel of limits.kernels.finite_width(model)."""
    m = limits.mlp(3, depth=2, activation=act, sigma_w2=1.5, sigma_b2=0.05)
    K, K1, var, _ = finite_width_serial(m.to_serial(), X)
    r = limits.kernels.finite_width(m, X, ntk=False)
    np.testing.assert_allclose(K, r.K, atol=1e-14)
    np.testing.assert_allclose(K1, r.K1, atol=1e-12)
    np.testing.assert_allclose(var, r.var_K, atol=1e-12)


def test_compositions_that_spell_a_model_go_through_it():
    for m in (limits.mlp(3, depth=2, activation="relu", sigma_b2=0.1),
              limits.resnet(3, depth=2, activation="erf", rho=0.7, sigma_b2=0.1)):
        assert model_of(m.to_serial(), 3).to_serial() == m.to_serial()
        r = limits.kernels.finite_width(m.to_serial(), X, ntk=not m.residual)     # a smooth ResNet's Θ1 takes minutes
        np.testing.assert_array_equal(r.K1, limits.kernels.finite_width(m, X, ntk=False).K1)
        assert "the composition is" in r.note and "serial" in r.params
    s = limits.serial(L.Dense(), L.Activation("erf"), L.Dense(2.0), L.Activation("relu"), L.Dense())
    assert model_of(s, 3) is None                                      # mixed activations: the layer rules


def test_cnn_limit_is_the_composed_kernel_and_theta_its_ntk():
    s = _cnn()
    r = limits.kernels.finite_width(s, XC)
    k = limits.kernels.kernel(s, XC)
    np.testing.assert_allclose(r.K, k.nngp, atol=1e-14)
    np.testing.assert_array_equal(r.Theta, k.ntk)
    assert r.Theta1 is None and "Theta1" in r.note and r.K1.shape == (2, 2)
    # one parametric hidden layer reading the exact data Gram: no correction (as an MLP of depth 0)
    r1 = limits.kernels.finite_width(limits.serial(L.Conv(filter_shape=(3,), sigma_w2=1.5), L.Activation("erf"),
                                                   L.GlobalAvgPool(), L.Dense()), XC)
    assert np.all(np.abs(r1.K1) < 1e-12)
    rx = limits.kernels.finite_width(s, XC[:1], XC[1:])
    np.testing.assert_allclose(rx.K1, r.K1[:1, 1:], atol=1e-12)


def test_cnn_correction_agrees_with_finite_compositions_and_a_wrong_one_is_flagged():
    """Finite 1-D CNNs (erf convolutions, average pooling with stride 1, global average pooling), widths 8–64,
    500 networks each, control variates, a + b/N + c/N²: passes (false failure ≤ alpha = 1 %), while the
    infinite-width prediction alone (K1 = 0) and K1 × 2 are flagged (slope errors ≈ 7 SE on K_out[0,0]). The 5 %
    power run is docs/theory/finite_width.rst §8."""
    s = limits.serial(L.Conv(filter_shape=(2,), padding="SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("erf"),
                      L.AvgPool((2,), strides=(1,)), L.Conv(filter_shape=(2,), padding="SAME", sigma_w2=2.0),
                      L.Activation("erf"), L.GlobalAvgPool(), L.Dense())
    from limits.checking.finite_width import _serial_measure, _verdict

    r = limits.kernels.finite_width(s, XC, ntk=False)
    widths = (8, 16, 32, 64)
    c = check_finite_width(r, widths, 500, 5, quadratic=True)
    assert c.passed, c.to_markdown()
    labels, samples = _serial_measure(s, XC, None, widths, 500, 5)            # the same networks
    iu = np.triu_indices(2)
    for wrong in (0.0, 2.0):
        bad = _verdict(labels, samples, r.K[iu], wrong * r.K1[iu], widths, 500, 5, 0.01, 0.01, 0.1, True, {}, {}, 0.0)
        assert not bad.passed and any("slope" in x for x in bad.reasons)


def test_layernorm_and_pooling_corrections_agree_with_finite_compositions():
    s = limits.serial(L.Dense(1.5, 0.1), L.LayerNorm(), L.Dense(1.2, 0.0), L.Activation("erf"), L.Dense(2.0),
                      L.Activation("erf"), L.Dense())
    r = limits.kernels.finite_width(s, X, ntk=False)
    assert np.all(np.abs(np.diag(r.K1)) > 1e-2)
    assert check_finite_width(r, (8, 16, 32), 600, 9, quadratic=True).passed


@pytest.mark.parametrize("layers, name", [
    ((L.Dense(), L.Residual(limits.serial(L.Activation("relu"), L.Dense()), 0.5), L.LayerNorm(), L.Activation("relu"),
      L.Dense()), "Residual"),
    ((L.Dense(), L.Activation("relu"), L.LayerNorm(), L.Dense()), "LayerNorm"),
    ((L.Conv(filter_shape=(3,)), L.Flatten(), L.Activation("relu"), L.Dense()), "Activation"),
    ((L.Conv(filter_shape=(3,)), L.Activation("relu"), L.Dense()), "spatial axes"),
])
def test_layers_without_a_derived_correction_are_refused_by_name(layers, name):
    x = X if isinstance(layers[0], L.Dense) else XC
    with pytest.raises(ModelError, match=f"finite_width cannot treat this composition: .*{name}"):
        limits.kernels.finite_width(limits.serial(*layers), x)


def test_attention_is_refused_by_name():
    s = limits.serial(L.Attention(), L.Activation("relu"), L.GlobalAvgPool(), L.Dense())
    with pytest.raises(ModelError, match="Attention: the O\\(1/N\\) correction"):
        limits.kernels.finite_width(s, XC)


def test_mlp_only_theories_name_what_a_composition_lacks():
    """NFD is derived for MLP ResNets only; the DMFT of compositions (docs/theory/dmft.rst §6) names the layer it
    does not treat."""
    X4 = np.random.default_rng(0).standard_normal((4, 3))
    cnn = limits.serial(L.Conv(filter_shape=(3,)), L.Activation("relu"), L.GlobalAvgPool(), L.Dense())
    with pytest.raises(ModelError, match="NFD is derived for .*; this composition has Conv, GlobalAvgPool$"):
        limits.nfd.kernel_ode(X4, model=cnn)
    res = limits.serial(L.Dense(), L.Activation("erf"), L.Residual(L.Dense()), L.Dense())
    with pytest.raises(ModelError, match=r"limits\.dmft\.solve cannot treat layer 2 \(Residual"):
        limits.dmft.solve(X4, X4[:, 0], model=res, T=1.0, dt=0.1)


@pytest.mark.parametrize("act, depth", [("relu", 2), ("erf", 1)])
def test_a_resnet_written_as_layers_gives_the_resnet_z_estimator(act, depth):
    """The residual-section rules (limits/kernels/finite_width_residual.py) on the layers of limits.resnet reproduce its
    K1 (self-interaction included) and N·Var of the read-out kernel exactly."""
    m = limits.resnet(3, depth=depth, activation=act, sigma_w2=1.5, sigma_b2=0.05, rho=0.7)
    K, K1, var, _ = finite_width_serial(m.to_serial(), X)
    r = limits.kernels.finite_width(m, X, ntk=False)
    assert np.max(np.abs(r.K1)) > 1e-2
    np.testing.assert_allclose(K, r.K, atol=1e-14)
    np.testing.assert_allclose(K1, r.K1, atol=1e-12)
    np.testing.assert_allclose(var, r.var_K, atol=1e-12)


def _conv_resnet(rho=0.8):
    c = lambda s, b: L.Conv(filter_shape=(2,), padding="SAME", sigma_w2=s, sigma_b2=b)   # noqa: E731
    return limits.serial(c(2.0, 0.1), L.Residual(limits.serial(L.Activation("erf"), c(1.0, 0.05)), rho),
                         L.Activation("erf"), L.GlobalAvgPool(), L.Dense(1.0, 0.05))


def test_a_conv_resnet_has_the_composed_kernel_as_its_limit():
    """One input of length 2 (2 positions: the self-interaction's joint rule is exact and fast; two inputs of length 3
    take about a minute)."""
    XS = XC[:1, :2]
    s = _conv_resnet()
    r = limits.kernels.finite_width(s, XS, ntk=False)
    np.testing.assert_allclose(r.K, limits.kernels.kernel(s, XS).nngp, atol=1e-14)
    # ρ → 0 switches the branch off: the correction of Conv → erf → GAP → Dense, which reads the exact data Gram (0)
    r0 = limits.kernels.finite_width(_conv_resnet(1e-9), XS, ntk=False)
    assert np.max(np.abs(r0.K1)) < 1e-12 < 1e-3 < np.max(np.abs(r.K1))


@pytest.mark.parametrize("layers, name", [
    ((L.Dense(), L.Activation("relu"), L.Residual(limits.serial(L.Activation("relu"), L.Dense()), 0.5), L.Dense()),
     "Residual on a stream that is not a field of iid Gaussian"),
    ((L.Dense(), L.Residual(limits.serial(L.Activation("relu"), L.Dense())), L.Dense()), "through different functions"),
    ((L.Dense(), L.Residual(limits.serial(L.Activation("erf"), L.Dense())), L.Activation("relu"), L.Dense()),
     "through different functions"),
    ((L.Dense(), L.Residual(limits.serial(L.Activation("erf"), L.Residual(limits.serial(L.Activation("erf"),
                                                                                      L.Dense())), L.Dense())),
      L.Activation("erf"), L.Dense()), "Residual: no O\\(1/N\\) rule inside a residual section"),
])
def test_residual_sections_without_a_derived_correction_are_refused_by_name(layers, name):
    with pytest.raises(ModelError, match=f"finite_width cannot treat this composition: .*{name}"):
        limits.kernels.finite_width(limits.serial(*layers), X)


_EXOGENOUS = limits.serial(L.Dense(1.5, 0.1), L.Activation("erf"), L.Dense(2.0, 0.05),
                           L.Residual(limits.serial(L.Activation("erf"), L.Dense(1.5, 0.05)), rho=1.0),
                           L.Activation("erf"), L.Dense(1.0, 0.05))


@pytest.mark.parametrize("s, x", [(_conv_resnet(), XC[:1, :2]), (_EXOGENOUS, X)], ids=["conv-resnet", "random-stream"])
def test_residual_corrections_agree_with_finite_compositions(s, x, monkeypatch):
    """The residual-section K1 against finite compositions (limits.check's sampler with its residual controls), widths
    8–64, 3000 networks each, a + b/N + c/N²: passes (false failure ≤ alpha = 1 %), while K1 = 0 and the K1 without
    the self-interaction term (each channel's own past, docs/theory/finite_width.rst §8) are flagged. The conv ResNet
    is one input of length 2; the second composition starts its stream after a random layer (an exogenous C_0 with its
    own K1 and N·Cov). The 40 000-network runs with ±5 % and ±10 % are in docs/theory/finite_width.rst §8."""
    import limits.kernels.finite_width_residual as fr
    from limits.checking.finite_width import _serial_measure, _verdict

    r = limits.kernels.finite_width(s, x, ntk=False)
    widths, inits, seed = (8, 16, 32, 64), 3000, 4
    assert check_finite_width(r, widths, inits, seed, quadratic=True).passed
    monkeypatch.setattr(fr, "_self_interaction", lambda blocks, outputs, Kin, Minv, sl, l, bar=None: np.zeros(blocks[l].L.shape[0]))
    K1_plain = limits.kernels.finite_width(s, x, ntk=False).K1
    assert np.max(np.abs(K1_plain - r.K1)) > 0.2 * np.max(np.abs(r.K1))
    labels, samples = _serial_measure(s, x, None, widths, inits, seed)            # the same networks
    iu = np.triu_indices(x.shape[0])
    for wrong in (0 * r.K1, K1_plain):
        bad = _verdict(labels, samples, r.K[iu], wrong[iu], widths, inits, seed, 0.01, 0.01, 0.1, True, {}, {}, 0.0)
        assert not bad.passed and any("slope" in z for z in bad.reasons), bad.to_markdown()
