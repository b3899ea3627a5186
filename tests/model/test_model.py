"""limits.Model: one description for theory and finite networks."""
import json

import numpy as np
import pytest

import limits
from limits.model import Model, ModelError


def test_builders_roundtrip_and_equality(tmp_path):
    m = limits.resnet(5, 6, activation="tanh", sigma_w2=1.2, sigma_b2=0.2, rho=0.5, depth_scaling="sqrt",
                      sigma_w2_out=2.0, d_out=3)
    assert limits.Model.from_json(m.to_json()) == m
    for suffix in (".json", ".toml"):
        path = m.save(tmp_path / f"m{suffix}")
        assert Model.load(path) == m
    assert m != m.with_(rho=0.6)
    assert m.branch == pytest.approx(0.5 / np.sqrt(6), rel=1e-15)
    assert m.n_weight_layers == 8 and m.n_hidden_layers == 7
    assert isinstance(hash(m.to_json()), int)


def test_depth_has_one_meaning_and_aliases():
    m = limits.mlp(4, 3)
    assert m.depth == 3 and limits.mlp(4, blocks=3) == m
    with pytest.raises(ValueError, match="depth given twice"):
        limits.mlp(4, 3, blocks=3)
    assert Model.from_dict({"d_in": 4, "L": 3}) == m
    with pytest.raises(ValueError, match="alias"):
        Model.from_dict({"d_in": 4, "L": 3, "depth": 3})


@pytest.mark.parametrize("bad, match", [
    (dict(d_in=0), "d_in"), (dict(d_in=3, depth=-1), "depth"), (dict(d_in=3, activation="nope"), "activation"),
    (dict(d_in=3, sigma_w2=-1.0), "sigma_w2"), (dict(d_in=3, sigma_b2=float("nan")), "sigma_b2"),
    (dict(d_in=3, parameterisation="XYZ"), "parameterisation"), (dict(d_in=3, depth_scaling="cube"), "depth_scaling"),
    (dict(d_in=3, rho="a"), "rho"), (dict(d_in=3, residual="yes"), "residual"), (dict(d_in=3, gamma0=0), "gamma0"),
    (dict(d_in=3, block_layers=2), "block_layers"),
])
def test_bad_model_fields_name_the_argument(bad, match):
    with pytest.raises(ValueError, match=match):
        Model(**bad)


def test_model_file_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        Model.load(tmp_path / "none.toml")
    (tmp_path / "bad.toml").write_text("d_in = [")
    with pytest.raises(ValueError, match="TOML"):
        Model.load(tmp_path / "bad.toml")
    (tmp_path / "unk.json").write_text(json.dumps({"d_in": 3, "widht": 4}))
    with pytest.raises(ValueError, match="unknown model field"):
        Model.load(tmp_path / "unk.json")


def test_activation_resolved_once():
    m = limits.mlp(3, 2, activation="erf")
    assert m.act is limits.activation("erf") and m.activation == "erf"


@pytest.mark.parametrize("residual", [False, True])
def test_finite_network_has_the_model_conventions(residual):
    build = limits.resnet if residual else limits.mlp
    kw = dict(rho=0.7) if residual else {}
    m = build(6, 3, activation="erf", sigma_w2=1.3, sigma_b2=0.2, sigma_w2_in=0.9, sigma_b2_out=0.05, **kw)
    net = m.finite(40)
    assert net.d_in == 6 and net.width == 40 and net.n_blocks == 3 and net.d_out == 1
    # NTK parameterisation: W = σ w/√fan_in with w ~ N(0, 1)
    assert net.readin.mult == pytest.approx(np.sqrt(0.9 / 6), rel=1e-15) and net.readin.std == 1.0
    assert net.blocks[0].layers[0].mult == pytest.approx(np.sqrt(1.3 / 40), rel=1e-15)
    assert net.readout.bias_mult == pytest.approx(np.sqrt(0.05), rel=1e-15)
    assert all(b.residual == residual for b in net.blocks)
    if residual:
        assert net.blocks[0].branch == pytest.approx(0.7)
    sp = m.with_(parameterisation="SP").finite(40)
    assert sp.readin.std == pytest.approx(np.sqrt(0.9 / 6)) and sp.readin.mult == 1.0


