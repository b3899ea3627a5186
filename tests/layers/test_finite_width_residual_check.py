"""The finite side of limits.check for compositions with Residual blocks (limits/checking/finite_width.py,
_serial_measure): the layer-by-layer forward pass is the network's own, every control variate has mean zero
at a small width, and the ResNet read-out K1 of limits.kernels.finite_width(model) is recovered from the
composition's finite networks (and a 10 % error of it rejected, slow)."""
import numpy as np
import pytest
from scipy.stats import norm

import limits
from limits.checking.finite_width import (_chain_mean, _erf_shifted_gram, _forward_record, _layout, _serial_controls,
                                          _serial_forward_grams, _serial_measure, _verdict, fit_slope)
from limits.finite.serial import SerialNetwork

L = limits.layers
X = np.array([[1.0, 0.2], [0.3, -0.9]])
XC = np.random.default_rng(0).normal(size=(2, 3, 2))
ERF = L.Activation("erf")


def _conv_resnet():
    """Both Residual shapes the check distinguishes: a branch reading a fresh Conv output (ξ), a branch reading the
    stream through pooling (ζ) with a fresh chain inside it (ξ), the read-out chain reading the stream (ζ)."""
    c = lambda w, b: L.Conv(filter_shape=(3,), sigma_w2=w, sigma_b2=b)                    # noqa: E731
    pool = lambda: L.AvgPool((2,), strides=(1,), padding="SAME")                          # noqa: E731
    return limits.serial(c(2.0, 0.1), L.Residual(limits.serial(ERF, c(1.0, 0.05), L.Identity()), rho=0.8),
                         L.Residual(limits.serial(pool(), ERF, c(1.5, 0.1), ERF, c(1.0, 0.05)), rho=0.6),
                         pool(), ERF, L.Flatten(), L.Dense(1.0, 0.05))


def _resnet():
    return limits.resnet(2, depth=2, activation="erf", sigma_w2=1.0, sigma_b2=0.1, rho=0.7)


@pytest.mark.parametrize("make, x", [(lambda: _resnet().to_serial(), X), (_conv_resnet, XC)])
def test_layer_by_layer_forward_is_the_networks_own(make, x):
    s = make()
    net = SerialNetwork(s, 5)
    params = net.init_weights(x.shape[1:], 3, seed=4)
    f_net = net.forward(params, x)[0]
    f, ins, outs, cross, xs = _forward_record(s.layers, params, np.ascontiguousarray(np.broadcast_to(x, (3,) + x.shape)))
    np.testing.assert_allclose(f, f_net, rtol=0, atol=1e-12)
    lay = _layout(s, x.shape[1:])
    assert len(ins) == len(outs) == len(lay.par) and len(cross) == len(xs) == len(lay.stream)


def test_the_layout_names_each_control():
    lay = _layout(_conv_resnet(), XC.shape[1:])
    assert [(a, b) for a, b, _ in lay.xi] == [(0, 1), (2, 3)]              # Conv → block 1; inside block 2
    assert [(z.r, z.last, z.b) for z in lay.zeta] == [(0, 1, 2), (1, 3, 4)]   # block 2 and the read-out read the stream
    tanh = limits.serial(L.Dense(), L.Residual(limits.serial(L.Activation("tanh"), L.Dense()), 0.5),
                         L.Activation("tanh"), L.Dense())
    assert _layout(tanh, (2,)).zeta == ()                                   # no closed form: no ζ
    relu = limits.serial(L.Dense(), L.Residual(limits.serial(L.Activation("relu"), L.Dense()), 0.5),
                         L.Activation("relu"), L.Dense())
    assert [(z.r, z.last, z.b) for z in _layout(relu, (2,)).zeta] == [(0, 1, 2)]


