"""Compositions trained in a parameterisation of their layer table, and the per-layer coordinate check
(limits.finite.serial_coordcheck; calibration in benchmarks/serial_coordcheck_calibration.py)."""
import numpy as np
import pytest

import limits
from limits import layers as L
from limits.finite.serial import SerialNetwork
from limits.finite.serial_coordcheck import own_updates, tensor_factors, train_parameterised, verdict, width_check

MLP = limits.serial(L.Dense(1.0, 0.1), L.Activation("tanh"), L.Dense(1.5, 0.1), L.Activation("tanh"), L.Dense())
CNN = limits.serial(L.Conv((3, 3), "SAME", 2.0, 0.1), L.Activation("relu"), L.Conv((3, 3), "SAME"), L.LayerNorm(),
                    L.Activation("relu"), L.GlobalAvgPool(), L.Dense())


@pytest.mark.parametrize("comp,shape", [(MLP, (3,)), (CNN, (4, 4, 2))])
def test_ntk_trains_bit_identically_to_the_composition(comp, shape):
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((4,) + shape), rng.standard_normal((4, 1))
    t = limits.params.layer_table(comp, "NTK")
    assert set(tensor_factors(t, 64).values()) == {(1.0, 1.0, 1.0)}
    _, s1 = train_parameterised(comp, t, 16, X, Y, 2, 0.3, 3, seed=5)
    _, _, ref = SerialNetwork(comp, 16).train_gd(X, Y, [2], 0.3 / 4, 3, seed=5, reduction="sum")
    assert np.array_equal(s1["f"], ref[0])


def test_mup_factors_make_the_mup_network():
    t = limits.params.layer_table(MLP, "muP")
    f = tensor_factors(t, 256)                  # (init, multiplier, lr) relative to the NTK layers
    assert f[("0", "W")] == (256 ** -0.5, 256 ** 0.5, 1.0)      # read-in: N^{1/2} · N^{-1/2} z / √D
    assert f[("2", "W")] == (256 ** -0.5, 256 ** 0.5, 1.0)      # hidden: σ z / √N, learning rate Θ(1)
    assert f[("4", "W")] == (256 ** -0.5, 1.0, 1.0)             # read-out: σ z / N
    assert f[("4", "b")] == (1.0, 1.0, 1.0)                     # constant
    assert tensor_factors(t, 256, {"2": 1.0})[("2", "W")][2] == 256.0


def test_width_check_passes_mup_and_flags_sp_and_a_wrong_layer():
    """Fixed seeds; the calibration (module docstring of limits.finite.serial_coordcheck) puts the false-alarm rate
    of this verdict at a few per cent and its power on these two errors at 100 %."""
    mup = limits.params.layer_table(CNN, "muP")
    kw = dict(widths=(8, 16, 32, 64), seeds=6, steps=1, eta0=1e-3, P=4, seed=3)
    ok = width_check(CNN, mup, (3, 3, 1), **kw)
    assert verdict(ok) and ok.quantities == ("dh:0", "dh:2", "df", "dWh:0", "dWh:2", "dWh:6")
    assert all(abs(f.slope) < 0.2 for f in ok.fits)
    sp = width_check(CNN, limits.params.layer_table(CNN, "SP"), (3, 3, 1), predicted=mup.predicted, **kw)
    assert not verdict(sp) and sp.fit("df").slope > 0.6
    bad = width_check(CNN, mup, (3, 3, 1), lr_offsets={"2": 1.0}, **kw)
    assert not verdict(bad) and bad.fit("dh:2").slope > 0.7 and abs(bad.fit("dh:0").slope) < 0.2


@pytest.mark.parametrize("layer,shape", [(L.Dense(2.0), (3, 5)), (L.Conv((3, 2), "SAME", 1.5), (3, 4, 5, 2))])
def test_own_update_is_the_difference_of_the_layer_at_w_t_and_w_0(layer, shape):
    """A linear layer without bias: apply(W_t, x) − apply(W_0, x) = apply(W_t − W_0, x), x the input at step t."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2,) + shape)
    ws = layer.param_shapes(shape[1:], 6)["W"]
    W0, W1 = rng.standard_normal((2, 2) + ws)
    y = own_updates({"3": (layer, x)}, {"3": W0}, {"3": W1})["dWh:3"]
    b = np.zeros((2, 6))
    by_hand = layer.apply({"W": W1, "b": b}, x)[0] - layer.apply({"W": W0, "b": b}, x)[0]
    assert y.shape == by_hand.shape and np.max(np.abs(y - by_hand)) < 1e-12 * np.max(np.abs(by_hand))


def test_own_update_of_the_read_in_is_its_output_change():
    """The read-in's input is the data (fixed) and it has no bias: Δh0 = ΔW x exactly, through training."""
    comp = limits.serial(L.Dense(), L.Activation("tanh"), L.Dense(), L.Activation("tanh"), L.Dense())
    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((4, 3)), rng.standard_normal((4, 1))
    s0, s1 = train_parameterised(comp, limits.params.layer_table(comp, "muP"), 16, X, Y, 2, 0.1, 3, seed=4,
                                 record=(0,), updates=True)
    assert set(s1) == {0, "f", "dWh:0", "dWh:2", "dWh:4"} and s1["dWh:4"].shape == s1["f"].shape
    d = s1[0] - s0[0]
    assert np.max(np.abs(s1["dWh:0"] - d)) < 1e-12 * np.max(np.abs(d))


def test_a_layer_with_too_small_a_learning_rate_is_flagged_through_its_own_update():
    """lr × N^-1 on hidden layer 2: its Δh inherits Θ(1) change from layer 0 (not flagged), its own update
    contribution falls as N^-1 (flagged). Fixed seed; the calibration (module docstring) puts the power at 100 %."""
    comp = limits.serial(L.Dense(), L.Activation("tanh"), L.Dense(), L.Activation("tanh"), L.Dense())
    bad = width_check(comp, limits.params.layer_table(comp, "muP"), (4,), widths=(8, 16, 32, 64), seeds=6, steps=1,
                      P=4, seed=3, lr_offsets={"2": -1.0})
    assert not verdict(bad) and bad.fit("dh:2").consistent and not bad.fit("dWh:2").consistent
    assert bad.fit("dWh:2").slope < -0.8 and bad.fit("dWh:0").consistent and bad.fit("dWh:4").consistent


def test_attention_is_refused_by_name():
    comp = limits.serial(L.Dense(), L.Attention(1), L.Flatten(), L.Dense())
    with pytest.raises(ValueError, match=r"layer 1 \(Attention\)"):
        width_check(comp, limits.params.layer_table(comp, "muP"), (3, 2))
    with pytest.raises(ValueError, match="derived for 'adam'"):
        width_check(MLP, limits.params.layer_table(MLP, "muP", optimizer="adam"), (3,))


def test_a_resnet_model_checks_in_its_own_parameterisation():
    m = limits.resnet(4, 2, activation="tanh", rho=0.5, sigma_b2=0.1, parameterisation="muP")
    r = width_check(m.composition, limits.params.layer_table(m), (4,), widths=(8, 16, 32, 64), seeds=6, steps=1, P=4,
                    seed=2)
    assert r.quantities == ("dh:0", "dh:1", "dh:2", "dh:hidden", "df", "dWh:0", "dWh:1.branch.1", "dWh:2.branch.1",
                            "dWh:4") and verdict(r)
