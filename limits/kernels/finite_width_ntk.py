"""O(1/N) mean of the NTK of an MLP from its tangent network (docs/theory/finite_width.rst §3).

In the NTK parameterisation every parameter θ is N(0, 1), and with an independent direction δ ~ N(0, I),
Θ_N(x, x') = E_δ[ḟ(x) ḟ(x')], ḟ = ∇_θ f · δ. The pair (h, ḣ) of pre-activations and their tangents is
again a network of N iid neurons per layer: given layer l, the rows z_k = (h_k, ḣ_k) of layer l+1 are
Gaussian with the conditional covariance (s, b the layer's σ_w², σ_b² — σ²_w,out, σ²_b,out at the read-out)

    C_hh = s ⊙ mean_k φφᵀ + b,   C_hḣ = s ⊙ mean_k φ (φ'ḣ)ᵀ,   C_ḣḣ = s ⊙ mean_k (φφᵀ + (φ'ḣ)(φ'ḣ)ᵀ) + b,

and E[Θ_N] = E[C_ḣḣ] at the read-out, exactly at every width. At N = ∞, C_hh = K^l, C_ḣḣ = Θ^l (the NTK
recursion) and C_hḣ = 0; ḣ → −ḣ is a symmetry, so E[C_hḣ] = 0 and C_hḣ fluctuates independently of the rest.
The O(1/N) mean follows from a second-order expansion of E[F(C)] as for the kernels (§2), with
F_22(C) = E[φ'_α ḣ_α φ'_β ḣ_β] = G_αβ(K) Θ_αβ + (terms quadratic in C_hḣ), G = E[φ'φ']::

    K1^{l+1} = s [D K1^l + ½ ∂²F : V_KK]
    Θ1^{l+1} = K1^{l+1} + s [(D_G K1^l) ⊙ Θ^l + G ⊙ Θ1^l + ½ (∂²G : V_KK) ⊙ Θ^l + D_G : V_KΘ + Σ_{γδ} E[∂_γ∂_δ(φ'_αφ'_β)] V_R(γα, δβ)]

(D, D_G the Price Jacobians of E[φφ] and E[φ'φ'], ∂² their Hessians — exact, :mod:`limits.kernels.price`),
with V = N·Cov of (C_hh, C_ḣḣ) and V_R = N·Cov(C_hḣ) propagated linearly with the per-neuron sampling
noise (four-point functions of φ, φ' under N(0, K^l), ḣ ~ N(0, Θ^l) by Wick). Every Gaussian derivative is
taken at the covariance itself: nothing is differentiated numerically, so relu's kinks (correlation ±1) are
never crossed — unlike the derivative in the correlation c of two coupled copies of the network, whose
one-sided difference crossed the kink of the arc-cosine kernel at c = 1 (error ∝ √ε).
"""
from __future__ import annotations

import numpy as np

from .expectations import dgram, gram
from .fluctuations import pair_index, to_matrix
from .fourpoint import expect4, gaussian_rule, is_relu
from .price import hessian_contract, jacobian, pair_derivatives

_JOINT_MAX = 4
_JOINT_ORDER = {1: 128, 2: 128, 3: 48, 4: 24}


class FourPoint:
    """E[s₁(x_a) s₂(x_b) s₃(x_c) s₄(x_d)] under N(0, K), slot functions φ ("f") or φ' ("g"): one joint
    rule for P ≤ 4 variables (exact polar rule for relu/linear at P ≤ 2, :func:`fourpoint.gaussian_rule`),
    else (and for relu at P = 3, 4) a rule per quadruple on its distinct variables."""

    def __init__(self, act, K):
        self.act, self.K = act, np.asarray(K, dtype=np.float64)
        self.fn = {"f": act.phi, "g": act.dphi}
        P = self.K.shape[0]
        joint = P <= _JOINT_MAX and not (P > 2 and is_relu(act))     # relu in 3–4 variables: per quadruple, exact
        self.nodes = gaussian_rule(act, self.K, _JOINT_ORDER[P]) if joint else None

    def block(self, kinds, A, B):
        """Matrix E[k₀(x_a) k₁(x_b) k₂(x_c) k₃(x_d)] over rows (a, b) ∈ A, columns (c, d) ∈ B."""
        A, B = np.asarray(A), np.asarray(B)
        f = [self.fn[k] for k in kinds]
        if self.nodes is not None:
            x, W = self.nodes
            X = f[0](x[A[:, 0]]) * f[1](x[A[:, 1]])
            Y = f[2](x[B[:, 0]]) * f[3](x[B[:, 1]])
            return (X * W) @ Y.T
        ia = np.repeat(np.arange(len(A)), len(B))
        ib = np.tile(np.arange(len(B)), len(A))
        idx = np.stack([A[ia, 0], A[ia, 1], B[ib, 0], B[ib, 1]], axis=1)
        return expect4(self.act, f, self.K[idx[:, :, None], idx[:, None, :]]).reshape(len(A), len(B))