def test_erf_shifted_gram_is_the_noncentral_gaussian_expectation():
    """Against a dense two-dimensional trapezoid rule (step 0.02 on [−9, 9]²) at variances up to 9."""
    from scipy.special import erf

    rng = np.random.default_rng(1)
    for scale in (0.3, 1.0, 3.0):
        A = rng.normal(size=(3, 3)) * scale
        C = A @ A.T + 0.01 * np.eye(3)
        m = rng.normal(size=(1, 3, 2))
        got = _erf_shifted_gram(m, C[None])[0]
        z = np.arange(-9.0, 9.0 + 1e-9, 0.02)
        w = 0.02 * np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
        ref = np.zeros((3, 3))
        for a in range(3):
            for b in range(3):
                k = np.linalg.cholesky(C[np.ix_([a, b], [a, b])] + 1e-300 * np.eye(2)) if a != b else None
                for c in range(2):
                    if a == b:
                        ref[a, a] += (w * erf(m[0, a, c] + np.sqrt(C[a, a]) * z) ** 2).sum() / 2
                        continue
                    u = m[0, a, c] + k[0, 0] * z[:, None] + 0 * z[None]
                    v = m[0, b, c] + k[1, 0] * z[:, None] + k[1, 1] * z[None]
                    ref[a, b] += (w[:, None] * w[None] * erf(u) * erf(v)).sum() / 2
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-11)


def _columns(s, x, width, inits, seed):
    lay = _layout(s, x.shape[1:])
    rec = _serial_forward_grams(s, x, width, inits, seed, lay)
    return lay, rec, _serial_controls(lay, rec, x.shape[0])


def test_every_control_has_mean_zero_and_the_gaussian_rule_on_the_stream_does_not():
    """Width 8, 2000 networks: every regressor (η, cross Grams, ξ, ζ; ≈ 190 columns) within the Bonferroni
    threshold of a family-wise 0.1 % (false failure ≤ 0.1 %). Power: the rule a fresh chain would use,
    E[Φ̂ | Ĝ] = F(Ĝ) of the Gaussian, applied to the stream after block 2 (what the check must not use) is off by
    ≫ the threshold on some entry."""
    s = _conv_resnet()
    lay, rec, R = _columns(s, XC, 8, 2000, 11)
    z = R.mean(axis=0) / (R.std(axis=0, ddof=1) / np.sqrt(R.shape[0]))
    z_crit = norm.isf(0.001 / (2 * R.shape[1]))
    assert R.shape[1] > 150 and np.max(np.abs(z)) < z_crit, (np.max(np.abs(z)), z_crit)
    # the Gaussian rule on the stream: Ĝ_in(read-out) vs F(Ĝ(stream)) through pool, erf, Flatten
    zt = lay.zeta[-1]
    G = _stream_grams(s, XC, 8, 2000, 11)
    wrong = rec["ins"][zt.b] - _chain_mean(zt.pre + (zt.act,) + zt.post, G, XC.shape[0], lay.stream[zt.r])
    iu = np.triu_indices(wrong.shape[-1])
    w = wrong[:, iu[0], iu[1]]
    zw = w.mean(axis=0) / (w.std(axis=0, ddof=1) / np.sqrt(w.shape[0]))
    assert np.max(np.abs(zw)) > 2 * z_crit, zw


def test_relu_stream_controls_have_mean_zero():
    """The relu ζ (closed form, :func:`_relu_shifted_gram`) and the other controls of a two-block relu conv ResNet,
    width 8, 2000 networks: every regressor within the family-wise 0.1 % Bonferroni threshold."""
    c = lambda: L.Conv(filter_shape=(3,), sigma_w2=1.0, sigma_b2=0.05)       # noqa: E731
    s = limits.serial(L.Conv(filter_shape=(3,), sigma_w2=2.0, sigma_b2=0.1),
                      *[L.Residual(limits.serial(L.Activation("relu"), c()), 0.7)] * 2,
                      L.Activation("relu"), L.GlobalAvgPool(), L.Dense(1.0, 0.05))
    lay, rec, R = _columns(s, XC, 8, 2000, 12)
    assert len(lay.zeta) == 2
    z = R.mean(axis=0) / (R.std(axis=0, ddof=1) / np.sqrt(R.shape[0]))
    assert np.max(np.abs(z)) < norm.isf(0.001 / (2 * R.shape[1])), np.max(np.abs(z))


