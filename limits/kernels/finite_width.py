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

NTK (NTK parameterisation): with all trained parameters θ ~ N(0, 1), Price's theorem in parameter
space gives E[Θ_N(x, x')] = ∂/∂c E[f(x; θ) f(x'; θ_c)] at c = 1, θ_c a copy with correlation c.
The two networks form one coupled system whose kernel recursion is the one above with every
cross block (read-in, weights, biases, read-out) multiplied by c — so Θ1 = ∂_c K1_AB(c)|_{c=1}
exactly, evaluated by a one-sided polynomial difference in c. N·Var(Θ_N) (MLPs): :func:`_theta_var`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import finite_array
from ..results import Result, model_label
from .expectations import gram
from .fluctuations import pair_index, price_jacobian
from .fourpoint import merge_pattern as _merge_pattern, cov4, cov4_erf, rule


@dataclass(frozen=True)
class FiniteWidth(Result):
    """O(1/N) corrections: E[K_N] = K + K1/N + O(1/N²) for ``model.finite(N)``.

    ``K``, ``K1`` (P1×P2): read-out NNGP E[f fᵀ] (per output) and its correction; ``K_layers``,
    ``K1_layers`` (L+1, P1, P2): the stream Grams h^l h^lᵀ/N (l = 0..L); ``var_K`` (P1×P2):
    N·Var of the empirical read-out kernel C^{L+1} (the per-init noise a Monte Carlo estimate of K1 sees);
    ``var_K_layers`` likewise per layer (stream Grams); ``params_cov``: the full N·Cov (pairs α ≤ β of
    X1, order :func:`limits.kernels.fluctuations.pair_index`) of the read-out C^{L+1} (None with X2); ``Theta``, ``Theta1``: the NTK (NTK
    parameterisation) and its O(1/N) mean correction (None for SP); ``Theta_var``: N·Var(Θ_N) of each
    entry (MLPs with at most 4 inputs in X1 ∪ X2; otherwise None, see ``note``)."""

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