# ------------------------------------------------------------------ one layer's sampling noise
def _noise(act, K, T, F, G, pairs):
    """Per-neuron N·Cov of (φφ_p, φφ_p + φ'ḣφ'ḣ_p) (2m×2m) and of φ_a φ'_b ḣ_b over ordered (a, b) (P²×P²)."""
    P = K.shape[0]
    pr = np.asarray(pairs)
    pa, pb = pr.T
    fp = FourPoint(act, K)
    Fv, Gv, Tv = F[pa, pb], G[pa, pb], T[pa, pb]
    S11 = fp.block("ffff", pr, pr) - np.outer(Fv, Fv)
    X = (fp.block("ffgg", pr, pr) - np.outer(Fv, Gv)) * Tv[None, :]
    E4 = fp.block("gggg", pr, pr)
    wick = (np.outer(Tv, Tv) + T[pa[:, None], pa[None, :]] * T[pb[:, None], pb[None, :]]
            + T[pa[:, None], pb[None, :]] * T[pb[:, None], pa[None, :]])
    S22 = E4 * wick - np.outer(Gv * Tv, Gv * Tv)
    top = np.hstack([S11, S11 + X])
    bottom = np.hstack([S11 + X.T, S11 + X + X.T + S22])
    ordered = np.array([(a, b) for a in range(P) for b in range(P)])
    SR = fp.block("fgfg", ordered, ordered) * T[ordered[:, 1][:, None], ordered[:, 1][None, :]]
    return np.vstack([top, bottom]), SR


def _r_jacobian(pd0, G, P):
    """J_R[(α,β), (γ,β)] = E[∂_γ(φ_α φ'_β)]: ∂ mean φ(h_α)φ'(h_β)ḣ_β / ∂Cov(h_γ, ḣ_β) (ordered pairs)."""
    J = np.zeros((P * P, P * P))
    for a in range(P):
        for b in range(P):
            r = a * P + b
            if a == b:
                J[r, r] = pd0.d1[a]                      # E[φ'² + φφ'']
            else:
                J[r, r] = G[a, b]                        # E[φ'_α φ'_β]
                J[r, b * P + b] = 2 * pd0.g1[b, a]       # E[φ_α φ''_β] = 2 ∂E[φ_αφ_β]/∂K_ββ
    return J


def _r_term(pd1, VR, pairs, P):
    """Σ_{γ,δ∈{α,β}} E[∂_γ∂_δ(φ'_α φ'_β)] V_R((γ,α), (δ,β)): the C_hḣ fluctuations' share of E[F_22]."""
    ix = lambda g, a: g * P + a          # noqa: E731 — Cov(h_γ, ḣ_a)
    out = np.zeros(len(pairs))
    for n, (a, b) in enumerate(pairs):
        if a == b:
            out[n] = 2 * pd1.d1[a] * VR[ix(a, a), ix(a, a)]
        else:
            out[n] = (2 * pd1.g1[a, b] * VR[ix(a, a), ix(a, b)] + pd1.g12[a, b] * VR[ix(a, a), ix(b, b)]
                      + pd1.g12[a, b] * VR[ix(b, a), ix(a, b)] + 2 * pd1.g1[b, a] * VR[ix(b, a), ix(b, b)])
    return out


# ------------------------------------------------------------------ the recursion
def _means(act, K, T, K1, T1, V, VR, s, pairs):
    """(K1, Θ1, D, D_G, J_R) of the next layer from this layer's state (hidden layers l ≥ 1)."""
    P, m = K.shape[0], len(pairs)
    pa, pb = np.asarray(pairs).T
    pd0, pd1 = pair_derivatives(act, K, 0), pair_derivatives(act, K, 1)
    D, DG = jacobian(pd0, pairs), jacobian(pd1, pairs)
    VKK, VKT = V[:m, :m], V[:m, m:]
    Tv, Gv = T[pa, pb], pd1.F[pa, pb]
    K1n = s * (D @ K1 + 0.5 * hessian_contract(pd0, VKK, pairs))
    T1n = K1n + s * ((DG @ K1) * Tv + Gv * T1 + 0.5 * hessian_contract(pd1, VKK, pairs) * Tv
                     + np.einsum("pq,qp->p", DG, VKT) + _r_term(pd1, VR, pairs, P))
    return K1n, T1n, D, DG, _r_jacobian(pd0, pd1.F, P)


def theta_mlp(act, K0, s, b):
    """Read-out (K, Θ, K1, Θ1) (P×P each) of an MLP in the NTK parameterisation with read-in kernel ``K0``
    and per-layer scales ``s[l]``, biases ``b[l]`` (l = 0..L, the last the read-out): module docstring."""
    P = K0.shape[0]
    pairs = pair_index(P)
    m = len(pairs)
    pa, pb = np.asarray(pairs).T
    K, T = np.array(K0, dtype=np.float64), np.array(K0, dtype=np.float64)
    K1, T1 = np.zeros(m), np.zeros(m)
    V, VR = np.zeros((2 * m, 2 * m)), np.zeros((P * P, P * P))
    for l, (sl, bl) in enumerate(zip(s, b)):
        F, G = gram(act, K), dgram(act, K)
        if l >= 1:                                      # layer 0 (the read-in) is exact: no correction yet
            K1, T1, D, DG, JR = _means(act, K, T, K1, T1, V, VR, sl, pairs)
            A = np.block([[sl * D, np.zeros((m, m))], [sl * (D + T[pa, pb][:, None] * DG), sl * np.diag(G[pa, pb])]])
            V, VR = A @ V @ A.T, sl ** 2 * (JR @ VR @ JR.T)
        Sig, SR = _noise(act, K, T, F, G, pairs)
        V, VR = V + sl ** 2 * Sig, VR + sl ** 2 * SR
        K, T = sl * F + bl, sl * (F + G * T) + bl
    return K, T, to_matrix(K1, pairs, P), to_matrix(T1, pairs, P)
