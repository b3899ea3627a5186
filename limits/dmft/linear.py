"""Deep linear DMFT: closed kernel equations on the (n_t·P)×(n_t·P) time–sample grid.

For φ(h) = h every single-site field is linear in the Gaussian sources of its layer,
``h^l = α_u u^l + α_r r^l``, ``g^l = z^l = β_u u^l + β_r r^l`` with ``u^l ~ N(0, Φ^{l−1})``,
``r^l ~ N(0, G^{l+1})``, and (dmft.md §2; Bordelon & Pehlevan 2022 App. F)

    h = u + C z,   z = r + D h,   C^l = γ0 dt [A^{l−1} + Φ^{l−1}Δ],   D^l = γ0 dt [B^l + G^{l+1}Δ]
    α_u = (I−CD)⁻¹,  α_r = (I−CD)⁻¹C = γ0 dt A^l,  β_u = (I−DC)⁻¹D = γ0 dt B^{l−1},  β_r = (I−DC)⁻¹
    H^l = α_u Φ^{l−1} α_uᵀ + α_r G^{l+1} α_rᵀ,   G^l = β_u Φ^{l−1} β_uᵀ + β_r G^{l+1} β_rᵀ
    f(t) = dt Σ_{s<t} Σ_α [A^L(t,s) + Φ^L(t,s) Δ_α(s)]          (readout = layer L+1, g^{L+1} = 1)

(``ΦΔ`` multiplies column (s, α) by Δ_α(s)). C and D are strictly block-lower-triangular (causal),
so block row t of every unknown depends only on block rows < t: :func:`march` solves the whole
fixed point exactly by block forward substitution in one sweep over time, O(L P³ n_t³) flops,
never forming an inverse. :func:`picard` is the textbook damped global iteration of the same
equations (each sweep uses unit-lower-triangular solves, or dense inverses with
``solver="dense"`` as the naive baseline); it is the independent cross-check and the residual.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular


class StepTooLarge(ValueError):
    """Raised when dt·λ_max(K(t)) ≥ 2: the explicit (GD / left-sum) scheme is unstable."""


@dataclass
class LinearState:
    """All two-time objects of the deep linear DMFT (list index l ↔ hidden layer l+1)."""

    H: list          # H^l = Φ^l  (n×n)
    G: list          # G^l        (n×n)
    ar: list         # γ0 dt A^l
    bu: list         # γ0 dt B^{l−1}
    Delta: np.ndarray  # (n_t, P)
    f: np.ndarray      # (n_t, P)


def _tiled(M, n_t):
    return np.kron(np.ones((n_t, n_t)), M)


def ntk_equal_time(Kx, H, G, P, n_t):
    """NTK ``K(t) = Σ_{l=0}^{L} G^{l+1}(t,t) ∘ Φ^l(t,t)`` (Φ⁰ = K^x, G^{L+1} = 1); shape (n_t, P, P)."""
    L = len(H)
    K = np.empty((n_t, P, P))
    for t in range(n_t):
        s = slice(t * P, (t + 1) * P)
        k = G[0][s, s] * Kx
        for l in range(L):
            g_next = G[l + 1][s, s] if l + 1 < L else 1.0
            k = k + g_next * H[l][s, s]
        K[t] = k
    return K


def march(Kx, y, depth, gamma0, dt, n_steps, progress=None, check_step=True):
    """Exact causal solve of the deep linear DMFT (block forward substitution in time).

    Returns a :class:`LinearState`. Raises :class:`StepTooLarge` if dt·λ_max(K(t)) ≥ 2 at any
    time (the discrete dynamics then diverge; a smaller dt is needed).
    """
    P = Kx.shape[0]
    L = depth
    n_t = n_steps + 1
    n = n_t * P
    g = gamma0 * dt
    Kt = _tiled(Kx, n_t)
    ones = np.ones((n, n))
    z = lambda: np.zeros((n, n))  # noqa: E731
    au, ar, bu, br = ([z() for _ in range(L)] for _ in range(4))
    H = [z() for _ in range(L)]
    G = [z() for _ in range(L)]
    Dvec = np.zeros(n)
    f = np.zeros((n_t, P))
    Delta = np.zeros((n_t, P))
    eye = np.eye(P)
    phi_prev = lambda l: H[l - 1] if l > 0 else Kt  # noqa: E731
    g_next = lambda l: G[l + 1] if l + 1 < L else ones  # noqa: E731
    it = range(n_t) if progress is None else progress(range(n_t), total=n_t, desc="dmft march")
    for t in it:
        k0, k1 = t * P, (t + 1) * P
        # ---- forward sweep: h fields of every layer at time t
        for l in range(L):
            Phi = phi_prev(l)
            au[l][k0:k1, k0:k1] = eye
            if t > 0:
                C = g * Phi[k0:k1, :k0] * Dvec[None, :k0]
                if l > 0:
                    C += ar[l - 1][k0:k1, :k0]
                au[l][k0:k1, :k0] = C @ bu[l][:k0, :k0]
                ar[l][k0:k1, :k0] = C @ br[l][:k0, :k0]
            row = (au[l][k0:k1, :k1] @ Phi[:k1, :k1]) @ au[l][:k1, :k1].T
            if t > 0:
                Gn = g_next(l)
                row += (ar[l][k0:k1, :k0] @ Gn[:k0, :k0]) @ ar[l][:k1, :k0].T
            row[:, k0:k1] = 0.5 * (row[:, k0:k1] + row[:, k0:k1].T)
            H[l][k0:k1, :k1] = row
            H[l][:k1, k0:k1] = row.T
        # ---- readout: f(t) = (1/γ0) Σ_{s<t} γ0 dt [A^L + Φ^L Δ](t, s)
        if t > 0:
            Cout = ar[L - 1][k0:k1, :k0] + g * H[L - 1][k0:k1, :k0] * Dvec[None, :k0]
            f[t] = Cout.sum(axis=1) / gamma0
        Delta[t] = y - f[t]
        Dvec[k0:k1] = Delta[t]
        # ---- backward sweep: z (= g) fields, layer L down to 1
        for l in range(L - 1, -1, -1):
            Phi = phi_prev(l)
            Gn = g_next(l)
            br[l][k0:k1, k0:k1] = eye
            if t > 0:
                D = g * Gn[k0:k1, :k0] * Dvec[None, :k0]
                if l + 1 < L:
                    D += bu[l + 1][k0:k1, :k0]
                bu[l][k0:k1, :k0] = D @ au[l][:k0, :k0]
                br[l][k0:k1, :k0] = D @ ar[l][:k0, :k0]
            row = (br[l][k0:k1, :k1] @ Gn[:k1, :k1]) @ br[l][:k1, :k1].T
            if t > 0:
                row += (bu[l][k0:k1, :k0] @ Phi[:k0, :k0]) @ bu[l][:k1, :k0].T
            row[:, k0:k1] = 0.5 * (row[:, k0:k1] + row[:, k0:k1].T)
            G[l][k0:k1, :k1] = row
            G[l][:k1, k0:k1] = row.T
        if check_step:
            s = slice(k0, k1)
            K = G[0][s, s] * Kx + sum((G[l + 1][s, s] if l + 1 < L else 1.0) * H[l][s, s] for l in range(L))
            lam = float(np.linalg.eigvalsh(0.5 * (K + K.T))[-1])
            if not np.isfinite(lam) or dt * lam >= 2.0:
                raise StepTooLarge(
                    f"dt too large for the explicit scheme: dt*lambda_max(K(t)) = {dt * lam:.3g} >= 2 "
                    f"at t = {t * dt:g}; reduce dt")
    return LinearState(H=H, G=G, ar=ar, bu=bu, Delta=Delta, f=f)


def picard(Kx, y, depth, gamma0, dt, n_steps, tol=1e-12, max_iter=500, damping=1.0,
           solver="triangular", init=None):
    """Damped global fixed-point iteration of the deep linear DMFT (dmft.md §2).

    Each sweep rebuilds C^l, D^l from the current (A, B, Φ, G, Δ), then
    ``α_u = (I−CD)⁻¹`` by a unit-lower-triangular solve (``solver="dense"``: ``numpy.linalg.inv``,
    the naive baseline), updates everything with damping β = ``damping`` and stops when the
    max-abs change of (Δ, H, G, A, B) is below ``tol``. Returns (state, iterations, residual,
    converged, history) where history holds the residual per sweep.
    """
    P = Kx.shape[0]
    L = depth
    n_t = n_steps + 1
    n = n_t * P
    g = gamma0 * dt
    Kt = _tiled(Kx, n_t)
    ones = np.ones((n, n))
    I = np.eye(n)
    if init is None:
        H = [Kt.copy() for _ in range(L)]
        G = [ones.copy() for _ in range(L)]
        ar = [np.zeros((n, n)) for _ in range(L)]
        bu = [np.zeros((n, n)) for _ in range(L)]
        Delta = np.tile(y, (n_t, 1))
    else:
        H, G, ar, bu, Delta = ([m.copy() for m in init.H], [m.copy() for m in init.G],
                               [m.copy() for m in init.ar], [m.copy() for m in init.bu], init.Delta.copy())
    strict = np.kron(np.tril(np.ones((n_t, n_t)), -1), np.ones((P, P)))

    def inv_unit_lower(M):
        if solver == "dense":
            return np.linalg.inv(M)
        return solve_triangular(M, I, lower=True, unit_diagonal=True, check_finite=False)

    history = []
    converged = False
    f = np.zeros((n_t, P))
    for it in range(1, max_iter + 1):
        Dv = Delta.reshape(-1)
        Cs = [(g * (H[l - 1] if l else Kt) * Dv[None, :] + (ar[l - 1] if l else 0.0)) * strict for l in range(L)]
        Ds = [(g * (G[l + 1] if l + 1 < L else ones) * Dv[None, :] + (bu[l + 1] if l + 1 < L else 0.0)) * strict
              for l in range(L)]
        Hn, Gn, arn, bun = [], [], [], []
        for l in range(L):
            C, D = Cs[l], Ds[l]
            Phi = H[l - 1] if l else Kt
            Gnext = G[l + 1] if l + 1 < L else ones
            M = inv_unit_lower(I - C @ D)
            Nm = inv_unit_lower(I - D @ C)
            a_u, a_r = M, M @ C
            b_u, b_r = Nm @ D, Nm
            Hn.append(a_u @ Phi @ a_u.T + a_r @ Gnext @ a_r.T)
            Gn.append(b_u @ Phi @ b_u.T + b_r @ Gnext @ b_r.T)
            arn.append(a_r)
            bun.append(b_u)
        Cout = (arn[L - 1] + g * Hn[L - 1] * Dv[None, :]) * strict
        f = Cout.sum(axis=1).reshape(n_t, P) / gamma0
        Dn = y[None, :] - f
        res = max(np.max(np.abs(Dn - Delta)),
                  *(np.max(np.abs(a - b)) for a, b in zip(Hn + Gn + arn + bun, H + G + ar + bu)))
        history.append(float(res))
        b = damping
        H = [(1 - b) * o + b * nw for o, nw in zip(H, Hn)]
        G = [(1 - b) * o + b * nw for o, nw in zip(G, Gn)]
        ar = [(1 - b) * o + b * nw for o, nw in zip(ar, arn)]
        bu = [(1 - b) * o + b * nw for o, nw in zip(bu, bun)]
        Delta = (1 - b) * Delta + b * Dn
        if not np.isfinite(res):
            break
        if res < tol:
            converged = True
            break
    state = LinearState(H=H, G=G, ar=ar, bu=bu, Delta=Delta, f=y[None, :] - Delta)
    return state, it, history[-1], converged, history