# --------------------------------------------------------------------------------- four-point pieces
def _connected(fx, phi, S4):
    """Connected E[fx(x₁, x₂) φ(y₁) φ(y₂)] − E[fx] E[φφ] for a batch of 4×4 covariances of
    (x₁, x₂, y₁, y₂); coincident variables merged, tensor Gauss–Hermite rule (as fourpoint.cov4)."""
    S4 = np.asarray(S4, dtype=np.float64)
    out = np.empty(S4.shape[0])
    groups: dict = {}
    for b in range(S4.shape[0]):
        groups.setdefault(_merge_pattern(S4[b]), []).append(b)
    for (pat, reps), members in groups.items():
        Z, W = rule(len(reps))
        mem = np.asarray(members)
        S = S4[np.ix_(mem, reps, reps)]
        lam, V = np.linalg.eigh(0.5 * (S + S.transpose(0, 2, 1)))
        R = V * np.sqrt(np.clip(lam, 0.0, None))[:, None, :]
        step = max(1, 2_000_000 // Z.shape[0])
        for s0 in range(0, len(mem), step):
            sl = slice(s0, s0 + step)
            pts = np.matmul(R[sl], Z.T)                                   # (b, r, Q)
            ex = fx(pts[:, pat[0], :], pts[:, pat[1], :])
            py = phi(pts)
            ey = py[:, pat[2], :] * py[:, pat[3], :]
            out[mem[sl]] = (ex * ey) @ W - (ex @ W) * (ey @ W)
    return out


def _cov_phiphi(act, S4):
    kinds = np.ones((S4.shape[0], 2), bool)
    if str(getattr(act, "name", "")) == "erf":
        return cov4_erf(kinds, S4)[0]
    return cov4(act.phi, kinds, S4)[0]


_JOINT_MAX = 4        # joint tensor rule (fourpoint.rule) up to this many Gaussian variables
_JOINT_ORDER = {1: 128, 2: 128, 3: 48, 4: 24}


def _joint_nodes(Kx, Ky, Kxy, same):
    """Nodes of the joint Gaussian of (x, y) (one block when ``same``): x (P, Q), y (P, Q), weights (Q,);
    None when the joint dimension exceeds ``_JOINT_MAX`` (callers then use per-quadruple rules)."""
    P = Kx.shape[0]
    Kj = Kx if same else np.block([[Kx, Kxy], [Kxy.T, Ky]])
    n = Kj.shape[0]
    if n > _JOINT_MAX:
        return None
    Z, W = rule(n, _JOINT_ORDER[n])
    lam, V = np.linalg.eigh(0.5 * (Kj + Kj.T))
    pts = (V * np.sqrt(np.clip(lam, 0.0, None))) @ Z.T
    return (pts, pts, W) if same else (pts[:P], pts[P:], W)


def _connected_rows(Fx, Gy, W):
    """Connected moments E[F G] − E[F] E[G] for rows of node values Fx (a, Q), Gy (b, Q)."""
    return (Fx * W) @ Gy.T - np.outer(Fx @ W, Gy @ W)


def _four(Kx, Ky, Kxy, pairs_x, pairs_y):
    """Batch of 4×4 covariances of (x_a, x_b, y_c, y_d) for every (pair_x, pair_y)."""
    px = np.asarray(pairs_x)
    py = np.asarray(pairs_y)
    ix = np.repeat(px, len(py), axis=0)
    iy = np.tile(py, (len(px), 1))
    S = np.empty((ix.shape[0], 4, 4))
    for u in range(2):
        for v in range(2):
            S[:, u, v] = Kx[ix[:, u], ix[:, v]]
            S[:, 2 + u, 2 + v] = Ky[iy[:, u], iy[:, v]]
            S[:, u, 2 + v] = S[:, 2 + v, u] = Kxy[ix[:, u], iy[:, v]]
    return S


def _hessian_contract(act, K, W, pairs):
    """(∂²F/∂K∂K : W)_p for F_p = E_{N(0,K)}[φ_a φ_b], W an m×m symmetric (pair coordinates):
    Σ_k λ_k d/dε [D(K + ε U_k) u_k] over W's eigenpairs (central difference of the Price Jacobian)."""
    m = len(pairs)
    lam, U = np.linalg.eigh(0.5 * (W + W.T))
    keep = np.abs(lam) > 1e-14 * max(1e-300, float(np.max(np.abs(lam))))
    out = np.zeros(m)
    if not np.any(keep):
        return out
    pa = np.array([p[0] for p in pairs])
    pb = np.array([p[1] for p in pairs])
    # step: small against every 2×2 sub-block's smallest eigenvalue (near-degenerate pairs in the c-system)
    k11, k22, k12 = K[pa, pa], K[pb, pb], K[pa, pb]
    off = pa != pb
    tr, det = k11 + k22, k11 * k22 - k12 ** 2
    emin = np.where(off, det / np.maximum(0.5 * tr + np.sqrt(np.maximum(0.25 * tr ** 2 - det, 0)), 1e-300), k11)
    pos = emin[emin > 1e-12 * np.max(np.diag(K))]
    eps = 1e-4 * float(np.min(pos)) if pos.size else 1e-6 * float(np.max(np.diag(K)))
    for lk, u in zip(lam[keep], U[:, keep].T):
        Um = np.zeros_like(K)
        Um[pa, pb] = u
        Um[pb, pa] = u
        Dp = price_jacobian(act, K + eps * Um)
        Dm = price_jacobian(act, K - eps * Um)
        out += lk * ((Dp - Dm) @ u) / (2 * eps)
    return out


def _self_tensor(act, Kx, Ky, Kxy, pairs):
    """R[p, q, r] = ∂/∂(Kx)_q Cov(φφ_p(x), φφ_r(y)) with the y block and Cov(x, y) fixed (Price:
    E[∂²_{x_q}(φ_a φ_b)(x) (φφ_r(y) − E)], ½ on a diagonal entry q = (a, a))."""
    m = len(pairs)
    pos = {tuple(p): i for i, p in enumerate(pairs)}
    phi, d1, d2 = act.phi, act.dphi, act.d2phi
    R = np.zeros((m, m, m))
    jobs = {"11": [], "20": [], "02": [], "dd": []}
    for i, (a, b) in enumerate(pairs):
        if a == b:
            jobs["dd"].append((i, pos[(a, a)], (a, a)))
        else:
            jobs["11"].append((i, pos[(a, b)], (a, b)))
            jobs["20"].append((i, pos[(a, a)], (a, b)))
            jobs["02"].append((i, pos[(b, b)], (a, b)))
    fxs = {"11": lambda x, y: d1(x) * d1(y), "20": lambda x, y: 0.5 * d2(x) * phi(y),
           "02": lambda x, y: 0.5 * phi(x) * d2(y), "dd": lambda x, y: d1(x) ** 2 + phi(x) * d2(x)}
    nodes = _joint_nodes(Kx, Ky, Kxy, False)
    if nodes is not None:
        x, y, W = nodes
        fy = phi(y)
        pa, pb = np.array(pairs).T
        Gy = fy[pa] * fy[pb]
    for kind, lst in jobs.items():
        if not lst:
            continue
        if nodes is not None:
            Fx = np.stack([fxs[kind](x[j[2][0]], x[j[2][1]]) for j in lst])
            vals = _connected_rows(Fx, Gy, W)
        else:
            S4 = _four(Kx, Ky, Kxy, [j[2] for j in lst], pairs)
            vals = _connected(fxs[kind], phi, S4).reshape(len(lst), m)
        for (i, q, _), v in zip(lst, vals):
            R[i, q, :] += v
    return R


# --------------------------------------------------------------------------------- the recursion
def _pairs_vec(A, pairs):
    return np.array([A[a, b] for a, b in pairs])


def _to_mat(v, pairs, P):
    out = np.zeros((P, P))
    for t, (a, b) in enumerate(pairs):
        out[a, b] = out[b, a] = v[t]
    return out


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
            nodes = _joint_nodes(Ks[a - 1], Ks[b - 1], cross(a - 1, b - 1), a == b)
            if nodes is not None:
                fx, fy, W = act.phi(nodes[0]), act.phi(nodes[1]), nodes[2]
                pa, pb = np.array(pairs).T
                c = _connected_rows(fx[pa] * fx[pb], fy[pa] * fy[pb], W)
            else:
                c = _cov_phiphi(act, _four(Ks[a - 1], Ks[b - 1], cross(a - 1, b - 1), pairs, pairs)).reshape(m, m)
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
                R = _self_tensor(act, Ks[l - 1], Ks[j - 1], Ks[j - 1], pairs)
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
        K1[l] = _to_mat(sum(K1C[k - 1] for k in ks), pairs, P)
        sel = np.concatenate([np.arange((k - 1) * m, k * m) for k in ks])
        sub = V[np.ix_(sel, sel)].reshape(len(ks), m, len(ks), m).sum(axis=(0, 2))
        var[l] = _to_mat(np.diag(sub), pairs, P)
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
    K1_out = _to_mat(K1C[L], pairs, P)
    var_out = _to_mat(np.diag(V[L * m:, L * m:]), pairs, P)
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


def _theta_var(model, X):
    """N·Var(Θ_N) entrywise (P×P) for an MLP in the NTK parameterisation (docs/theory/finite_width.rst §3):

    Θ_out = C^{L+1} + σ²_out/N · w_outᵀ A^L w_out exactly, A^l_{kk'} = φ'_k Θ^l_{kk'} φ'_{k'} (Θ^l the
    neuron-space NTK of layer l), so N·Var = N·Var(C^{L+1} + σ²_out T̂^L) + Ω^{L+1}_{αβ,αβ} + Ω^{L+1}_{αβ,βα}
    with T̂^l = (1/N) Σ_k φ'φ'(h^l_k) Θ^l_kk and Ω^l = N·E[Θ^l_{kk'} ⊗ Θ^l_{kk'}] (k ≠ k'):

      Ω^{l+1}_{αβγδ} = σ⁴ [E[φ'_αφ'_βφ'_γφ'_δ] Θ^l_{αβ}Θ^l_{γδ} + E[φ'_αφ'_γ] E[φ'_βφ'_δ] Ω^l_{αβγδ}],  Ω⁰ = 0;
      δC^{l+1} = J δC^l + ξ^{l+1},  δT̂^l = Θ^l ⊙ (D'δC^l + ν^l) + G'^l ⊙ (δC^l + σ² δT̂^{l−1}),

    ξ^{l+1}, ν^l the sampling noise of s φφ and φ'φ' over the N neurons of layer l (jointly Gaussian,
    per-neuron covariance under N(0, K^l)), D' = ∂E[φ'φ']/∂K (a central difference of the exact
    E[φ'φ']), G'^l = E[φ'φ']. Needs P ≤ 4 (joint quadrature)."""
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
        # D' = ∂E[φ'φ']/∂K (pairs × pairs) by central differences of the exact E[φ'φ']
        eps = 1e-5 * float(np.max(np.diag(K)))
        Dp = np.zeros((m, m))
        for q, (a_, b_) in enumerate(pairs):
            E = np.zeros((P, P))
            E[a_, b_] = E[b_, a_] = 1.0
            Dp[:, q] = (dgram(act, K + eps * E) - dgram(act, K - eps * E))[pa, pb] / (2 * eps)
        D = price_jacobian(act, K)
        nodes = _joint_nodes(K, K, K, True)
        if nodes is None:
            return None
        x, _, W = nodes
        f, g = act.phi(x), act.dphi(x)
        rows = np.concatenate([s[l] * f[pa] * f[pb], g[pa] * g[pb]])
        Sl = _connected_rows(rows, rows, W)                          # per-neuron Cov(sφφ, φ'φ')
        E4 = np.einsum("aq,bq,cq,dq,q->abcd", g, g, g, g, W)
        A = np.zeros((2 * m, 2 * m))
        if l >= 1:
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
    out = _to_mat(coll, pairs, P)
    idx = np.arange(P)
    out += Om[idx[:, None], idx[None, :], idx[:, None], idx[None, :]]
    out += Om[idx[:, None], idx[None, :], idx[None, :], idx[:, None]]
    return out


def finite_width(model, X1, X2=None, *, ntk=True) -> FiniteWidth:
    """O(1/N) corrections of the read-out NNGP (per layer too) and of the NTK mean for ``model``'s
    finite networks on inputs X1 (× X2): E[K_N] = K + K1/N + O(1/N²) (module docstring)."""
    from ..model import ModelError, as_model

    m = as_model(model)
    what = "limits.kernels.finite_width"
    m.require(what, kernel_regime=True, block_layers_one=True, pre_activation=True)
    if m.depth < 1:
        raise ModelError(f"{what} cannot treat this model: depth = 0 (no hidden N×N block; nothing is O(1/N))")
    X1 = finite_array(X1, "X1", ndim=2)
    if X1.shape[1] != m.d_in:
        raise ValueError(f"X1 has {X1.shape[1]} columns but the model has d_in = {m.d_in}")
    P1 = X1.shape[0]
    if X2 is not None:
        X2 = finite_array(X2, "X2", ndim=2)
        if X2.shape[1] != m.d_in:
            raise ValueError(f"X2 has {X2.shape[1]} columns but the model has d_in = {m.d_in}")
        Z = np.vstack([X1, X2])
    else:
        Z = X1
    K, K1, KL, K1L, var, varL, Vout = _readout_K1(m, Z)
    cut = (lambda A: A[..., :P1, P1:]) if X2 is not None else (lambda A: A)   # noqa: E731
    T = T1 = TV = None
    notes = []
    if ntk and m.param_name == "NTK":
        T, T1 = _theta1(m, Z)
        T, T1 = cut(T), cut(T1)
        if m.residual:
            notes.append("Theta_var (N·Var of the NTK) is derived for MLPs only")
        else:
            TV = _theta_var(m, Z)
            if TV is None:
                notes.append("Theta_var needs at most 4 inputs in X1 ∪ X2 (joint quadrature)")
            else:
                TV = cut(TV)
    elif ntk:
        notes.append("Theta/Theta1 need parameterisation='NTK' (the SP NTK grows ∝ N)")
    params = {"model": m.to_dict() if isinstance(m.activation, str) else None, "X1": X1,
              "X2": X2 if X2 is not None else None}
    return FiniteWidth(cut(K), cut(K1), cut(KL), cut(K1L), cut(var), cut(varL), T, T1, TV,
                       {k: v for k, v in params.items() if v is not None}, "; ".join(notes),
                       Vout if X2 is None else None)
