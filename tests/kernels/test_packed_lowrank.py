"""The factored read-in of packed kernels (limits/kernels/lowrank.py): the leading linear layers as per-input
features give the kernels of the rule-by-rule path (tiles, ``block=``) to rounding, for every layer it folds
(Dense, LayerNorm, Attention, Conv with strides / VALID / CIRCULAR, 1-D and 2-D), NNGP alone or with the NTK,
symmetric and cross; and it folds exactly the layers it should."""
import numpy as np
import pytest

import limits
from limits.kernels import lowrank
from limits.kernels.composed import kernel as composed_kernel

L = limits.layers


def _models():
    attn = L.Attention(n_heads=2, qk_scale=0.8, sigma_w2=1.5, sigma_b2=0.2)
    return {
        "dense-ln-attn-1d": (limits.serial(L.Dense(1.0, 0.1), L.LayerNorm(), attn, L.Activation("relu"),
                                           L.Dense(2.0, 0.1), L.LayerNorm(), L.GlobalAvgPool(), L.Dense()), (7, 3)),
        "attn-no-bias": (limits.serial(L.Dense(1.3, 0.0), L.Attention(qk_scale=0.5), L.Activation("erf"),
                                       L.GlobalAvgPool(), L.Dense()), (6, 2)),
        "conv-same-2d": (limits.serial(L.Conv((3, 3), "SAME", 2.0, 0.01), L.Activation("relu"),
                                       L.Conv((3, 3), "SAME", 2.0, 0.0), L.Activation("relu"), L.GlobalAvgPool(),
                                       L.Dense()), (5, 4, 1)),
        "conv-strided-valid": (limits.serial(L.Conv((3, 2), "VALID", 1.5, 0.1, strides=(2, 1)), L.LayerNorm(),
                                             L.Activation("relu"), L.GlobalAvgPool(), L.Dense()), (7, 5, 1)),
        "conv-circular-1d": (limits.serial(L.Conv((3,), "CIRCULAR", 2.0, 0.1, strides=(2,)), L.Dense(1.0, 0.2),
                                           L.Attention(qk_scale=1.0, sigma_b2=0.1), L.Activation("relu"),
                                           L.GlobalAvgPool(), L.Dense()), (9, 2)),
    }


@pytest.mark.parametrize("name", sorted(_models()))
@pytest.mark.parametrize("get", [("nngp", "ntk"), ("nngp",)])
def test_factored_read_in_matches_the_rules(name, get):
    m, shape = _models()[name]
    rng = np.random.default_rng(7)
    X1, X2 = rng.standard_normal((9,) + shape), rng.standard_normal((4,) + shape)
    assert lowrank.prefix(m.layers, shape) >= 1
    for args in ((X1,), (X1, X2)):
        packed = composed_kernel(m, *args, get=get)
        rules = composed_kernel(m, *args, get=get, block=64)     # tiles: rule by rule
        assert packed.diagnostics["engine"] == "packed pairs"
        for g in get:
            a, b = getattr(packed, g), getattr(rules, g)
            assert np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(b)), (name, g, len(args))


def test_equal_inputs_give_the_self_block_bits():
    """A pair of inputs gives the same bits in the cross kernel as in the symmetric one (in the same order), an
    input with itself those of its self block (correlation exactly 1)."""
    m, shape = _models()["dense-ln-attn-1d"]
    X = np.random.default_rng(1).standard_normal((5,) + shape)
    sym = limits.kernels.kernel(m, X)
    cross = limits.kernels.kernel(m, X[:3], X[1:])
    a, b = np.nonzero(np.arange(3)[:, None] <= np.arange(1, 5)[None, :])     # K(X[a], X[1 + b]) in either, same order
    assert np.sum(np.arange(3)[a] == 1 + b) == 2                               # among them two inputs with themselves
    np.testing.assert_array_equal(cross.nngp[a, b], sym.nngp[a, 1 + b])
    np.testing.assert_array_equal(cross.ntk[a, b], sym.ntk[a, 1 + b])


def test_prefix_stops_where_it_should():
    d, ln, relu = L.Dense(1.0, 0.1), L.LayerNorm(), L.Activation("relu")
    emb = L.Attention(pos_emb="SUM")
    conv = L.Conv((3, 3), "SAME", 2.0, 0.1)
    assert lowrank.prefix((d, ln, relu, d), (6, 3)) == 2            # up to the first nonlinearity
    assert lowrank.prefix((d, emb, relu), (6, 3)) == 1              # a positional embedding is not folded
    assert lowrank.prefix((d, ln), (3,)) == 0                       # no positions: the packed engine's Gram rules
    assert lowrank.prefix((conv, relu), (8, 8, 1)) == 1             # rank 9·1 + 1 = 10
    assert lowrank.prefix((conv, conv, relu), (8, 8, 1)) == 1       # a second 3×3 would make 91 > MAX_RANK
    assert lowrank.prefix((conv,), (8, 8, 4)) == 0                  # 9·4 + 1 = 37 > MAX_RANK


def test_structure_rows_name_the_folded_layers():
    m, shape = _models()["conv-strided-valid"]
    X = np.random.default_rng(2).standard_normal((4,) + shape)
    rows = limits.kernels.kernel(m, X).diagnostics["structure"]
    assert [r["layer"] for r in rows] == list(range(-1, len(m.layers)))
    assert rows[1]["representation"] == "factored" and rows[1]["spatial"] == [3, 4]
    assert rows[2]["name"] == "LayerNorm" and rows[3]["representation"] == "full"


def test_layernorm_of_a_zero_variance_position_is_refused():
    m = limits.serial(L.Conv((3,), "VALID", 1.0, 0.0), L.LayerNorm(), L.Activation("relu"), L.GlobalAvgPool(),
                      L.Dense())
    X = np.zeros((3, 5, 1))
    X[:, :, 0] = [1.0, 0.0, 0.0, 0.0, 1.0]                      # the middle window reads zeros only
    with pytest.raises(ValueError, match="zero variance"):
        limits.kernels.kernel(m, X)
