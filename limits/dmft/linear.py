"""Deep linear DMFT: closed kernel equations on the (n_t·P)×(n_t·P) time–sample grid.

For φ(h) = h every single-site field is linear in the Gaussian sources of its layer,
``h^l = α_u u^l + α_r r^l``, ``g^l = z^l = β_u u^l + β_r r^l`` with ``u^l ~ N(0, Φ^{l−1})``,
``r^l ~ N(0, G^{l+1})``, and (docs/theory/dmft.rst §2; Bordelon & Pehlevan 2022 App. F)

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


def check_stable(K, dt, t):
    """``StepTooLarge`` unless dt·λ_max(K) < 2 at step ``t`` (K finite; an overflowed K — a run whose
    kernel blew up — is reported the same way instead of failing inside the eigensolver)."""
    if np.all(np.isfinite(K)):
        lam = float(np.linalg.eigvalsh(0.5 * (K + K.T))[-1])
        if dt * lam < 2.0:
            return
        what = f"dt*lambda_max(K(t)) = {dt * lam:.3g} >= 2"
    else:
        what = "the kernel K(t) overflowed float64"
    cause = ("reduce dt" if t == 0 else
             "the kernel grew during training (feature learning, stronger with larger gamma0): reduce dt or gamma0")
    raise StepTooLarge(f"dt too large for the explicit scheme: {what} at t = {t * dt:g}; {cause}")


@dataclass
class LinearState:
    """All two-time objects of the deep linear DMFT (list index l ↔ hidden layer l+1)."""

    H: list          # H^l = Φ^l  (n×n)
    G: list          # G^l        (n×n)
    ar: list         # γ0 dt A^l
    bu: list         # γ0 dt B^{l−1}
    Delta: np.ndarray  # (n_t, P)
    f: np.ndarray      # (n_t, P)


def check_mask(mask, P):
    """(P,) 0/1 weights of the samples in the gradient (1 = training, 0 = test input) and the training indices."""
    if mask is None:
        return np.ones(P), np.arange(P)
    m = np.asarray(mask, dtype=float)
    if m.shape != (P,) or not np.all((m == 0) | (m == 1)) or not np.any(m == 1):
        raise ValueError(f"mask must be a ({P},) array of 0/1 with at least one 1")
    return m, np.flatnonzero(m)


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


def march(Kx, y, depth, gamma0, dt, n_steps, progress=None, check_step=True, mask=None):
    """Exact causal solve of the deep linear DMFT (block forward substitution in time).

    ``mask`` (P,) of 0/1: samples with 0 are test inputs — their fields and outputs evolve, but their
    error Δ does not drive the dynamics (the gradient sums over the training samples only).

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
    cmask, tr = check_mask(mask, P)
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
        Dvec[k0:k1] = Delta[t] * cmask
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
            check_stable(K[np.ix_(tr, tr)], dt, t)
    return LinearState(H=H, G=G, ar=ar, bu=bu, Delta=Delta, f=f)


