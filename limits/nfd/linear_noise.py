"""First order of the 1/N expansion of the neural covariance SDE (the linear-noise / system-size expansion;
docs/theory/depth_width.rst §6).

Write the SDE of ``covariance_sde`` for x = vech V (m = P(P+1)/2 entries) as dx = b(x) dt + ε dM with
d⟨M_i, M_j⟩ = D_ij(x) dt, D_(ab)(cd) = V_ac V_bd + V_ad V_bc, and expand in ε (ε² counts the 1/N of a width-N
network at fixed depth): x = x̄ + ε ξ + ε² y + …, with the skeleton dx̄/dt = b(x̄) (the NNGP) and

    dΣ/dt = J Σ + Σ Jᵀ + D(x̄),      dm/dt = J m + ½ ∂²b(x̄)[Σ],      J = ∂b(x̄),

Σ = Cov ξ, m = E y. To first order E x = x̄ + m and Cov x = Σ (ε = 1): the Gram's mean correction (the
project's K1/N, :func:`limits.kernels.finite_width`, tested against it) and its Gaussian fluctuation. A smooth
function g of the Gram (the correlation ρ₁₂, the log-norm) has E g ≈ g(x̄) + ∇g·m + ½ ∇²g[Σ],
Var g ≈ ∇gᵀΣ∇g.

Derivatives of b and g by central differences (directional, along the eigenvectors of Σ for the second ones);
the ODEs by classical RK4 with a step-halving estimate of their error.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import positive_float, positive_int, psd_matrix
from ..results import Result


def vech_index(P: int):
    """The (a, b), a ≤ b, pairs of the vech coordinates of a P×P symmetric matrix."""
    return [(a, b) for a in range(P) for b in range(a, P)]


def unvech(x, P):
    V = np.empty((P, P))
    for k, (a, b) in enumerate(vech_index(P)):
        V[a, b] = V[b, a] = x[k]
    return V


def vech(V):
    return np.array([V[a, b] for a, b in vech_index(V.shape[0])])


def diffusion(x, P):
    """D_(ab)(cd) = V_ac V_bd + V_ad V_bc: the quadratic variation of the Gram per unit depth-time."""
    V, idx = unvech(x, P), vech_index(P)
    return np.array([[V[a, c] * V[b, d] + V[a, d] * V[b, c] for c, d in idx] for a, b in idx])


def _grad(f, x, h):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)]).T


def _second(f, x, S, h):
    """½ ∂²f(x)[S] for a PSD S: ½ Σ_k λ_k f''(x)[u_k, u_k] by directional second differences."""
    lam, U = np.linalg.eigh(0.5 * (S + S.T))
    f0 = f(x)
    out = 0.0 * f0
    for l, u in zip(lam, U.T):
        if l > 0:
            out = out + 0.5 * l * (f(x + h * u) - 2 * f0 + f(x - h * u)) / (h * h)
    return out


def _rhs(bfun, P, h):
    m, h2 = P * (P + 1) // 2, 100.0 * h

    def f(z):
        x, mu, S = z[:m], z[m:2 * m], z[2 * m:].reshape(m, m)
        J = _grad(bfun, x, h)
        dS = J @ S + S @ J.T + diffusion(x, P)
        return np.concatenate([bfun(x), J @ mu + _second(bfun, x, S, h2), dS.ravel()])
    return f


def _rk4(f, z, T, n):
    dt = T / n
    for _ in range(n):
        k1 = f(z)
        k2 = f(z + 0.5 * dt * k1)
        k3 = f(z + 0.5 * dt * k2)
        k4 = f(z + dt * k3)
        z = z + dt * (k1 + 2 * k2 + 2 * k3 + k4) / 6
    return z


@dataclass(frozen=True)
class FirstOrder(Result):
    """Skeleton ``V`` (the NNGP at depth-time T), first-order mean correction ``m`` (P×P) and fluctuation
    covariance ``Sigma`` of vech V; ``rk4_error``: max change of (V, m, Σ) from halving the RK4 step."""

    K0: np.ndarray
    T: float
    steps: int
    V: np.ndarray
    m: np.ndarray
    Sigma: np.ndarray
    rk4_error: float

    def moments(self, g, h: float = 1e-5) -> tuple[float, float]:
        """(E g, Var g) to first order for a smooth g of vech V."""
        x = vech(self.V)
        grad = _grad(lambda y: np.atleast_1d(g(y)), x, h)[0]
        mean = g(x) + grad @ vech(self.m) + float(_second(lambda y: np.atleast_1d(g(y)), x, self.Sigma, 1e-4)[0])
        return float(mean), float(grad @ self.Sigma @ grad)

    def correlation(self, a: int = 0, b: int = 1) -> tuple[float, float]:
        """(E ρ_ab, sd ρ_ab) to first order."""
        P, idx = self.K0.shape[0], vech_index(self.K0.shape[0])
        ia, ib, iab = idx.index((a, a)), idx.index((b, b)), idx.index((min(a, b), max(a, b)))
        mean, var = self.moments(lambda y: y[iab] / np.sqrt(y[ia] * y[ib]))
        return mean, float(np.sqrt(max(var, 0.0)))

    def log_norm(self, a: int = 0) -> tuple[float, float]:
        """(E, Var) of log(V_aa/K₀_aa) to first order."""
        ia = vech_index(self.K0.shape[0]).index((a, a))
        return self.moments(lambda y: np.log(y[ia] / self.K0[a, a]))


def first_order(K0, T: float, drift, *, steps: int | None = None) -> FirstOrder:
    """The first order of the 1/N expansion of the covariance SDE with drift ``drift(V)`` (a P×P → P×P
    function, e.g. ``lambda V: covariance_sde.drift(V, kappa)``) from K₀ to depth-time T (module docstring);
    ``steps`` RK4 steps (default 32 per unit of T, at least 32)."""
    K0 = psd_matrix(K0, "K0")
    T = positive_float(T, "T")
    P = K0.shape[0]
    n = positive_int(steps, "steps") if steps is not None else max(32, int(np.ceil(32 * T)))
    h = 1e-6 * float(np.max(np.abs(np.diag(K0))))
    f = _rhs(lambda x: vech(drift(unvech(x, P))), P, h)
    m = P * (P + 1) // 2
    z0 = np.concatenate([vech(K0), np.zeros(m), np.zeros(m * m)])
    z = _rk4(f, z0, T, n)
    err = float(np.max(np.abs(_rk4(f, z0, T, 2 * n) - z)))
    return FirstOrder(K0=K0, T=T, steps=n, V=unvech(z[:m], P), m=unvech(z[m:2 * m], P),
                      Sigma=z[2 * m:].reshape(m, m), rk4_error=err)
