"""Monte Carlo of E[K_N] and E[Θ_N] from finite MLPs with their tangent network (:mod:`limits.finite.tangent`).

Per network, the read-out block of the conditional covariance of (f, ḟ) gives E[f fᵀ | hidden] and
E[Θ | hidden] — the empirical NTK Rao–Blackwellised over the read-out weights and the tangent direction
(same mean, none of the read-out quadratic form's spread). Control variates with mean exactly zero at
every width (no theory enters them): per layer l = 1..L+1, ξ^l = C^l − E[C^l | C^{l−1}] for all three
blocks of C = (C_hh, C_hḣ, C_ḣḣ), the conditional means being Gaussian expectations under the *sampled*
C^{l−1} (given C^{l−1}, layer l−1's rows are iid N(0, C^{l−1})):

    E[C_hh] = s E[φφ] + b,  E[C_hḣ]_{αβ} = s Σ_γ R_{γβ} E[∂_γ(φ_α φ'_β)],
    E[C_ḣḣ]_{αβ} = s (E[φφ] + E[φ'_α φ'_β (c_α·u)(c_β·u)] + S_αβ E[φ'_α φ'_β]) + b

(u = (h_α, h_β), ḣ = c·u + e its regression on u, S = Cov(e): Stein/Price, exact). relu uses closed forms;
other activations the Gaussian engine.
"""
from __future__ import annotations

import numpy as np


def _relu_moments(k11, k12, k22):
    """E over (u, v) ~ N(0, [[k11, k12], [k12, k22]]) of (relu relu, step step, step step u², uv, v²,
    relu(u) δ(v), δ(u) relu(v)) — closed forms (θ the angle, r² = k11k22 − k12²)."""
    g = np.sqrt(k11 * k22)
    r = np.sqrt(np.maximum((g - np.abs(k12)) * (g + np.abs(k12)), 0.0))
    th = np.arctan2(r, np.clip(k12, -g, g))
    J = (r + (np.pi - th) * k12) / (2 * np.pi)
    G = (np.pi - th) / (2 * np.pi)
    return {"phiphi": J, "dd": G, "dd_uu": k11 * G + k12 * r / (2 * np.pi * k22), "dd_uv": J,
            "dd_vv": k22 * G + k12 * r / (2 * np.pi * k11), "phi_d2": r / (2 * np.pi * k22),
            "d2_phi": r / (2 * np.pi * k11), "diag_price": np.full_like(k11, 0.5)}


def _engine_moments(act, k11, k12, k22):
    from .. import gaussian
    from ..kernels.expectations import diag_price

    E = lambda f, g: np.asarray(gaussian.expect2(f, g, k11, k12, k22, checked=True))  # noqa: E731
    d1, d2 = act.dphi, act.d2phi
    u1 = lambda x: x * d1(x)      # noqa: E731
    u2 = lambda x: x * x * d1(x)  # noqa: E731
    return {"phiphi": E(act.phi, act.phi), "dd": E(d1, d1), "dd_uu": E(u2, d1), "dd_uv": E(u1, u1),
            "dd_vv": E(d1, u2), "phi_d2": E(act.phi, d2), "d2_phi": E(d2, act.phi),
            "diag_price": diag_price(act, k11)}


def _moments(act, k11, k12, k22):
    from ..kernels.expectations import activation_name, is_builtin_activation

    if is_builtin_activation(act) and activation_name(act) == "relu":
        return _relu_moments(k11, k12, k22)
    return _engine_moments(act, k11, k12, k22)


