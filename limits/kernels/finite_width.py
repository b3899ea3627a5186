"""O(1/N) finite-width corrections of the kernels at initialisation (docs/theory/finite_width.rst).

For the networks ``model.finite(N)`` builds (pre-activation MLP or one-layer-block ResNet, NTK or SP
parameterisation), every hidden block's conditional covariance ("C^l") is an average over N iid
neurons::

    C^l = s_l ⊙ (1/N) Σ_i φ(h^{l-1}_i) φ(h^{l-1}_i)ᵀ + b_l,   l = 1..L+1   (L+1 = read-out)

with s_l = ρ²σ_w², b_l = ρ²σ_b² (σ²_w,out, σ²_b,out at the read-out); given layer l−1 the
pre-activations of layer l are exactly Gaussian, h^l_i ~ N(0, C^l) (MLP) or h^l_i = h^{l-1}_i + ξ^l_i,
ξ^l_i ~ N(0, C^l) (ResNet). Writing ξ^l_i = A(C^l) u^l_i with iid standard normal u_i makes
(C^1, …, C^{L+1}) the root of an estimating equation (1/N) Σ_i ψ(u_i, C) = 0 with
ψ(u, C) = C − s ⊙ g(u; C) − b, g^l = φφᵀ(h^{l-1}) — a Z-estimator. Its second-order expansion
(e.g. Rilstone, Srivastava & Ullah 1996) gives, with M = E ∂ψ = I − J (J_lk = s_l D(K^{l-1}), D the
Price Jacobian; MLP: k = l−1 only, ResNet: every k < l) and V = N·Cov(C) = M⁻¹ Σ M⁻ᵀ
(:mod:`limits.kernels.fluctuations`)::

    N (E[C] − C*) = M⁻¹ [ ½ s ⊙ ∂²F(K^{l-1}) : V_K^{l-1}  +  s ⊙ E[∂_C g(u) · M⁻¹ (s ⊙ (g(u) − E g))] ] + O(1/N)

V_K^{l-1} = N·Cov(K^{l-1}) (MLP: V^{l-1}; ResNet: Σ_{a,b<l} V^{ab}). The second term vanishes for
MLPs (layer l's neurons are fresh) — then this is the recursion of Roberts, Yaida & Hanin (2022,
Eq. 4.115 / 5.x): K1^{l+1} = s [D·K1^l + ½ ∂²F : V^l]. For ResNets it is the neuron's self-interaction
(each neuron's own past enters the kernels it then sees), a Price derivative of a connected
four-point function. E[stream Gram] = K⁰ + Σ_{k≤l} E[C^k] exactly (ResNet), = E[C^l] (MLP).

NTK (NTK parameterisation): Θ is :func:`limits.kernels.kernel`'s NTK itself. Θ1 of MLPs comes from the tangent
network (:mod:`limits.kernels.finite_width_ntk`): E[Θ_N] = E[C_ḣḣ] at the read-out, a recursion with exact Price/Stein
derivatives (:mod:`limits.kernels.price`) — nothing is differentiated numerically, so relu's kink at correlation 1 is
never crossed. ResNets with a smooth activation: Price's theorem in parameter space, E[Θ_N(x, x')] =
∂/∂c E[f(x; θ) f(x'; θ_c)] at c = 1 (θ_c a copy at correlation c; every cross block of the coupled system × c), a cubic
in c through c = 1 − kε (smooth in c for smooth φ); for relu ResNets Θ1 is not computed (that derivative would cross the
kink). N·Var(Θ_N) (MLPs): :func:`_theta_var`. Duplicate inputs are merged first (one Gaussian variable).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..checks import finite_array
from ..results import Result, model_label
from .expectations import gram
from .fluctuations import pair_index, price_jacobian, to_matrix
from .price import hessian_contract, jacobian, pair_derivatives
from .selfinteraction import connected_rows, joint_nodes, phiphi_cov, self_tensor


@dataclass(frozen=True)
class FiniteWidth(Result):
    """O(1/N) corrections: E[K_N] = K + K1/N + O(1/N²) for ``model.finite(N)``.

    ``K``, ``K1`` (P1×P2): read-out NNGP E[f fᵀ] (per output) and its correction; ``K_layers``,
    ``K1_layers`` (L+1, P1, P2): the stream Grams h^l h^lᵀ/N (l = 0..L); ``var_K`` (P1×P2):
    N·Var of the empirical read-out kernel C^{L+1} (the per-init noise a Monte Carlo estimate of K1 sees);
    ``var_K_layers`` likewise per layer (stream Grams); ``params_cov``: the full N·Cov (pairs α ≤ β of
    X1, order :func:`limits.kernels.fluctuations.pair_index`) of the read-out C^{L+1} (None with X2); ``Theta``, ``Theta1``: the NTK (NTK
    parameterisation) and its O(1/N) mean correction (None for SP); ``Theta_var``: N·Var(Θ_N) of each
    entry (MLPs; None for ResNets and compositions, see ``note``)."""

    K: np.ndarray
    K1: np.ndarray
    K_layers: np.ndarray
    K1_layers: np.ndarray
    var_K: np.ndarray
    var_K_layers: np.ndarray
    Theta: np.ndarray | None
    Theta1: np.ndarray | None
    Theta_var: np.ndarray | None
    params: dict
    note: str = ""
    params_cov: np.ndarray | None = None

    def predict(self, width, which="K"):
        """K + K1/N (``which="K"``), Θ + Θ1/N (``"Theta"``) or the per-layer stack (``"K_layers"``)."""
        N = float(width)
        base, corr = {"K": (self.K, self.K1), "Theta": (self.Theta, self.Theta1),
                      "K_layers": (self.K_layers, self.K1_layers)}[which]
        if base is None:
            raise ValueError(f"which={which!r}: not computed for this model ({self.note})")
        return base + corr / N

    def width_for(self, tol, which="K"):
        """Smallest width N with abs(K1)/N ≤ tol·abs(K) on every entry of the kernel ``which`` (the "N ≥ 180
        for 1 %" of the leading-order correction); ``tol`` relative. ``which``: "K" the read-out NNGP alone
        (default), "Theta" the NTK alone, "K_layers" the stream Grams of the hidden layers, "all" the largest
        of the read-out NNGP and the NTK — what ``limits.check`` of this result reports as its width (it tests
        both; with ``layers=True`` also the stream Grams)."""
        if which == "all":
            return max(self.width_for(tol, w) for w in ("K", "Theta") if getattr(self, w) is not None)
        pairs = {"K": (self.K, self.K1), "Theta": (self.Theta, self.Theta1),
                 "K_layers": (self.K_layers[1:], self.K1_layers[1:])}
        if which not in pairs:
            raise ValueError(f"which must be 'K', 'Theta', 'K_layers' or 'all', got {which!r}")
        base, corr = pairs[which]
        if base is None:
            raise ValueError(f"which={which!r}: not computed for this model")
        tol = float(tol)
        if not tol > 0:
            raise ValueError(f"tol must be > 0, got {tol}")
        return relative_width(base, corr, tol)

    def __str__(self):
        P1, P2 = self.K.shape
        rel = lambda b, c: float(np.max(np.abs(c) / np.maximum(np.abs(b), 1e-300)))  # noqa: E731
        parts = [f"FiniteWidth: O(1/N) corrections E[K_N] = K + K1/N of {model_label(self.params.get('model'))} "
                 f"on {P1}×{P2} inputs",
                 f"read-out NNGP: max |K1/K| = {rel(self.K, self.K1):.4g}, within 1 % from N ≥ {self.width_for(0.01)} "
                 "(width_for(0.01))"]
        if self.Theta is not None:
            parts.append(f"NTK: max |Θ1/Θ| = {rel(self.Theta, self.Theta1):.4g}, within 1 % from "
                         f"N ≥ {self.width_for(0.01, 'Theta')} (width_for(0.01, 'Theta'))")
        if self.note:
            parts.append(self.note)
        return "; ".join(parts)

    def plot(self, target=None, tol=0.01):
        """The predicted largest relative correction max abs(K1)/(N abs(K)) against N for the read-out NNGP and the
        NTK, with the widths from which each is within ``tol`` (:meth:`width_for`). ``target``: a path, an
        Axes or None (:func:`limits.style.plot_target`); returns the Figure."""
        from ..style import PALETTE, plot_target

        pt = plot_target(target, 1, figsize=(4.8, 3.4), what="FiniteWidth.plot")
        ax = pt.axes[0]
        kinds = [("read-out NNGP", "K", self.K, self.K1)]
        if self.Theta is not None:
            kinds.append(("NTK", "Theta", self.Theta, self.Theta1))
        n_max = max(self.width_for(tol, w) for _, w, _, _ in kinds)
        N = np.geomspace(1.0, 4.0 * max(n_max, 4), 100)
        for i, (label, w, b, c) in enumerate(kinds):
            r = float(np.max(np.abs(c) / np.maximum(np.abs(b), 1e-300)))
            n = self.width_for(tol, w)
            ax.plot(N, r / N, color=PALETTE[i], label=f"{label}: N ≥ {n} for {tol:.0%}")
            ax.axvline(n, color=PALETTE[i], lw=0.8, ls=":")
        ax.axhline(tol, color="0.5", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("width N")
        ax.set_ylabel("max |K1| / (N |K|)")
        ax.legend(fontsize=7)
        return pt.finish()


def relative_width(base, corr, tol) -> int:
    """Smallest N with abs(corr)/N ≤ tol·abs(base) on every entry: ⌈max abs(corr/base) / tol⌉."""
    ratio = np.abs(corr) / np.maximum(np.abs(base), 1e-300)
    return int(np.ceil(float(np.max(ratio)) / tol))


# --------------------------------------------------------------------------------- Price contraction
def _hessian_contract(act, K, W, pairs):
    """(∂²F/∂K∂K : W)_p for F_p = E_{N(0,K)}[φ_a φ_b], W an m×m symmetric (pair coordinates): the exact
    second Price derivatives of :mod:`limits.kernels.price` (closed forms for relu; no finite differences)."""
    if not np.any(W):
        return np.zeros(len(pairs))
    return hessian_contract(pair_derivatives(act, K, 0), 0.5 * (W + W.T), pairs)


# --------------------------------------------------------------------------------- the recursion
def _pairs_vec(A, pairs):
    return np.array([A[a, b] for a, b in pairs])


def _system(act, K0, S, B, residual):
    """Limits and O(1/N) terms of the C^l (l = 1..L+1) for per-entry scales S[l-1], biases B[l-1].

    Returns (Ks, Cs, K1C, V, pairs): Ks[l] = K^l (l = 0..L), Cs[l-1] = C^l, K1C (L+1, m) = N·(E C − C*),
    V = N·Cov of the stacked C (m(L+1) square)."""
    from scipy.linalg import solve_triangular

    P = K0.shape[0]
    L = len(S) - 1
    pairs = pair_index(P)
    m = len(pairs)
    s = [_pairs_vec(Sl, pairs) for Sl in S]
    Ks, Cs = [K0], []
    for l in range(1, L + 2):
        C = S[l - 1] * gram(act, Ks[l - 1]) + B[l - 1]
        Cs.append(C)
        if l <= L:
            Ks.append(Ks[l - 1] + C if residual else C)
    n = (L + 1) * m
    blk = lambda l: slice((l - 1) * m, l * m)   # noqa: E731 — block of C^l

    def cross(a, b):                             # Cov(h^{a}, h^{b}) of one neuron's trajectory
        if a == b:
            return Ks[a]
        return Ks[min(a, b)] if residual else np.zeros((P, P))

    Sig = np.zeros((n, n))
    for a in range(1, L + 2):
        for b in range(a, L + 2):
            if not residual and a != b:
                continue
            c = phiphi_cov(act, Ks[a - 1], Ks[b - 1], cross(a - 1, b - 1), pairs, a == b)
            c = c * np.outer(s[a - 1], s[b - 1])
            Sig[blk(a), blk(b)] = c
            Sig[blk(b), blk(a)] = c.T
    M = np.eye(n)
    Ds = [price_jacobian(act, Ks[l - 1]) for l in range(1, L + 2)]
    for l in range(2, L + 2):
        J = s[l - 1][:, None] * Ds[l - 1]
        for k in (range(1, l) if residual else [l - 1]):
            M[blk(l), blk(k)] -= J
    Y = solve_triangular(M, Sig, lower=True, unit_diagonal=True)
    V = solve_triangular(M, Y.T, lower=True, unit_diagonal=True)
    V = 0.5 * (V + V.T)
    Minv = solve_triangular(M, np.eye(n), lower=True, unit_diagonal=True)
    v = np.zeros(n)
    for l in range(2, L + 2):
        ks = range(1, l) if residual else [l - 1]
        sel = np.concatenate([np.arange((k - 1) * m, k * m) for k in ks])
        WK = V[np.ix_(sel, sel)].reshape(len(ks), m, len(ks), m).sum(axis=(0, 2))
        v[blk(l)] = 0.5 * s[l - 1] * _hessian_contract(act, Ks[l - 1], WK, pairs)
        if residual:
            for j in range(1, l):
                A = sum(Minv[blk(k), blk(j)] for k in range(j, l))          # Σ_{k=j}^{l-1} (M⁻¹)_{kj}
                R = self_tensor(act, Ks[l - 1], Ks[j - 1], Ks[j - 1], pairs)
                v[blk(l)] += s[l - 1] * np.einsum("pqr,qr,r->p", R, A, s[j - 1])
    K1C = solve_triangular(M, v, lower=True, unit_diagonal=True).reshape(L + 1, m)
    return Ks, Cs, K1C, V, pairs


def _stream(K1C, V, pairs, P, L, residual):
    """Per-layer stream Grams: K1 (L+1, P, P) and N·Var (L+1, P, P) (the Gram's own sampling noise is
    not in V; the stream variance reported here is that of the conditional covariances)."""
    m = len(pairs)
    K1 = np.zeros((L + 1, P, P))
    var = np.zeros((L + 1, P, P))
    for l in range(1, L + 1):
        ks = range(1, l + 1) if residual else [l]
        K1[l] = to_matrix(sum(K1C[k - 1] for k in ks), pairs, P)
        sel = np.concatenate([np.arange((k - 1) * m, k * m) for k in ks])
        sub = V[np.ix_(sel, sel)].reshape(len(ks), m, len(ks), m).sum(axis=(0, 2))
        var[l] = to_matrix(np.diag(sub), pairs, P)
    return K1, var


def _layer_scales(model, P, mask=None):
    v = model.variances()
    r2 = model.branch ** 2
    L = model.depth
    one = np.ones((P, P)) if mask is None else mask
    S = [r2 * v["sigma_w2"] * one] * L + [v["sigma_w2_out"] * one]
    B = [r2 * v["sigma_b2"] * one] * L + [v["sigma_b2_out"] * one]
    return S, B


def _read_in(model, X):
    v = model.variances()
    return v["sigma_w2_in"] * (X @ X.T) / X.shape[1] + v["sigma_b2_in"]


def _readout_K1(model, X, mask=None):
    """(K_out, K1_out, K_layers, K1_layers, var_out, var_layers) on the rows of X (P×d_in)."""
    P = X.shape[0]
    K0 = _read_in(model, X)
    if mask is not None:
        K0 = K0 * mask
    S, B = _layer_scales(model, P, mask)
    L = model.depth
    Ks, Cs, K1C, V, pairs = _system(model.act, K0, S, B, model.residual)
    m = len(pairs)
    K1_layers, var_layers = _stream(K1C, V, pairs, P, L, model.residual)
    K_layers = np.stack(Ks)
    K1_out = to_matrix(K1C[L], pairs, P)
    var_out = to_matrix(np.diag(V[L * m:, L * m:]), pairs, P)
    return Cs[L], K1_out, K_layers, K1_layers, var_out, var_layers, V[L * m:, L * m:]


def _theta1(model, Z, eps=1e-3, npts=4):
    """(Θ, Θ1) on the rows of Z by ∂_c at c = 1 of the coupled pair of networks (module docstring):
    polynomial of degree ``npts``−1 through c = 1 − kε, k = 1..npts, differentiated at c = 1."""
    P = Z.shape[0]
    ZZ = np.vstack([Z, Z])
    cs = 1.0 - eps * np.arange(1, npts + 1)
    K_ab, K1_ab = [], []
    for c in cs:
        mask = np.ones((2 * P, 2 * P))
        mask[:P, P:] = c
        mask[P:, :P] = c
        Kc, K1c = _readout_K1(model, ZZ, mask)[:2]
        K_ab.append(Kc[:P, P:])
        K1_ab.append(K1c[:P, P:])
    # derivative at c = 1 of the interpolating polynomial in t = (1 − c)/ε: Lagrange weights
    t = np.arange(1, npts + 1, dtype=float)
    w = np.zeros(npts)
    for i in range(npts):
        others = np.delete(t, i)
        # d/dt of Π (t − t_j)/(t_i − t_j) at t = 0
        den = np.prod(t[i] - others)
        dsum = 0.0
        for j in range(len(others)):
            dsum += np.prod(np.delete(0.0 - others, j))
        w[i] = dsum / den
    d = lambda arr: -np.tensordot(w, np.stack(arr), axes=1) / eps   # noqa: E731 — dc = −ε dt
    T, T1 = d(K_ab), d(K1_ab)
    return 0.5 * (T + T.T), 0.5 * (T1 + T1.T)


def _neuron_moments(act, K, s, pairs):
    """(per-neuron Cov of the rows (s φφ_p, φ'φ'_p) over pairs p (2m×2m), E[φ'_αφ'_βφ'_γφ'_δ] (P⁴)) under N(0, K): one
    joint rule when it applies (:func:`selfinteraction.joint_nodes`), else per quadruple (:func:`fourpoint.expect4_many`:
    relu without crossing its kinks, any P)."""
    from .expectations import dgram
    from .fourpoint import expect4_many

    P, m = K.shape[0], len(pairs)
    pr = np.asarray(pairs)
    pa, pb = pr.T
    nodes = joint_nodes(act, K, K, K, True)
    if nodes is not None:
        x, _, W = nodes
        f, g = act.phi(x), act.dphi(x)
        rows = np.concatenate([s * f[pa] * f[pb], g[pa] * g[pb]])
        return connected_rows(rows, rows, W), np.einsum("aq,bq,cq,dq,q->abcd", g, g, g, g, W)
    f, g = act.phi, act.dphi
    ia, ib = np.repeat(np.arange(m), m), np.tile(np.arange(m), m)
    idx = np.concatenate([pr[ia], pr[ib]], axis=1)                                   # (m², 4) variables
    ffff, ffgg, gggg = expect4_many(act, [[f] * 4, [f, f, g, g], [g] * 4], K[idx[:, :, None], idx[:, None, :]])
    F, G = gram(act, K)[pa, pb], dgram(act, K)[pa, pb]
    Sl = np.block([[s * s * (ffff.reshape(m, m) - np.outer(F, F)), s * (ffgg.reshape(m, m) - np.outer(F, G))],
                   [s * (ffgg.reshape(m, m).T - np.outer(G, F)), gggg.reshape(m, m) - np.outer(G, G)]])
    quad = np.array(np.meshgrid(*[np.arange(P)] * 4, indexing="ij")).reshape(4, -1).T
    E4 = expect4_many(act, [[g] * 4], K[quad[:, :, None], quad[:, None, :]])[0].reshape(P, P, P, P)
    return Sl, E4


def _theta_var(model, X):
    """N·Var(Θ_N) entrywise (P×P) for an MLP in the NTK parameterisation (docs/theory/finite_width.rst §3):

    Θ_out = C^{L+1} + σ²_out/N · w_outᵀ A^L w_out exactly, A^l_{kk'} = φ'_k Θ^l_{kk'} φ'_{k'} (Θ^l the
    neuron-space NTK of layer l), so N·Var = N·Var(C^{L+1} + σ²_out T̂^L) + Ω^{L+1}_{αβ,αβ} + Ω^{L+1}_{αβ,βα}
    with T̂^l = (1/N) Σ_k φ'φ'(h^l_k) Θ^l_kk and Ω^l = N·E[Θ^l_{kk'} ⊗ Θ^l_{kk'}] (k ≠ k'):

      Ω^{l+1}_{αβγδ} = σ⁴ [E[φ'_αφ'_βφ'_γφ'_δ] Θ^l_{αβ}Θ^l_{γδ} + E[φ'_αφ'_γ] E[φ'_βφ'_δ] Ω^l_{αβγδ}],  Ω⁰ = 0;
      δC^{l+1} = J δC^l + ξ^{l+1},  δT̂^l = Θ^l ⊙ (D'δC^l + ν^l) + G'^l ⊙ (δC^l + σ² δT̂^{l−1}),

    ξ^{l+1}, ν^l the sampling noise of s φφ and φ'φ' over the N neurons of layer l (jointly Gaussian,
    per-neuron covariance under N(0, K^l)), D' = ∂E[φ'φ']/∂K (exact Price derivatives,
    :mod:`limits.kernels.price`), G'^l = E[φ'φ'] (:func:`_neuron_moments`)."""
    from .expectations import dgram

    act = model.act
    v = model.variances()
    L = model.depth
    P = X.shape[0]
    pairs = pair_index(P)
    m = len(pairs)
    pa, pb = np.array(pairs).T
    sw, sout = v["sigma_w2"], v["sigma_w2_out"]
    s = [sw] * L + [sout]
    b = [v["sigma_b2"]] * L + [v["sigma_b2_out"]]
    K = _read_in(model, X)
    Th = K.copy()
    Om = np.zeros((P, P, P, P))
    cov = np.zeros((2 * m, 2 * m))              # state (δC^l, δT̂^{l−1}) in pair coordinates
    for l in range(L + 1):
        Gp = dgram(act, K)
        Sl, E4 = _neuron_moments(act, K, s[l], pairs)
        A = np.zeros((2 * m, 2 * m))
        if l >= 1:          # D' = ∂E[φ'φ']/∂K (exact; the read-in layer l = 0 has no fluctuation to carry)
            D, Dp = price_jacobian(act, K), jacobian(pair_derivatives(act, K, 1, second=False), pairs)
            A[:m, :m] = s[l] * D                                     # δC^{l+1} from δC^l
            A[m:, :m] = Th[pa, pb][:, None] * Dp + np.diag(Gp[pa, pb])
            A[m:, m:] = np.diag(sw * Gp[pa, pb])
        B = np.zeros((2 * m, 2 * m))
        B[:m, :m] = np.eye(m)
        B[m:, m:] = np.diag(Th[pa, pb])
        cov = A @ cov @ A.T + B @ Sl @ B.T
        Om = s[l] ** 2 * (E4 * np.einsum("ab,cd->abcd", Th, Th) + np.einsum("ac,bd->abcd", Gp, Gp) * Om)
        # next layer's limits: K^{l+1} = C^{l+1}, Θ^{l+1} = C^{l+1} + σ² G'^l ⊙ Θ^l
        C = s[l] * gram(act, K) + b[l]
        Th = C + s[l] * Gp * Th
        K = C
    lin = np.hstack([np.eye(m), sout * np.eye(m)])                  # δΘ_out = δC^{L+1} + σ²_out δT̂^L
    coll = np.diag(lin @ cov @ lin.T)
    out = to_matrix(coll, pairs, P)
    idx = np.arange(P)
    out += Om[idx[:, None], idx[None, :], idx[:, None], idx[None, :]]
    out += Om[idx[:, None], idx[None, :], idx[None, :], idx[:, None]]
    return out


def _merge_duplicates(Z):
    """(U, inv): the distinct rows of Z in order of first appearance and Z = U[inv]. Duplicate inputs are
    one Gaussian variable (correlation exactly 1, where relu's kernel is not differentiable): the
    corrections are computed on U and copied."""
    _, first, inv = np.unique(Z, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return Z[first[order]], rank[np.ravel(inv)]


def _expand_pairs_cov(V, inv):
    """N·Cov over the pairs (α ≤ β) of the original rows from the one over the distinct rows."""
    Pu = int(inv.max()) + 1
    pos = {p: n for n, p in enumerate(pair_index(Pu))}
    idx = np.array([pos[tuple(sorted((inv[a], inv[b])))] for a, b in pair_index(inv.size)])
    return V[np.ix_(idx, idx)]


def _ntk_parts(m, Z, notes):
    """(Θ, Θ1, N·Var Θ) on the rows of Z: Θ is limits.kernels.kernel's NTK itself; Θ1 from the tangent
    network (MLPs, :mod:`limits.kernels.finite_width_ntk`) or, for ResNets with a smooth activation, the
    derivative in c of the coupled pair of networks (:func:`_theta1`); N·Var(Θ) for MLPs."""
    from .cross import kernel
    from .finite_width_ntk import theta_mlp

    T = kernel(m, Z, get=("ntk",)).ntk
    if m.residual:
        notes.append("Theta_var (N·Var of the NTK) is derived for MLPs only")
        if not (m.act.smooth and m.act.exact_derivatives):
            notes.append(f"Theta1 of a ResNet is derived here by a derivative in the correlation c of two coupled "
                         f"networks, which crosses the kink of a non-smooth activation at c = 1 ({m.activation_name}): "
                         "not computed (MLPs use the exact tangent-network recursion)")
            return T, None, None
        return T, _theta1(m, Z)[1], None
    S, B = _layer_scales(m, Z.shape[0])
    try:
        T1 = theta_mlp(m.act, _read_in(m, Z), [x[0, 0] for x in S], [x[0, 0] for x in B])[3]
    except ValueError as exc:                  # a user activation without φ‴
        notes.append(f"Theta1 not computed: {exc}")
        T1 = None
    return T, T1, _theta_var(m, Z)


def _inputs(m, X1, X2):
    X1 = finite_array(X1, "X1", ndim=2)
    if X1.shape[1] != m.d_in:
        raise ValueError(f"X1 has {X1.shape[1]} columns but the model has d_in = {m.d_in}")
    if X2 is not None:
        X2 = finite_array(X2, "X2", ndim=2)
        if X2.shape[1] != m.d_in:
            raise ValueError(f"X2 has {X2.shape[1]} columns but the model has d_in = {m.d_in}")
    return X1, X2


def _local_route(S, X1, X2, var):
    """Whether K1 of the composition comes from :mod:`limits.kernels.finite_width_local` (two hidden layers, only the
    four-point functions K1 needs; no N·Var): ``var=False``, or ``var="auto"`` when the general route's Σ would
    exceed ``LOCAL_ABOVE`` four-point functions."""
    from .finite_width_local import LOCAL_ABOVE, plan

    if var is True or plan(S) is None or np.asarray(X1).ndim < 2:
        return False
    if var is False:
        return True
    n = (np.asarray(X1).shape[0] + (0 if X2 is None else np.asarray(X2).shape[0])) * int(np.prod(np.shape(X1)[1:-1]))
    m = n * (n + 1) // 2
    return m * (m + 1) // 2 > LOCAL_ABOVE


def _composition(S, X1, X2, ntk, var="auto"):
    """finite_width of a composition (``limits.serial``): through the Model it spells when it is a fully connected
    MLP/ResNet (per-layer corrections, Θ1), else the layer-by-layer rules of :mod:`limits.kernels.finite_width_serial`
    (read-out K1; layers without a derived correction are refused by name) or, for two hidden layers on many indices,
    :mod:`limits.kernels.finite_width_local` (``var``: :func:`_local_route`)."""
    from .composed import kernel as composed_kernel
    from .finite_width_serial import finite_width_serial, model_of

    X1 = np.asarray(X1, dtype=np.float64)
    m = model_of(S, X1.shape[1]) if X1.ndim == 2 else None
    if m is not None:
        r = finite_width(m, X1, X2, ntk=ntk)
        note = f"the composition is {m.describe()}" + (f"; {r.note}" if r.note else "")
        return replace(r, note=note, params={**r.params, "serial": S.to_dict()})
    X1 = finite_array(X1, "X1")
    X2 = None if X2 is None else finite_array(X2, "X2")
    notes = []
    if _local_route(S, X1, X2, var):
        from .finite_width_local import finite_width_local

        K, K1 = finite_width_local(S, X1, X2)
        var, V = np.full_like(K, np.nan), None
        notes.append("var_K (N·Var of the read-out) not computed: K1 by the local route (only the four-point functions "
                     "K1 needs, limits.kernels.finite_width_local); var=True for the general route (m² of them)")
    else:
        K, K1, var, V = finite_width_serial(S, X1, X2)
    T = composed_kernel(S, X1, X2, ("ntk",)).ntk if ntk else None
    if ntk:
        notes.insert(0, "Theta1 (the NTK's 1/N correction) is derived for the MLPs of limits.mlp, not for this "
                        "composition")
    note = "; ".join(notes)
    params = {"serial": S.to_dict(), "X1": X1, **({"X2": X2} if X2 is not None else {})}
    return FiniteWidth(K, K1, K[None], K1[None], var, var[None], T, None, None, params, note, V)


def finite_width(model, X1, X2=None, *, ntk=True, var="auto") -> FiniteWidth:
    """O(1/N) corrections of the read-out NNGP (per layer too) and of the NTK mean for ``model``'s
    finite networks on inputs X1 (× X2): E[K_N] = K + K1/N + O(1/N²) (module docstring). ``model`` may be a
    composition (``limits.serial``): docs/theory/finite_width.rst §8. ``var`` (compositions with two hidden layers):
    True — N·Var of the read-out too (all m² four-point functions); False — K1 only, from the four-point functions it
    needs (:mod:`limits.kernels.finite_width_local`; ``var_K`` NaN); "auto" — False above ``LOCAL_ABOVE`` of them."""
    from ..layers import as_serial
    from ..model import ModelError, as_model

    if var not in (True, False, "auto"):
        raise ValueError(f"var must be True, False or 'auto', got {var!r}")
    S = as_serial(model)
    if S is not None:
        return _composition(S, X1, X2, ntk, var)
    m = as_model(model)
    what = "limits.kernels.finite_width"
    m.require(what, kernel_regime=True, block_layers_one=True, pre_activation=True)
    if m.depth < 1:
        raise ModelError(f"{what} cannot treat this model: depth = 0 (no hidden N×N block; nothing is O(1/N))")
    X1, X2 = _inputs(m, X1, X2)
    P1 = X1.shape[0]
    U, inv = _merge_duplicates(X1 if X2 is None else np.vstack([X1, X2]))
    grow = lambda A: None if A is None else A[..., inv[:, None], inv[None, :]]   # noqa: E731
    cut = (lambda A: None if A is None else A[..., :P1, P1:]) if X2 is not None else (lambda A: A)   # noqa: E731
    K, K1, KL, K1L, var, varL, Vout = _readout_K1(m, U)
    T = T1 = TV = None
    notes = []
    if ntk and m.param_name == "NTK":
        T, T1, TV = (cut(grow(A)) for A in _ntk_parts(m, U, notes))
    elif ntk:
        notes.append("Theta/Theta1 need parameterisation='NTK' (the SP NTK grows ∝ N)")
    params = {"model": m.to_dict() if isinstance(m.activation, str) else None, "X1": X1,
              "X2": X2 if X2 is not None else None}
    return FiniteWidth(*(cut(grow(A)) for A in (K, K1, KL, K1L, var, varL)), T, T1, TV,
                       {k: v for k, v in params.items() if v is not None}, "; ".join(notes),
                       _expand_pairs_cov(Vout, inv) if X2 is None else None)
