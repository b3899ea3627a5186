"""Property tests (hypothesis): kernels symmetric PSD, sample-permutation equivariance, the
two causal solvers agree, and sign symmetry y → −y ⇒ f → −f (linear nets)."""
import numpy as np
from hypothesis import given, settings, strategies as st

import limits.dmft as dm
from limits.dmft.linear import march, march_lowrank


def _case(seed, P, D):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((P, D)), rng.standard_normal(P)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6), P=st.integers(1, 4), L=st.integers(1, 3),
       g0=st.floats(0.05, 1.5), steps=st.integers(1, 8))
def test_linear_kernels_psd_and_solvers_agree(seed, P, L, g0, steps):
    X, y = _case(seed, P, 5)
    d = dm.solve(X, y, depth=L, gamma0=g0, dt=0.02, steps=steps, keep_two_time=True)
    for M in list(d.Phi2) + list(d.G2):
        assert np.allclose(M, M.T, atol=1e-9 * max(1.0, np.max(np.abs(M))))
        assert np.linalg.eigvalsh(0.5 * (M + M.T))[0] > -1e-8 * max(1.0, np.max(np.abs(M)))
    for K in d.ntk:
        assert np.linalg.eigvalsh(K)[0] > -1e-10
    Kx = X @ X.T / 5
    s = march(Kx, y, L, g0, 0.02, steps)
    assert np.max(np.abs(s.f - d.f)) < 1e-9


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6), P=st.integers(2, 4), L=st.integers(1, 3))
def test_permutation_equivariance_and_sign_symmetry(seed, P, L):
    X, y = _case(seed, P, 4)
    perm = np.random.default_rng(seed + 1).permutation(P)
    a = dm.solve(X, y, depth=L, gamma0=0.8, dt=0.02, steps=6)
    b = dm.solve(X[perm], y[perm], depth=L, gamma0=0.8, dt=0.02, steps=6)
    assert np.max(np.abs(a.f[:, perm] - b.f)) < 1e-10
    c = dm.solve(X, -y, depth=L, gamma0=0.8, dt=0.02, steps=6)
    assert np.max(np.abs(a.f + c.f)) < 1e-10
    assert np.max(np.abs(a.ntk - c.ntk)) < 1e-9