def _stream_grams(s, x, width, inits, seed):
    """The channel Gram of the stream after the last Residual block, same networks as _serial_forward_grams."""
    net = SerialNetwork(s, width)
    gens = [np.random.default_rng(q) for q in np.random.SeedSequence(seed).spawn(inits)]
    params = net.init_weights(x.shape[1:], None, streams=gens)
    h = np.ascontiguousarray(np.broadcast_to(x, (inits,) + x.shape))
    last = max(i for i, l in enumerate(s.layers) if isinstance(l, L.Residual))
    h, _ = limits.serial(*s.layers[:last + 1]).apply(params[:last + 1], h)
    z = h.reshape(inits, -1, h.shape[-1])
    return z @ z.transpose(0, 2, 1) / h.shape[-1]


def _fit(samples, widths):
    mean = np.stack([q.mean(0) for q in samples])
    se = np.stack([q.std(0, ddof=1) / np.sqrt(q.shape[0]) for q in samples])
    return fit_slope(widths, mean, se, quadratic=True)


def test_resnet_k1_is_recovered_from_its_composition_and_the_controls_shrink_the_se():
    """limits.resnet(2, depth=2, erf, ρ = 0.7): K1 of the Model's exact theory against _serial_measure of its
    composition, widths 8–32, 3000 networks each, a + b/N + c/N²: passes at family-wise alpha = 1 % (false failure
    ≤ 1 %); K1 = 0 and 2·K1 are rejected (≈ 6 SE off on K_out[0,0] and [1,1]); the controls shrink se(b) ≥ 8-fold
    (measured 11–15-fold)."""
    m = _resnet()
    r = limits.kernels.finite_width(m, X, ntk=False)
    iu = np.triu_indices(2)
    widths, inits, seed = (8, 16, 32), 3000, 1
    labels, samples = _serial_measure(m.to_serial(), X, None, widths, inits, seed)
    ok = _verdict(labels, samples, r.K[iu], r.K1[iu], widths, inits, seed, 0.01, 0.01, 0.1, True, {}, {}, 0.0)
    assert ok.passed, ok.to_markdown()
    for wrong in (0.0, 2.0):
        bad = _verdict(labels, samples, r.K[iu], wrong * r.K1[iu], widths, inits, seed, 0.01, 0.01, 0.1, True, {},
                       {}, 0.0)
        assert not bad.passed and any("slope" in x for x in bad.reasons)
    _, raw = _serial_measure(m.to_serial(), X, None, widths, inits, seed, control=False)
    shrink = _fit(raw, widths)[3] / _fit(samples, widths)[3]
    assert np.all(shrink > 8.0), shrink


@pytest.mark.exhaustive
def test_resnet_k1_off_by_ten_percent_is_rejected():
    """As above at widths 8–128 with 16000 networks each (≈ 90 s; ``python -m pytest -m exhaustive``): K1 passes,
    K1 × 1.1 is rejected (its slope test off by ≈ 4 SE on K_out[0,0] and [1,1] against the Bonferroni 3.14; power
    about 65 %, so this seed is one where it is)."""
    m = _resnet()
    r = limits.kernels.finite_width(m, X, ntk=False)
    iu = np.triu_indices(2)
    widths, inits, seed = (8, 16, 32, 64, 128), 16000, 1
    labels, samples = _serial_measure(m.to_serial(), X, None, widths, inits, seed)
    args = (widths, inits, seed, 0.01, 0.01, 0.1, True, {}, {}, 0.0)
    ok = _verdict(labels, samples, r.K[iu], r.K1[iu], *args)
    assert ok.passed, ok.to_markdown()
    bad = _verdict(labels, samples, r.K[iu], 1.1 * r.K1[iu], *args)
    assert not bad.passed and any("slope" in x for x in bad.reasons), bad.to_markdown()


