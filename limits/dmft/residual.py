"""DMFT of a mean-field residual network with branch scale β = β0/√B (docs/theory/dmft.rst §5, beyond the seed;
Bordelon et al. 2023, depthwise transfer).

Network (``depth`` = L hidden representations, B = L − 1 residual blocks)::

    h¹ = W⁰x/√D,  h^{l+1} = h^l + β W^l φ(h^l)/√N,  f = w·φ(h^L)/(γ0 N),  β = β0/√B

GD with rate γ0² N on ½Σ_μΔ_μ² (step dt). Single-site equations (left sums, exact for GD):

    h¹(t)      = u¹ + γ0 dt Σ_{s<t} K^x Δ(s) g¹(s)
    h^{l+1}(t) = h^l(t) + β [u^{l+1}(t) + Σ_{s<t} (R_A^l + γ0 β dt Φ^l Δ)(t,s) g^{l+1}(s)]
    z^l(t)     = r^l(t) + Σ_{s≤t} R_B^l(t,s) φ(h^l(s)) + γ0 β dt Σ_{s<t} (G^{l+1} Δ)(t,s) φ(h^l(s)),  z^L = w(t)
    g^L = φ'(h^L) z^L,   g^l = g^{l+1} + β φ'(h^l) z^l
    R_A^l = ⟨∂φ(h^l(t))/∂r^l(s)⟩ (s < t),  R_B^l = ⟨∂g^{l+1}(t)/∂u^{l+1}(s)⟩ (s ≤ t: g^{l+1}(t) depends on
    u^{l+1}(t) directly),  u^{l+1} ~ N(0, Φ^l),  r^l ~ N(0, G^{l+1})

The residual stream couples every layer of a path, so all layers are marched jointly in time;
responses are averaged pathwise Jacobians (forward-mode tangents), which limits this solver to
small grids (n = n_t·P of a few dozen). Same alternating, damped, common-random-number scheme as
:mod:`limits.dmft.nonlinear`. At t = 0 and B → ∞ the stream covariance obeys the kernel ODE of
docs/theory/nfd.rst §2 with time horizon T = β0² (see tests).
"""
from __future__ import annotations

import numpy as np

from .nonlinear import DMFTNotConverged, factor_psd, damp, max_change


def _march(act, src, ops, P, n_t, L, beta, fam=None):
    """Joint causal march of all layers for a batch of paths; with ``fam = (kind, layer)`` also the
    forward-mode tangents w.r.t. that source family. Returns dict of fields (and tangents)."""
    u1, us, rs, w0 = src["u1"], src["u"], src["r"], src["w0"]
    m = u1.shape[0]
    n = n_t * P
    h = [np.zeros((m, n)) for _ in range(L)]
    z = [np.zeros((m, n)) for _ in range(L)]
    g = [np.zeros((m, n)) for _ in range(L)]
    ph = [np.zeros((m, n)) for _ in range(L)]
    dph = [np.zeros((m, n)) for _ in range(L)]
    if fam is not None:
        Th = [np.zeros((m, n, n)) for _ in range(L)]
        Tz = [np.zeros((m, n, n)) for _ in range(L)]
        Tg = [np.zeros((m, n, n)) for _ in range(L)]
    I = np.eye(P)
    for t in range(n_t):
        k0, k1 = t * P, (t + 1) * P
        for k in range(L):
            if k == 0:
                ht = u1[:, k0:k1].copy()
                if t > 0:
                    ht += g[0][:, :k0] @ ops["C0"][k0:k1, :k0].T
            else:
                ht = h[k - 1][:, k0:k1] + beta * us[k][:, k0:k1]
                if t > 0:
                    ht += g[k][:, :k0] @ ops["Ch"][k][k0:k1, :k0].T
            h[k][:, k0:k1] = ht
            ph[k][:, k0:k1] = act.phi(ht)
            dph[k][:, k0:k1] = act.dphi(ht)
            if fam is not None:
                th = np.zeros((m, P, n))
                if k == 0:
                    if t > 0:
                        th += np.matmul(ops["C0"][None, k0:k1, :k0], Tg[0][:, :k0, :])
                else:
                    th += Th[k - 1][:, k0:k1, :]
                    if fam == ("u", k):
                        th[:, :, k0:k1] += beta * I[None]
                    if t > 0:
                        th += np.matmul(ops["Ch"][k][None, k0:k1, :k0], Tg[k][:, :k0, :])
                Th[k][:, k0:k1] = th
        for k in range(L - 1, -1, -1):
            D = ops["DL"] if k == L - 1 else ops["Dz"][k]
            zt = (w0[:, k0:k1] if k == L - 1 else rs[k][:, k0:k1]).copy()
            zt += ph[k][:, :k1] @ D[k0:k1, :k1].T       # D includes the equal-time response block
            z[k][:, k0:k1] = zt
            d1 = dph[k][:, k0:k1]
            if k == L - 1:
                g[k][:, k0:k1] = d1 * zt
            else:
                g[k][:, k0:k1] = g[k + 1][:, k0:k1] + beta * d1 * zt
            if fam is not None:
                tz = np.zeros((m, P, n))
                if fam == ("r", k):
                    tz[:, :, k0:k1] += I[None]
                tz += np.matmul(D[None, k0:k1, :k1], dph[k][:, :k1, None] * Th[k][:, :k1, :])
                Tz[k][:, k0:k1] = tz
                d2 = act.d2phi(h[k][:, k0:k1])
                tg = (d2 * zt)[:, :, None] * Th[k][:, k0:k1, :] + d1[:, :, None] * tz
                Tg[k][:, k0:k1] = tg if k == L - 1 else Tg[k + 1][:, k0:k1, :] + beta * tg
    out = dict(h=h, z=z, g=g, ph=ph, dph=dph)
    if fam is not None:
        out.update(Th=Th, Tg=Tg)
    return out


