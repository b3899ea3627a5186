"""limits.check(…, backend="torch"): empirical NNGP / NTK of Model.to_torch networks against the kernel theory."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import limits  # noqa: E402
from limits.finite import init_weights  # noqa: E402
from limits.finite.forward import forward  # noqa: E402
from limits.finite.ntk import empirical_ntk as numpy_ntk  # noqa: E402
from limits.torch.kernels import empirical_ntk, readout_nngp  # noqa: E402


def _X(P=4, d=3, seed=0):
    return np.random.default_rng(seed).standard_normal((P, d))


@pytest.mark.parametrize("m", [limits.mlp(3, 2, activation="erf", sigma_b2=0.1),
                               limits.resnet(3, 2, activation="tanh", rho=0.5, sigma_b2=0.2)],
                         ids=["mlp", "resnet"])
def test_observables_equal_the_numpy_simulator_on_the_same_weights(m):
    net = m.finite(40)
    X = _X()
    w = init_weights(net, 1, seed=2)
    t = m.to_torch(40, weights=w)
    for method in ("autograd", "jacrev"):
        np.testing.assert_allclose(empirical_ntk(t, X, method=method), numpy_ntk(net, w, X)[0], rtol=1e-11,
                                   atol=1e-12)
    K_out, K = readout_nngp(t, m, X)
    fwd = forward(net, w, X)
    a, v = fwd.inp["out"][0], m.variances()
    np.testing.assert_allclose(K_out, v["sigma_w2_out"] * a @ a.T / 40 + v["sigma_b2_out"], rtol=1e-11)
    for l, k in enumerate(K):
        np.testing.assert_allclose(k, fwd.h[l][0] @ fwd.h[l][0].T / 40, rtol=1e-11, atol=1e-13)


def test_kernel_check_with_the_torch_backend_passes():
    m = limits.mlp(3, 1, activation="erf", sigma_b2=0.1)
    X = _X()
    k = limits.kernels.kernel(m, X)
    c = limits.check(k, widths=(32, 64, 128), inits=96, seed=1, backend="torch")
    assert c.details["backend"] == "torch"
    assert c.passed, c.to_markdown()


def test_torch_backend_detects_a_wrong_prediction():
    m = limits.mlp(3, 1, activation="erf", sigma_b2=0.1)
    X = _X()
    k = limits.kernels.kernel(m.with_(sigma_w2=1.3), X)        # theory of another model …
    c = limits.check(k, widths=(32, 64, 128), inits=96, seed=1, model=m, backend="torch")
    assert not c.passed                                          # … is rejected by m's torch networks


def test_backend_is_validated():
    m = limits.mlp(3, 1)
    k = limits.kernels.kernel(m, _X())
    with pytest.raises(ValueError, match="backend"):
        limits.check(k, widths=(8, 16, 32), inits=4, backend="jax")