@pytest.mark.parametrize("branch, name", [
    (limits.serial(L.Dense(), L.LayerNorm(), L.Dense()), "LayerNorm"),
    (limits.serial(ERF, L.Residual(limits.serial(ERF, L.Dense()), 0.5), L.Dense()), "Residual"),
    (limits.serial(ERF, L.Attention()), "Attention"),
])
def test_branches_the_check_cannot_treat_are_refused_by_name(branch, name):
    s = limits.serial(L.Dense(), L.Residual(branch, 0.5), ERF, L.Dense())
    x = X if name != "Attention" else XC
    if name == "Attention":
        s = limits.serial(L.Conv(filter_shape=(3,)), L.Residual(branch, 0.5), ERF, L.Flatten(), L.Dense())
    with pytest.raises(ValueError, match=f"Residual.*{name}"):
        _serial_measure(s, x, None, (8, 16), 2, 0)


def test_relu_shifted_gram_is_the_truncated_bivariate_normal_moment():
    """The closed form (Owen's T for the orthant) against quadrature: the inner Gaussian in closed form,
    E_y[relu(μ + cy)] = μΦ(μ/c) + cφ(μ/c), the outer by adaptive quadrature split at relu's kink (1e-12); means up to
    ±3 SD, correlations up to ±0.99, and the diagonal."""
    from scipy import integrate
    from scipy.special import ndtr

    from limits.checking.finite_width import _relu_shifted_gram

    rng = np.random.default_rng(2)
    pdf = lambda t: np.exp(-0.5 * t * t) / np.sqrt(2 * np.pi)      # noqa: E731
    for r in (-0.99, -0.4, 0.0, 0.7, 0.99):
        s1, s2 = np.exp(rng.normal(size=2) * 0.5)
        C = np.array([[s1 * s1, r * s1 * s2], [r * s1 * s2, s2 * s2]])
        m = rng.normal(size=(1, 2, 1)) * 1.5
        got = _relu_shifted_gram(m, C[None])[0]
        mu, mv = m[0, :, 0]
        c = s2 * np.sqrt(1 - r * r)

        def inner(x):
            t = mv + s2 * r * x
            return t * ndtr(t / c) + c * pdf(t / c)

        kink = -mu / s1
        f = lambda x: (mu + s1 * x) * inner(x) * pdf(x)                # noqa: E731
        ref = integrate.quad(f, kink, kink + 20, epsabs=1e-13, epsrel=1e-13, limit=200)[0]
        d = integrate.quad(lambda x: (mu + s1 * x) ** 2 * pdf(x), kink, kink + 20, epsabs=1e-13, epsrel=1e-13)[0]
        np.testing.assert_allclose(got[0, 1], ref, rtol=0, atol=1e-11)
        np.testing.assert_allclose(got[0, 0], d, rtol=0, atol=1e-11)


def test_the_validation_script_runs_and_records_its_verdicts(tmp_path):
    """benchmarks/finite_width_residual_validation.py on its cheapest case at 300 networks per width: the run's
    record carries the theory, the slopes and the verdicts the docs table quotes (the committed 40 000-network file
    is benchmarks/results/calibration/finite_width_residual.json)."""
    import json

    from tests.benchmark_scripts import load

    m = load("finite_width_residual_validation")
    out = tmp_path / "v.json"
    m.main(["--case", "C", "--inits", "300", "--seeds", "1", "--jobs", "1", "--json", str(out)])
    run, = json.loads(out.read_text())["runs"]
    assert run["case"] == "C" and len(run["b"]) == 3 and set(run["verdicts"]) == {"1", "1.05", "0.95", "1.1", "0.9", "0"}
    assert run["K1"] != run["K1_without_self_interaction"]
    committed = json.loads((m.OUT).read_text())["runs"]
    assert {r["case"] for r in committed} == set(m.cases()) and all(r["inits"] == 40000 for r in committed)