def conditional_mean(act, C, P, s, b):
    """E[C^{l+1} | C^l] (S, 2P, 2P) for sampled C^l (S, 2P, 2P) (module docstring)."""
    S = C.shape[0]
    K, R, T = C[:, :P, :P], C[:, :P, P:], C[:, P:, P:]
    out = np.empty_like(C)
    d = np.diagonal(K, axis1=1, axis2=2)
    for a in range(P):
        for c in range(P):
            if a == c:
                mo = _moments(act, d[:, a], d[:, a], d[:, a])
                F = mo["phiphi"]
                Rm = mo["diag_price"] * R[:, a, a]
                T2 = 0.5 * T[:, a, a] if _relu_like(act) else _diag_tangent(act, K, R, T, a)
            else:
                k11, k12, k22 = d[:, a], K[:, a, c], d[:, c]
                mo = _moments(act, k11, k12, k22)
                F = mo["phiphi"]
                Rm = mo["dd"] * R[:, a, c] + mo["phi_d2"] * R[:, c, c]
                det = k11 * k22 - k12 * k12
                Ki = np.stack([np.stack([k22, -k12], -1), np.stack([-k12, k11], -1)], -2) / det[:, None, None]
                ra = np.stack([R[:, a, a], R[:, c, a]], -1)              # Cov(u, ḣ_α), u = (h_α, h_γ)
                rc = np.stack([R[:, a, c], R[:, c, c]], -1)
                ca, cc = np.einsum("sij,sj->si", Ki, ra), np.einsum("sij,sj->si", Ki, rc)
                Sres = T[:, a, c] - np.einsum("si,si->s", ra, cc)
                T2 = (ca[:, 0] * cc[:, 0] * mo["dd_uu"] + (ca[:, 0] * cc[:, 1] + ca[:, 1] * cc[:, 0]) * mo["dd_uv"]
                      + ca[:, 1] * cc[:, 1] * mo["dd_vv"] + Sres * mo["dd"])
            out[:, a, c] = s * F + b
            out[:, a, P + c] = s * Rm
            out[:, P + a, P + c] = s * (F + T2) + b
    out[:, P:, :P] = np.swapaxes(out[:, :P, P:], 1, 2)
    del S
    return out


def _relu_like(act):
    from ..kernels.expectations import activation_name, is_builtin_activation

    return is_builtin_activation(act) and activation_name(act) in ("relu", "linear")


def _diag_tangent(act, K, R, T, a):
    """E[φ'(h_α)² ḣ_α²] = E[φ'(u)² (c u)²] + (Θ_αα − c R_αα) E[φ'²], c = R_αα/K_αα (one variable)."""
    from .. import gaussian

    q = K[:, a, a]
    c = R[:, a, a] / q
    e2 = np.asarray(gaussian.expect(lambda x: (x * act.dphi(x)) ** 2, q))
    e0 = np.asarray(gaussian.expect(lambda x: act.dphi(x) ** 2, q))
    return c * c * e2 + (T[:, a, a] - c * R[:, a, a]) * e0


def measure_tangent(model, X, widths, inits, seed, control=True):
    """Per width, per network: (labels, samples) of the read-out E[f fᵀ|·] and E[Θ|·] entries (upper
    triangle), control variates of the module docstring regressed out."""
    from ..finite.tangent import tangent_samples
    from ..model import as_model
    from .core import spawn_seeds
    from ..stats import control_variate

    m = as_model(model)
    X = np.asarray(X, dtype=np.float64)
    P, L = X.shape[0], m.depth
    v = m.variances()
    s = [v["sigma_w2"]] * L + [v["sigma_w2_out"]]
    b = [v["sigma_b2"]] * L + [v["sigma_b2_out"]]
    iu = np.triu_indices(P)
    labels = [f"K_out[{i},{j}]" for i, j in zip(*iu)] + [f"Θ[{i},{j}]" for i, j in zip(*iu)]
    samples = []
    for k, N in enumerate(widths):
        C = tangent_samples(m, X, int(N), int(inits), spawn_seeds(seed, len(widths))[k])
        top = C[:, L + 1]
        Y = np.concatenate([top[:, :P, :P][:, iu[0], iu[1]], top[:, P:, P:][:, iu[0], iu[1]]], axis=1)
        if control:
            xi = [(C[:, l + 1] - conditional_mean(m.act, C[:, l], P, s[l], b[l])).reshape(len(C), -1)
                  for l in range(L + 1)]
            Y = control_variate(Y, np.concatenate(xi, axis=1))
        samples.append(Y)
    return labels, samples
