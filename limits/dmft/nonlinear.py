"""Nonlinear DMFT: alternating Monte Carlo scheme (docs/theory/dmft.rst §3; Bordelon & Pehlevan 2022 §4, App. D).

Single-site equations on the time grid (left sums, exact for GD with step dt), layer l = 1..L:

    h^l(t) = u^l(t) + Σ_{s<t} C^l(t,s) g^l(s),     C^l = γ0 dt [A^{l−1} + Φ^{l−1} Δ]
    z^l(t) = r^l(t) + Σ_{s≤t} D^l(t,s) φ(h^l(s)),  D^l = γ0 dt [B^l + G^{l+1} Δ]   (ΔG part: s < t)
    g^l = φ'(h^l) z^l,   u^l ~ N(0, Φ^{l−1}),  r^l ~ N(0, G^{l+1}),  Φ⁰ = K^x, G^{L+1} = 1, A⁰ = B^L = 0

One sweep: (i) per layer draw M source paths from the current kernels (eigen-factor, rank deficiency
tolerated: eigenvalues ≤ rcond·λ_max dropped), (ii) march every path causally in time,
(iii) Φ^l = ⟨φφᵀ⟩, G^l = ⟨ggᵀ⟩ and responses by Stein's lemma, γ0 dt A^l = ⟨φ(h^l) r^lᵀ⟩ Σ_r⁺,
γ0 dt B^{l−1} = ⟨g^l u^lᵀ⟩ Σ_u⁺ (A strictly causal; B causal *including* the equal-time block
B(t,t) = diag⟨φ''(h^l(t)) z^l(t)⟩, since g^l(t) depends on u^l(t) directly — zero for linear φ),
(iv) the readout
``f(t) = γ0⁻¹⟨z^L(t)φ(h^L(t)) − z^L(0)φ(h^L(0))⟩`` (z^L = w(t); the t = 0 term has mean zero and
is subtracted as a control variate, so the MC error does not blow up as γ0 → 0), Δ = y − f,
(v) damped update X ← (1−β)X + βX_new. The standard normals behind the samples are drawn once
(common random numbers), so the sweep map is deterministic and the iteration converges to a
stated tolerance; the Monte Carlo error is reported separately as the standard error of the
readout over the M paths.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class DMFTNotConverged(RuntimeError):
    """The alternating scheme did not reach its tolerance within max_iter sweeps."""


@dataclass
class NonlinearState:
    Phi: list            # Φ^l two-time (n×n), l = 1..L
    G: list              # G^l two-time (n×n)
    ar: list             # γ0 dt A^l
    bu: list             # γ0 dt B^{l−1}
    Delta: np.ndarray    # (n_t, P)
    f: np.ndarray
    f_se: np.ndarray     # MC standard error of f
    iterations: int
    residual: float
    converged: bool
    history: list



def damp(old, new, b):
    """Damped update X ← (1 − b) X + b X_new for each array of a list (docs/theory/dmft.rst §3 step 5)."""
    return [(1 - b) * o + b * nw for o, nw in zip(old, new)]


def max_change(new, old) -> float:
    """Largest absolute entry change between two lists of arrays (the convergence residual)."""
    return max(float(np.max(np.abs(a - b))) for a, b in zip(new, old))

def factor_psd(S, rcond=1e-10):
    """Principal square root F = S^{1/2} (n×n, F Fᵀ = S up to eigenvalues ≤ rcond·λ_max, which are
    dropped) and its pseudo-inverse. The principal root is continuous in S, so resampling with
    the same standard normals gives a deterministic, continuous sweep map (an eigenvector
    basis is not: it rotates inside near-degenerate eigenspaces)."""
    S = 0.5 * (S + S.T)
    lam, V = np.linalg.eigh(S)
    top = max(float(lam[-1]), 0.0)
    keep = lam > rcond * top if top > 0 else np.zeros_like(lam, dtype=bool)
    if lam[0] < -1e-6 * max(top, 1.0):
        raise ValueError(f"kernel is not PSD (min eigenvalue {lam[0]:.3e}); the iteration diverged")
    sq = np.sqrt(lam[keep])
    Vk = V[:, keep]
    return (Vk * sq[None, :]) @ Vk.T, (Vk / sq[None, :]) @ Vk.T


def lazy_kernels(act, Kx, depth, linear=False):
    """Initial (lazy) Φ^l, G^l (P×P), l = 1..L, of the mean-field net (limits.gaussian)."""
    Phi, dPhi = [], []
    prev = Kx
    for _ in range(depth):
        if linear:
            Phi.append(prev.copy())
            dPhi.append(np.ones_like(prev))
        else:
            from .. import gaussian

            Phi.append(np.asarray(gaussian.gram(act, prev), float))
            dPhi.append(np.asarray(gaussian.dgram(act, prev), float))
        prev = Phi[-1]
    G = [None] * depth
    nxt = np.ones_like(Kx)
    for l in range(depth - 1, -1, -1):
        G[l] = dPhi[l] * nxt
        nxt = G[l]
    return Phi, G


def _march_paths(act, u, r, C, D, P, n_t):
    """March M source paths through one layer; returns φ(h), g, z (M×n each)."""
    M = u.shape[0]
    n = n_t * P
    h = np.zeros((M, n))
    z = np.zeros((M, n))
    ph = np.zeros((M, n))
    g = np.zeros((M, n))
    for t in range(n_t):
        k0, k1 = t * P, (t + 1) * P
        ht = u[:, k0:k1].copy()
        if t > 0:
            ht += g[:, :k0] @ C[k0:k1, :k0].T
        h[:, k0:k1] = ht
        ph[:, k0:k1] = act.phi(ht)
        # D carries the equal-time response block B(t, t) = diag⟨φ''(h^{l+1}) z^{l+1}⟩ (nonzero for
        # nonlinear φ), so z(t) uses φ(h(s)) for s ≤ t
        zt = r[:, k0:k1] + ph[:, :k1] @ D[k0:k1, :k1].T
        z[:, k0:k1] = zt
        g[:, k0:k1] = act.dphi(ht) * zt
    return ph, g, z


def _responses(act, u, r, C, D, P, n_t, want_A, want_B, chunk=256):
    """Averaged pathwise Jacobians ⟨∂φ(h(t))/∂r(s)⟩ (= γ0 dt A) and ⟨∂g(t)/∂u(s)⟩ (= γ0 dt B^{l−1}).

    Forward-mode tangents of the causal march, chunked over paths (memory O(chunk·n²)).
    """
    M = u.shape[0]
    n = n_t * P
    A = np.zeros((n, n)) if want_A else None
    B = np.zeros((n, n)) if want_B else None
    for c0 in range(0, M, chunk):
        uc, rc = u[c0:c0 + chunk], r[c0:c0 + chunk]
        m = uc.shape[0]
        h = np.zeros((m, n))
        z = np.zeros((m, n))
        ph = np.zeros((m, n))
        g = np.zeros((m, n))
        srcs = [k for k, w in (("u", want_B), ("r", want_A)) if w]
        Th = {k: np.zeros((m, n, n)) for k in srcs}
        Tz = {k: np.zeros((m, n, n)) for k in srcs}
        Tg = {k: np.zeros((m, n, n)) for k in srcs}
        for t in range(n_t):
            k0, k1 = t * P, (t + 1) * P
            ht = uc[:, k0:k1].copy()
            if t > 0:
                ht += g[:, :k0] @ C[k0:k1, :k0].T
            h[:, k0:k1] = ht
            ph[:, k0:k1] = act.phi(ht)
            zt = rc[:, k0:k1] + ph[:, :k1] @ D[k0:k1, :k1].T
            z[:, k0:k1] = zt
            d1 = act.dphi(ht)
            d2 = act.d2phi(ht)
            g[:, k0:k1] = d1 * zt
            dnow = act.dphi(h[:, :k1])
            for k in srcs:
                th = np.zeros((m, P, n))
                tz = np.zeros((m, P, n))
                if k == "u":
                    th[:, :, k0:k1] += np.eye(P)[None]
                else:
                    tz[:, :, k0:k1] += np.eye(P)[None]
                if t > 0:
                    th += np.matmul(C[None, k0:k1, :k0], Tg[k][:, :k0, :])
                Th[k][:, k0:k1] = th
                tz += np.matmul(D[None, k0:k1, :k1], dnow[:, :, None] * Th[k][:, :k1, :])
                Tz[k][:, k0:k1] = tz
                Tg[k][:, k0:k1] = (d2 * zt)[:, :, None] * th + d1[:, :, None] * tz
        if want_A:
            A += np.sum(act.dphi(h)[:, :, None] * Th["r"], axis=0)
        if want_B:
            B += np.sum(Tg["u"], axis=0)
    return (A / M if want_A else None), (B / M if want_B else None)


def solve_mc(act, Kx, y, depth, gamma0, dt, n_steps, M=2000, rng=None, tol=1e-8, max_iter=200,
             damping=0.7, rcond=1e-10, strict=True, progress=None, linear=False, responses="jacobian",
             mask=None):
    """Alternating MC solve of the nonlinear DMFT; see the module docstring. ``mask`` (P,) 0/1: samples
    with 0 are test inputs (fields and outputs evolve, their error does not drive the dynamics)."""
    from .linear import check_mask

    P = Kx.shape[0]
    L = depth
    n_t = n_steps + 1
    n = n_t * P
    g0dt = gamma0 * dt
    tile = lambda K: np.kron(np.ones((n_t, n_t)), K)  # noqa: E731
    Kt = tile(Kx)
    ones = np.ones((n, n))
    strict_mask = np.kron(np.tril(np.ones((n_t, n_t)), -1), np.ones((P, P)))
    causal_mask = np.kron(np.tril(np.ones((n_t, n_t))), np.ones((P, P)))     # includes s = t blocks
    Phi0, G0 = lazy_kernels(act, Kx, L, linear=linear)
    Phi = [tile(K) for K in Phi0]
    G = [tile(K) for K in G0]
    ar = [np.zeros((n, n)) for _ in range(L)]
    bu = [np.zeros((n, n)) for _ in range(L)]
    Delta = np.tile(y, (n_t, 1))
    Zu = [rng.standard_normal((M, n)) for _ in range(L)]
    Zr = [rng.standard_normal((M, n)) for _ in range(L)]
    history = []
    converged = False
    f = np.zeros((n_t, P))
    f_se = np.zeros((n_t, P))
    it_range = range(1, max_iter + 1)
    if progress is not None:
        it_range = progress(it_range, total=max_iter, desc="dmft MC sweeps")
    it = 0
    cmask, _ = check_mask(mask, P)
    for it in it_range:
        Dv = (Delta * cmask[None, :]).reshape(-1)
        newPhi, newG, newar, newbu = [None] * L, [None] * L, [None] * L, [None] * L
        for l in range(L):
            Su = Phi[l - 1] if l else Kt
            Sr = G[l + 1] if l + 1 < L else ones
            try:
                Fu, Fu_p = factor_psd(Su, rcond)
                Fr, Fr_p = factor_psd(Sr, rcond)
            except (ValueError, np.linalg.LinAlgError) as exc:
                raise DMFTNotConverged(f"nonlinear DMFT diverged at sweep {it}: {exc}") from None
            u = Zu[l] @ Fu.T
            r = Zr[l] @ Fr.T
            C = (g0dt * Su * Dv[None, :] + (ar[l - 1] if l else 0.0)) * strict_mask
            D = g0dt * Sr * Dv[None, :] * strict_mask + (bu[l + 1] * causal_mask if l + 1 < L else 0.0)
            ph, gg, z = _march_paths(act, u, r, C, D, P, n_t)
            newPhi[l] = ph.T @ ph / M
            newG[l] = gg.T @ gg / M
            # A^l enters layer l+1 (A^L is not needed: the readout is explicit); B^{l−1} enters l−1
            want_A, want_B = l + 1 < L, l > 0
            newar[l], newbu[l] = ar[l], bu[l]
            if responses == "jacobian" and (want_A or want_B):
                Aj, Bj = _responses(act, u, r, C, D, P, n_t, want_A, want_B)
                if want_A:
                    newar[l] = Aj * strict_mask
                if want_B:
                    newbu[l] = Bj * causal_mask
            elif responses == "stein":
                if want_A:
                    newar[l] = ((ph.T @ Zr[l]) / M @ Fr_p) * strict_mask
                if want_B:
                    newbu[l] = ((gg.T @ Zu[l]) / M @ Fu_p) * causal_mask
            if l == L - 1:
                prod = (z * ph).reshape(M, n_t, P)
                cen = (prod - prod[:, :1, :]) / gamma0
                fn = cen.mean(axis=0)
                f_se = cen.std(axis=0, ddof=1) / np.sqrt(M)
        Dn = y[None, :] - fn
        res = max_change([Dn, *newPhi, *newG, *newar, *newbu], [Delta, *Phi, *G, *ar, *bu])
        history.append(res)
        if not np.isfinite(res):
            break
        Phi, G, ar, bu = (damp(o, nw, damping) for o, nw in ((Phi, newPhi), (G, newG), (ar, newar), (bu, newbu)))
        Delta = (1 - damping) * Delta + damping * Dn
        f = fn
        if res < tol:
            converged = True
            break
    if not converged and strict:
        raise DMFTNotConverged(
            f"nonlinear DMFT did not converge: residual {history[-1] if history else float('nan'):.3e} "
            f"> tol {tol:g} after {it} sweeps (try more damping, smaller dt or gamma0, larger max_iter)")
    return NonlinearState(Phi=Phi, G=G, ar=ar, bu=bu, Delta=Delta, f=y[None, :] - Delta, f_se=f_se,
                          iterations=it, residual=history[-1] if history else float("nan"),
                          converged=converged, history=history)