def picard(Kx, y, depth, gamma0, dt, n_steps, tol=1e-12, max_iter=500, damping=1.0,
           solver="triangular", init=None, mask=None):
    """Damped global fixed-point iteration of the deep linear DMFT (docs/theory/dmft.rst §2).

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
    cmask, _ = check_mask(mask, P)

    def inv_unit_lower(M):
        if solver == "dense":
            return np.linalg.inv(M)
        return solve_triangular(M, I, lower=True, unit_diagonal=True, check_finite=False)

    history = []
    converged = False
    f = np.zeros((n_t, P))
    for it in range(1, max_iter + 1):
        Dv = (Delta * cmask[None, :]).reshape(-1)
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


class _Factor:
    """Incrementally built factor E (n × k) with E Eᵀ = a growing PSD matrix, one block row per time.

    New columns only appear at the block row where the Schur complement of the new block has
    eigenvalues above ``tol`` (relative); they are zero in every earlier row, which is what keeps
    the causal recursions below consistent as the factor grows.
    """

    def __init__(self, n, P, tol, cap=8):
        self.n, self.P, self.tol = n, P, tol
        self.E = np.zeros((n, cap))
        self.k = 0
        self.gram = np.zeros((0, 0))
        self.scale = 0.0

    def _grow(self, need):
        if need > self.E.shape[1]:
            new = np.zeros((self.n, max(need, 2 * self.E.shape[1])))
            new[:, :self.E.shape[1]] = self.E
            self.E = new

    def append(self, t, row):
        """``row`` = (P × (t+1)P) block row t of the matrix (cross-covariances, then the diagonal block)."""
        P = self.P
        k0, k1 = t * P, (t + 1) * P
        V = 0.5 * (row[:, k0:k1] + row[:, k0:k1].T)
        self.scale = max(self.scale, float(np.max(np.abs(np.diag(V)))) if V.size else 0.0)
        k = self.k
        if k > 0 and t > 0:
            rhs = row[:, :k0] @ self.E[:k0, :k]          # P × k
            try:
                a = np.linalg.solve(self.gram, rhs.T).T
            except np.linalg.LinAlgError:
                a = np.linalg.lstsq(self.gram, rhs.T, rcond=None)[0].T
        else:
            a = np.zeros((P, k))
        S = V - a @ a.T
        if not np.all(np.isfinite(S)):                   # the fields overflowed: the run diverged
            raise StepTooLarge(f"the DMFT fields overflowed float64 at step {t} (training diverged): "
                               f"reduce dt or gamma0")
        lam, Q = np.linalg.eigh(0.5 * (S + S.T))
        keep = lam > self.tol * max(self.scale, 1e-300)
        b = Q[:, keep] * np.sqrt(lam[keep])[None, :]
        r = b.shape[1]
        self._grow(k + r)
        self.E[k0:k1, :k] = a
        self.E[k0:k1, k:k + r] = b
        newrow = np.concatenate([a, b], axis=1)
        g = np.zeros((k + r, k + r))
        g[:k, :k] = self.gram
        g += newrow.T @ newrow
        self.gram = g
        self.k = k + r

    @property
    def cols(self):
        return self.E[:, :self.k]


def march_lowrank(Kx, y, depth, gamma0, dt, n_steps, rank_tol=1e-12, progress=None, check_step=True,
                  keep_two_time=False, mask=None):
    """Causal march with low-rank source factors (same equations as :func:`march`).

    The kernels H^l, G^l of a deep linear net have small numerical rank (≈ 2P here, not n_t·P), so
    the sources of layer l are represented as ``u^l = E^{l−1} ξ``, ``r^l = F^{l+1} ζ`` with
    incrementally built factors (:class:`_Factor`), and only the field coefficients
    ``α_u E, α_r F, β_u E, β_r F`` (n × k) plus the response rows ``α_r = γ0 dt A^l`` (l < L) and
    ``β_u = γ0 dt B^{l−1}`` (l > 1) with their partners are kept as n × n arrays. The readout is
    ``f(t) = ⟨z^L(t) h^L(t)⟩/γ0`` (z^L = w(t)). Cost O(L P³ n_t³) with a ~4× smaller constant
    than :func:`march` and half the memory; exact up to the rank truncation ``rank_tol`` (relative
    eigenvalue cut-off of each Schur complement).

    Returns dict(f, Delta, Heq (L,n_t,P,P), Geq (L,n_t,P,P), ranks, H2/G2 (two-time, if requested)).
    """
    P = Kx.shape[0]
    L = depth
    n_t = n_steps + 1
    n = n_t * P
    g = gamma0 * dt
    lam, Q = np.linalg.eigh(Kx)
    keep = lam > 1e-14 * max(lam[-1], 1e-300)
    e0 = Q[:, keep] * np.sqrt(lam[keep])[None, :]
    E0 = np.tile(e0, (n_t, 1))                         # factor of Φ⁰ = K^x (time-constant)
    FL1 = np.ones((n, 1))                              # factor of G^{L+1} = 1
    Ef = [_Factor(n, P, rank_tol) for _ in range(L)]   # factor of H^l (index l-1)
    Ff = [_Factor(n, P, rank_tol) for _ in range(L)]   # factor of G^l
    full = lambda cond: np.zeros((n, n)) if cond else None  # noqa: E731
    au = [full(l >= 1) for l in range(L)]              # α_u (needed for B^{l−1}, l ≥ 2)
    bu = [full(l >= 1) for l in range(L)]
    ar = [full(l <= L - 2) for l in range(L)]          # α_r (needed for A^l, l ≤ L−1)
    br = [full(l <= L - 2) for l in range(L)]
    cap = 2 * P + 8
    Phu = [np.zeros((n, cap)) for _ in range(L)]
    Phr = [np.zeros((n, cap)) for _ in range(L)]
    Pzu = [np.zeros((n, cap)) for _ in range(L)]
    Pzr = [np.zeros((n, cap)) for _ in range(L)]

    def fit(arrs, l, k):
        if k > arrs[l].shape[1]:
            new = np.zeros((n, max(k, 2 * arrs[l].shape[1])))
            new[:, :arrs[l].shape[1]] = arrs[l]
            arrs[l] = new

    Heq = np.zeros((L, n_t, P, P))
    Geq = np.zeros((L, n_t, P, P))
    Hrow = [None] * L
    Grow = [None] * L
    Dvec = np.zeros(n)
    f = np.zeros((n_t, P))
    Delta = np.zeros((n_t, P))
    cmask, tr = check_mask(mask, P)
    it = range(n_t) if progress is None else progress(range(n_t), total=n_t, desc="dmft march")
    for t in it:
        k0, k1 = t * P, (t + 1) * P
        for l in range(L):                                  # forward sweep (h fields)
            Es = E0 if l == 0 else Ef[l - 1].cols
            Fs = FL1 if l == L - 1 else Ff[l + 1].cols
            kE, kF = Es.shape[1], Fs.shape[1]
            fit(Phu, l, kE), fit(Pzu, l, kE), fit(Phr, l, kF), fit(Pzr, l, kF)
            Phu[l][k0:k1, :kE] = Es[k0:k1]
            if au[l] is not None:
                au[l][k0:k1, k0:k1] = np.eye(P)
            if t > 0:
                if l == 0:
                    C = g * np.tile(Kx, (1, t)) * Dvec[None, :k0]
                else:
                    C = g * Hrow[l - 1][:, :k0] * Dvec[None, :k0] + ar[l - 1][k0:k1, :k0]
                if au[l] is not None:
                    au[l][k0:k1, :k0] = C @ bu[l][:k0, :k0]
                if ar[l] is not None:
                    ar[l][k0:k1, :k0] = C @ br[l][:k0, :k0]
                Phu[l][k0:k1, :kE] += C @ Pzu[l][:k0, :kE]
                Phr[l][k0:k1, :kF] = C @ Pzr[l][:k0, :kF]
            hu, hr = Phu[l][k0:k1, :kE], Phr[l][k0:k1, :kF]
            row = hu @ Phu[l][:k1, :kE].T + hr @ Phr[l][:k1, :kF].T
            row[:, k0:k1] = 0.5 * (row[:, k0:k1] + row[:, k0:k1].T)
            Hrow[l] = row
            Heq[l, t] = row[:, k0:k1]
            Ef[l].append(t, row)
        for l in range(L - 1, -1, -1):                      # backward sweep (z fields)
            Es = E0 if l == 0 else Ef[l - 1].cols
            Fs = FL1 if l == L - 1 else Ff[l + 1].cols
            kE, kF = Es.shape[1], Fs.shape[1]
            fit(Phu, l, kE), fit(Pzu, l, kE), fit(Phr, l, kF), fit(Pzr, l, kF)
            Pzr[l][k0:k1, :kF] = Fs[k0:k1]
            Pzu[l][k0:k1, :kE] = 0.0
            if br[l] is not None:
                br[l][k0:k1, k0:k1] = np.eye(P)
            if t > 0:
                if l == L - 1:
                    D = g * np.broadcast_to(Dvec[None, :k0], (P, k0))
                else:
                    D = g * Grow[l + 1][:, :k0] * Dvec[None, :k0] + bu[l + 1][k0:k1, :k0]
                if bu[l] is not None:
                    bu[l][k0:k1, :k0] = D @ au[l][:k0, :k0]
                if br[l] is not None:
                    br[l][k0:k1, :k0] = D @ ar[l][:k0, :k0]
                Pzu[l][k0:k1, :kE] = D @ Phu[l][:k0, :kE]
                Pzr[l][k0:k1, :kF] += D @ Phr[l][:k0, :kF]
            zu, zr = Pzu[l][k0:k1, :kE], Pzr[l][k0:k1, :kF]
            row = zu @ Pzu[l][:k1, :kE].T + zr @ Pzr[l][:k1, :kF].T
            row[:, k0:k1] = 0.5 * (row[:, k0:k1] + row[:, k0:k1].T)
            Grow[l] = row
            Geq[l, t] = row[:, k0:k1]
            Ff[l].append(t, row)
        # readout f(t) = ⟨z^L(t) h^L(t)⟩ / γ0  (z^L = w(t); u^L, r^L independent)
        l = L - 1
        kE = Phu[l].shape[1]
        kF = Phr[l].shape[1]
        f[t] = (np.sum(Pzu[l][k0:k1] * Phu[l][k0:k1], axis=1) + np.sum(Pzr[l][k0:k1] * Phr[l][k0:k1], axis=1)) / gamma0
        Delta[t] = y - f[t]
        Dvec[k0:k1] = Delta[t] * cmask
        if check_step:
            K = Geq[0, t] * Kx + sum((Geq[l + 1, t] if l + 1 < L else 1.0) * Heq[l, t] for l in range(L))
            check_stable(K[np.ix_(tr, tr)], dt, t)
    out = dict(f=f, Delta=Delta, Heq=Heq, Geq=Geq, ranks=([e.k for e in Ef], [e.k for e in Ff]))
    if keep_two_time:
        out["H2"] = [e.cols @ e.cols.T for e in Ef]
        out["G2"] = [e.cols @ e.cols.T for e in Ff]
    return out