def init_kernels(act, Kx, depth, beta0):
    """Stream covariances Σ^l and Φ^l = E[φφ] of the untrained residual net (lists, l = 1..L):
    ``Σ^{l+1} = Σ^l + β² E_{Σ^l}[φ(u)φ(v)]`` — the Euler scheme of the kernel ODE of docs/theory/nfd.rst §2
    ``dΣ/dτ = E[φφ]`` on τ ∈ [0, β0²] with B = L − 1 steps."""
    from .. import gaussian

    B = depth - 1
    beta2 = beta0 ** 2 / B
    Sig, Phi = [], []
    prev = np.asarray(Kx, float)
    for k in range(depth):
        Sig.append(prev)
        Phi.append(np.asarray(gaussian.gram(act, prev), float))
        prev = prev + beta2 * Phi[-1]
    return Sig, Phi


def solve_residual_mc(act, Kx, y, depth, gamma0, beta0, dt, n_steps, M=2000, rng=None, tol=1e-8,
                      max_iter=200, damping=0.7, rcond=1e-10, strict=True, chunk=200):
    """Alternating MC solve of the residual DMFT (module docstring). Returns a dict with f, f_se,
    Delta, Phi/G (L × n × n), iterations, residual, converged, history."""
    P = Kx.shape[0]
    L = depth
    if L < 2:
        raise ValueError("depth must be >= 2 for a residual network (B = depth − 1 blocks)")
    B = L - 1
    beta = beta0 / np.sqrt(B)
    n_t = n_steps + 1
    n = n_t * P
    g0dt = gamma0 * dt
    tile = lambda K: np.kron(np.ones((n_t, n_t)), K)  # noqa: E731
    Kt = tile(Kx)
    strict_m = np.kron(np.tril(np.ones((n_t, n_t)), -1), np.ones((P, P)))
    causal_m = np.kron(np.tril(np.ones((n_t, n_t))), np.ones((P, P)))
    # initial kernels: run the march once with all operators zero (t-independent fields)
    Phi = [None] * L
    G = [None] * L
    RA = [np.zeros((n, n)) for _ in range(L)]
    RB = [np.zeros((n, n)) for _ in range(L)]
    Delta = np.tile(y, (n_t, 1))
    Z = {"u1": rng.standard_normal((M, n)), "w0": rng.standard_normal((M, 1)),
         "u": [None] + [rng.standard_normal((M, n)) for _ in range(1, L)],
         "r": [rng.standard_normal((M, n)) for _ in range(L - 1)] + [None]}
    F1, _ = factor_psd(Kt, rcond)
    zero = np.zeros((n, n))

    def sources(Phi_, G_):
        s = {"u1": Z["u1"] @ F1.T, "w0": np.repeat(Z["w0"], n, axis=1), "u": [None] * L, "r": [None] * L}
        for k in range(1, L):
            s["u"][k] = Z["u"][k] @ factor_psd(Phi_[k - 1], rcond)[0].T
        for k in range(L - 1):
            s["r"][k] = Z["r"][k] @ factor_psd(G_[k + 1], rcond)[0].T
        return s

    # lazy start: kernels of the untrained net (fields constant in time)
    _, Phi0 = init_kernels(act, Kx, L, beta0)
    Phi = [tile(K) for K in Phi0]
    G = [np.ones((n, n)) for _ in range(L)]
    history = []
    converged = False
    it = 0
    f_se = np.zeros((n_t, P))
    for it in range(1, max_iter + 1):
        Dv = Delta.reshape(-1)
        ops = {"C0": g0dt * Kt * Dv[None, :] * strict_m,
               "Ch": [None] + [beta * (RA[k - 1] + g0dt * beta * Phi[k - 1] * Dv[None, :]) * strict_m
                               for k in range(1, L)],
               "Dz": [RB[k] * causal_m + g0dt * beta * G[k + 1] * Dv[None, :] * strict_m for k in range(L - 1)]
               + [None],
               "DL": g0dt * np.ones((n, n)) * Dv[None, :] * strict_m}
        try:
            src = sources(Phi, G)
        except (ValueError, np.linalg.LinAlgError) as exc:
            raise DMFTNotConverged(f"residual DMFT diverged at sweep {it}: {exc}") from None
        out = _march(act, src, ops, P, n_t, L, beta)
        nPhi = [o.T @ o / M for o in out["ph"]]
        nG = [o.T @ o / M for o in out["g"]]
        prod = (out["z"][L - 1] * out["ph"][L - 1]).reshape(M, n_t, P)
        cen = (prod - prod[:, :1, :]) / gamma0
        fn = cen.mean(axis=0)
        f_se = cen.std(axis=0, ddof=1) / np.sqrt(M)
        nRA = [zero.copy() for _ in range(L)]
        nRB = [zero.copy() for _ in range(L)]
        for j in range(L - 1):
            for c0 in range(0, M, chunk):
                sub = {"u1": src["u1"][c0:c0 + chunk], "w0": src["w0"][c0:c0 + chunk],
                       "u": [None if a is None else a[c0:c0 + chunk] for a in src["u"]],
                       "r": [None if a is None else a[c0:c0 + chunk] for a in src["r"]]}
                ta = _march(act, sub, ops, P, n_t, L, beta, fam=("r", j))
                nRA[j] += np.sum(ta["dph"][j][:, :, None] * ta["Th"][j], axis=0)
                tb = _march(act, sub, ops, P, n_t, L, beta, fam=("u", j + 1))
                nRB[j] += np.sum(tb["Tg"][j + 1], axis=0)
            nRA[j] = nRA[j] / M * strict_m
            nRB[j] = nRB[j] / M * causal_m
        Dn = y[None, :] - fn
        res = max_change([Dn, *nPhi, *nG, *nRA, *nRB], [Delta, *Phi, *G, *RA, *RB])
        history.append(res)
        if not np.isfinite(res):
            break
        Phi, G, RA, RB = (damp(o, nw, damping) for o, nw in ((Phi, nPhi), (G, nG), (RA, nRA), (RB, nRB)))
        Delta = (1 - damping) * Delta + damping * Dn
        if res < tol:
            converged = True
            break
    if not converged and strict:
        raise DMFTNotConverged(f"residual DMFT did not converge: residual {history[-1]:.3e} > tol {tol:g} "
                               f"after {it} sweeps")
    return dict(f=y[None, :] - Delta, f_se=f_se, Delta=Delta, Phi=Phi, G=G, iterations=it,
                residual=history[-1], converged=converged, history=history, beta=beta)
