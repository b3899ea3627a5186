"""The weight-free NTK sampler (``conditional_ntk``) has the law of the dense empirical NTK.

Both samplers are run with independent seeds on small nets, where Θ̂ fluctuates strongly, and every
entry's mean and variance are compared with a two-sample z-test at a Bonferroni threshold. A sampler
that drops the fresh part of the backward weight (``g W`` only through ``W a``) must fail the same
test — the check has the power to see a wrong conditional law.
"""
import numpy as np
import pytest

import limits
from limits.finite import init_weights
from limits.finite.ntk import ConditionalWeight, conditional_ntk, empirical_ntk
from limits.finite.weights import init_streams
from scipy import stats

S = 20000


def _nets():
    return {
        "resnet-erf": (limits.resnet(4, depth=3, activation="erf", sigma_w2=1.2, sigma_b2=0.2, rho=0.5), 12, 5),
        "mlp-relu-P>d_in": (limits.mlp(3, depth=2, activation="relu", sigma_w2=2.0, sigma_b2=0.1), 8, 5),
        "resnet-tanh-2layer-post": (limits.resnet(4, depth=2, activation="tanh", sigma_w2=1.0, sigma_b2=0.1,
                                                  rho=0.7, block_layers=2, post_activation=True), 10, 4),
        "mlp-erf-2out": (limits.mlp(4, depth=2, d_out=2, activation="erf", sigma_w2=1.5, sigma_b2=0.05), 6, 4),
    }


def _max_z(A, B):
    """Largest |z| over the upper-triangle entries of the mean and the variance, and the threshold."""
    iu = np.triu_indices(A.shape[1])
    a, b = A[:, iu[0], iu[1]], B[:, iu[0], iu[1]]
    zm = (a.mean(0) - b.mean(0)) / np.sqrt(a.var(0, ddof=1) / len(a) + b.var(0, ddof=1) / len(b))
    ca, cb = (a - a.mean(0)) ** 2, (b - b.mean(0)) ** 2
    zv = (ca.mean(0) - cb.mean(0)) / np.sqrt(ca.var(0, ddof=1) / len(a) + cb.var(0, ddof=1) / len(b))
    thr = stats.norm.isf(0.001 / (2 * 2 * len(iu[0])))        # family-wise level 0.1 %
    return max(np.abs(zm).max(), np.abs(zv).max()), thr


def _inputs(m, P, seed=3):
    X = np.random.default_rng(seed).standard_normal((P, m.d_in))
    X[-1] = X[0]                                              # a repeated row: rank-deficient inputs
    return X


@pytest.mark.parametrize("name", list(_nets()))
def test_conditional_sampler_has_the_dense_law(name):
    m, N, P = _nets()[name]
    net, X = m.finite(N), _inputs(m, P)
    out = m.d_out - 1
    A = conditional_ntk(net, X, n_inits=S, seed=11, output=out)
    B = empirical_ntk(net, init_weights(net, S, seed=12), X, output=out)
    z, thr = _max_z(A, B)
    assert z < thr, (name, z, thr)
    # power: the smallest relative bias of a diagonal mean this comparison detects with 80 %
    # probability at the Bonferroni threshold — 3–8 % at S = 20000 on these small, heavy-tailed nets (variance test: see the control)
    d = np.diagonal(A, axis1=1, axis2=2)
    se = np.sqrt(2 * d.var(0, ddof=1) / S)
    assert np.all((thr + 0.84) * se / np.abs(d.mean(0)) < 0.08), (thr + 0.84) * se / np.abs(d.mean(0))


def test_dropping_the_fresh_backward_part_is_detected(monkeypatch):
    """Negative control: g W without the independent W(I − QQᵀ) part has the wrong law → flagged."""
    m, N, P = _nets()["resnet-erf"]
    net, X = m.finite(N), _inputs(m, P)
    B = empirical_ntk(net, init_weights(net, S, seed=12), X)

    def known_only(self, g):
        QT = self.Q.transpose(0, 2, 1)
        return np.matmul(np.matmul(g, self.G1), QT)

    monkeypatch.setattr(ConditionalWeight, "apply_T", known_only)
    z, thr = _max_z(conditional_ntk(net, X, n_inits=S, seed=11), B)
    assert z > thr


def test_chunking_does_not_change_the_draws():
    m, N, P = _nets()["resnet-tanh-2layer-post"]
    net, X = m.finite(N), _inputs(m, P)
    st = init_streams(7, seed=5)
    whole = conditional_ntk(net, X, streams=st)
    parts = np.concatenate([conditional_ntk(net, X, streams=st[:3]), conditional_ntk(net, X, streams=st[3:])])
    assert np.array_equal(whole, parts)
    assert np.allclose(whole, whole.transpose(0, 2, 1), rtol=0, atol=1e-12 * np.abs(whole).max())


def test_bad_arguments():
    m, N, P = _nets()["mlp-erf-2out"]
    net, X = m.finite(N), _inputs(m, P)
    with pytest.raises(ValueError, match="output"):
        conditional_ntk(net, X, n_inits=2, seed=0, output=2)
    with pytest.raises(ValueError, match="n_inits"):
        conditional_ntk(net, X)
    with pytest.raises(ValueError, match="X"):
        conditional_ntk(net, X[:, :2], n_inits=2, seed=0)