def test_mean_field_finite_network_matches_dmft_conventions():
    m = limits.mlp(10, 2, activation="linear", parameterisation="MF", gamma0=2.0, lr=0.5)
    net = m.finite(100)
    # f = w·φ(h)/(γ0 N): read-out multiplier N^-1/2 times out_scale 1/(γ0 √N)
    assert net.readout.mult * net.out_scale == pytest.approx(1 / (2.0 * 100), rel=1e-12)
    assert net.blocks[0].layers[0].lr == pytest.approx(0.5 * 4.0 * 100, rel=1e-12)   # η0 γ0² N


def test_theories_accept_the_same_model():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4, 5))
    m = limits.resnet(5, 4, activation="erf", sigma_w2=1.2, sigma_b2=0.1, rho=0.6)
    r1 = limits.kernels.nngp(X, model=m)
    r0 = limits.kernels.nngp(X, depth=4, activation="erf", sigma_w2=1.2, sigma_b2=0.1, residual=True, rho=0.6)
    np.testing.assert_array_equal(r1.K_out, r0.K_out)
    np.testing.assert_array_equal(r1.Theta_out, r0.Theta_out)
    assert Model.from_dict(r1.params["model"]) == m
    s1 = limits.kernels.response(X, model=m, width=100)
    s0 = limits.kernels.response(X, depth=4, activation="erf", sigma_w2=1.2, sigma_b2=0.1, residual=True, rho=0.6,
                                 width=100)
    np.testing.assert_array_equal(s1.chi_out, s0.chi_out)
    f1 = limits.kernels.kernel_fluctuations(X[:2], model=m, width=100)
    f0 = limits.kernels.kernel_fluctuations(X[:2], depth=4, activation="erf", sigma_w2=1.2, sigma_b2=0.1,
                                            residual=True, rho=0.6, width=100)
    np.testing.assert_array_equal(np.asarray(f1.cov), np.asarray(f0.cov))
    with pytest.raises(ValueError, match="not both"):
        limits.kernels.nngp(X, model=m, depth=3)
    with pytest.raises(ValueError, match="d_in"):
        limits.kernels.nngp(np.ones((2, 3)), model=m)
    nfd = limits.resnet(5, 16, depth_scaling="sqrt", rho=np.sqrt(0.5), activation="erf")
    k1 = limits.nfd.kernel_ode(X, model=nfd)
    k0 = limits.nfd.kernel_ode(X, T=0.5, activation="erf")
    np.testing.assert_allclose(k1.K, k0.K, rtol=0, atol=1e-15)
    net = nfd.finite(64)
    assert net.blocks[0].branch == pytest.approx(np.sqrt(0.5 / 16))


def test_models_a_theory_cannot_treat_are_refused():
    X = np.ones((2, 5))
    y = np.array([1.0, -1.0])
    with pytest.raises(ModelError, match="parameterisation 'SP'"):
        limits.dmft.solve(X, y, model=limits.mlp(5, 1, parameterisation="SP"), T=1.0)
    with pytest.raises(ModelError, match="no read-out kernel limit"):
        limits.kernels.nngp(X, model=limits.mlp(5, 1, parameterisation="muP"))
    with pytest.raises(ModelError, match="block_layers"):
        limits.kernels.nngp(X, model=limits.resnet(5, 2, block_layers=2))
    with pytest.raises(ModelError, match="residual"):
        limits.nfd.kernel_ode(X, model=limits.mlp(5, 2))
    with pytest.raises(ModelError, match="grows"):
        limits.kernels.kernel(limits.mlp(5, 1, parameterisation="SP"), X)
    with pytest.warns(RuntimeWarning, match="ill-conditioned"):      # X has two identical rows: K is singular
        r = limits.kernels.nngp(X, model=limits.mlp(5, 1, parameterisation="SP"))
    assert r.Theta_out is None          # SP: NTK not computed (diverges with width), NNGP is


def test_dmft_with_model_equals_legacy_signature():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((4, 6))
    y = np.sign(X[:, 0])
    m = limits.mlp(6, 1, activation="linear", parameterisation="MF", gamma0=1.5, lr=0.1)
    d1 = limits.dmft.solve(X, y, model=m, T=1.0)
    d0 = limits.dmft.solve(X, y, depth=2, activation="linear", gamma0=1.5, T=1.0, dt=0.1)
    np.testing.assert_array_equal(d1.f, d0.f)
