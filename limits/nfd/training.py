"""Particle Euler–Maruyama solver for Neural Feature Dynamics during online SGD (docs/theory/nfd.rst §4,
seed 002 Def. 1, reconstructed).

Network (docs/theory/nfd.rst §1, γ = 1): ``f(x) = n^{-1} v·φ(h^L)``, learning rate ``η = η̄ n`` on U, W^l, v,
loss ½(f − y)², ``χ_k = f_k − y_k``.  With dt = T/L, forward pass of input x after k updates

    h^{(k)}_0(x)   = u·x/√d − η̄ Σ_{j<k} χ_j g^{(j)}_0 (x_j·x)/d                (U trained)
    h^{(k)}_{l+1}  = h^{(k)}_l + √dt ζ^{(k)}_l − dt η̄ Σ_{j<k} χ_j g^{(j)}_{l+1} E[φ(h^{(j)}_l) φ(h^{(k)}_l)]
    f^{(k)}(x)     = E[v φ(h^{(k)}_L)] − η̄ Σ_{j<k} χ_j E[φ(h^{(j)}_L) φ(h^{(k)}_L)]

with Cov(ζ^{(a)}_l, ζ^{(b)}_l) = E[φ(h^{(a)}_l) φ(h^{(b)}_l)] (one Gaussian family per layer, shared
by every forward pass ever made), and the backward pass (from L down to 0)

    g^{(k)}_L = v^{(k)} φ'(h^{(k)}_L),   v^{(k)} = v − η̄ Σ_{j<k} χ_j φ(h^{(j)}_L)
    g^{(k)}_l = g^{(k)}_{l+1} + φ'(h^{(k)}_l) [√dt ζ̃^{(k)}_l − dt η̄ Σ_{j<k} χ_j φ(h^{(j)}_l) E[g^{(j)}_{l+1} g^{(k)}_{l+1}]]

with Cov(ζ̃^{(a)}_l, ζ̃^{(b)}_l) = E[g^{(a)}_{l+1} g^{(b)}_{l+1}], ζ̃ independent of ζ (gradient independence).

Each particle is one neuron coordinate; expectations are particle averages (McKean–Vlasov).
A new pass's increment is drawn conditionally on the earlier passes of the same layer through a
growing lower-triangular factor of the pass covariance (:class:`GrowingCholesky`), which
tolerates rank deficiency (zero pivots are skipped). By Gaussian conditioning, the scheme with
M particles has exactly the law of a *decoupled* finite ResNet of width M and depth L (backward
pass through an independent copy W̃ receiving the same updates); M → ∞ is the NFD limit.
Cost O(K² L M) time, O(K L M) memory for K steps.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..checks import finite_array, generator, nonnegative_float, positive_float, positive_int
from ..results import Result
from .kernel_ode import activation_label
from ..registry import sweep_computation


class GrowingCholesky:
    """Lower-triangular factor ``R`` (RRᵀ = covariance of the passes so far) of one layer's
    Gaussian family, and the per-particle standard normals ``Z`` with ``ζ^{(a)} = Σ_b R_ab Z_b``.

    ``conditional(c, ckk)`` returns the regression weights ``w`` (R w = c, zero pivots skipped)
    and the residual variance ``r = ckk − |w|²`` (clipped at 0): the new member is
    ``ζ = w·Z + √r z_new``.  Rank deficiency (r ≈ 0, e.g. a layer seen twice unchanged) is normal.
    """

    def __init__(self, kmax: int, M: int, rel_tol: float = 1e-12, store_normals: bool = True):
        self.R = np.zeros((kmax, kmax))
        self.Z = np.zeros((kmax if store_normals else 0, M))
        self.n = 0
        self.rel_tol = rel_tol

    def conditional(self, c: np.ndarray, ckk: float):
        n = self.n
        w = np.zeros(n)
        R = self.R
        for b in range(n):
            piv = R[b, b]
            if piv > 0.0:
                w[b] = (c[b] - R[b, :b] @ w[:b]) / piv
        r = ckk - float(w @ w)
        if r <= self.rel_tol * max(ckk, 0.0):
            r = 0.0
        return w, r

    def back_solve(self, w: np.ndarray) -> np.ndarray:
        """β with Rᵀ β = w (zero pivots → β_b = 0): the regression coefficients on the members."""
        n = self.n
        R = self.R
        beta = np.zeros(n)
        for b in range(n - 1, -1, -1):
            piv = R[b, b]
            if piv > 0.0:
                beta[b] = (w[b] - R[b + 1:n, b] @ beta[b + 1:n]) / piv
        return beta

    def solve(self, e: np.ndarray) -> np.ndarray:
        """A solution γ of (RRᵀ) γ = e on the non-degenerate members (pseudo-inverse style)."""
        w, _ = self.conditional(e, 0.0)
        return self.back_solve(w)

    def sample(self, w, r, z):
        out = w @ self.Z[: self.n] if self.n else np.zeros(self.Z.shape[1])
        return out + np.sqrt(r) * z

    def append(self, w, r, z):
        k = self.n
        self.R[k, :k] = w
        self.R[k, k] = np.sqrt(r)
        if self.Z.shape[0]:
            self.Z[k] = z if r > 0 else 0.0
        self.n += 1

    def covariance(self) -> np.ndarray:
        R = self.R[: self.n, : self.n]
        return R @ R.T



def _rms_rows(H):
    """√(mean over axis 1 of H²); rows whose H² overflows (|H| ≳ 1e154) as m·√mean((H/m)²), m = max|H|."""
    with np.errstate(over="ignore"):
        r = np.sqrt((H ** 2).mean(axis=1))
    big = ~np.isfinite(r)
    if np.any(big):
        m = np.max(np.abs(H[big]), axis=1, keepdims=True)
        r[big] = m[:, 0] * np.sqrt(np.mean((H[big] / m) ** 2, axis=1))
    return r


def _coupled_draw(fam, w, r, z, x, X, A, other, Y, B, response=True):
    """Draw W x/√n given W X = √n A (this side, factor ``fam``) and Wᵀ Y = √n B (other side, factor
    ``other``): A β + Y γ + Π_Y^⊥ ξ with β the regression of x on X, r = x − Xβ, γ = G_Y⁻¹E[B r]."""
    M = x.shape[0]
    m = fam.n
    if m:
        beta = fam.back_solve(w)
        out = beta @ A
        resid = x - beta @ X
    else:
        out = np.zeros(M)
        resid = x
    fresh = np.sqrt(r) * z
    if other.n and response:
        gam = other.solve(B @ resid / M)
        out = out + gam @ Y
        fresh = fresh - other.solve(Y @ fresh / M) @ Y       # project the fresh noise off span(Y)
    return out + fresh


@dataclass(frozen=True)
class TrainParticles(Result):
    """NFD particle solution of K online-SGD steps (docs/theory/nfd.rst §4).

    ``f_train[k]`` = f^{(k)}(x_k) before update k; ``chi[k]``; ``f_test[k, p]`` = output on test input p
    after k updates (k = 0..K); ``f_test_se`` = naive particle standard error of f_test
    (std of per-particle contributions / √M; ignores particle interaction);
    ``min_eig_forward[k, l]`` / ``min_eig_backward[k, l]`` = λ_min of the (k+1)-pass covariance of
    layer l (Assumption 1), normalised by its largest diagonal entry;
    ``feature_rms[k, l]`` = sqrt(E[(h^{(k)}_l)²]) of training pass k.
    """

    T: float
    L: int
    M: int
    K: int
    activation: str
    eta_bar: float
    train_input_layer: bool
    mode: str
    f_train: np.ndarray
    chi: np.ndarray
    f_test: np.ndarray
    f_test_se: np.ndarray
    min_eig_forward: np.ndarray
    min_eig_backward: np.ndarray
    feature_rms: np.ndarray
    rank_deficient_pivots: int
    memory_bytes: int


def memory_estimate(K: int, L: int, M: int, n_pass: int | None = None) -> int:
    """Bytes held by the solver: per recorded forward pass φ(h) and normals (2·L·M), per training
    pass φ(h), g and backward normals (3·(L+1)·M), float64."""
    n_pass = K if n_pass is None else n_pass
    return int(8 * M * (2 * n_pass * L + 3 * K * (L + 1) + 4 * (L + 1)))   # coupled: ζ values replace normals


@sweep_computation
def train_particles(X_train, y_train, X_test=None, T: float = 1.0, L: int = 16, M: int = 4096,
                    activation="tanh", eta_bar: float = 1.0, *, train_input_layer: bool = True,
                    rng=None, seed=None, max_memory_gb: float = 4.0, target_se: float | None = None,
                    joint_eval: bool = True, mode: str = "decoupled", response=("forward", "backward"),
                    progress_bar: bool = False) -> TrainParticles:
    """Run the NFD particle solver for ``K = len(X_train)`` online-SGD steps (one sample per step).

    ``mode="decoupled"`` (default) is NFD (gradient independence: ζ̃ independent of ζ).
    ``mode="coupled"`` keeps the reused-weight (response) terms of ordinary backprop: with W^l
    constrained by every forward product W φ^a = √n ζ^a and backward product Wᵀ g^b = √n ζ̃^b, Gaussian
    conditioning gives for a new forward pass
    ``ζ = Σ_a β_a ζ^a + Σ_b γ_b g^b + Π_g^⊥ ξ``, β = G_φ⁻¹E[φ^a φ], r = φ − Σβ_a φ^a, γ = G_g⁻¹E[ζ̃^b r],
    ξ fresh with variance E[r²] (and symmetrically for backward passes). With M particles this has
    the law of the ordinary (coupled) width-M network; M → ∞ gives the infinite-width, finite-depth
    dynamics *with* the response terms (beyond the seed; docs/theory/nfd.rst §5).
    ``response`` (coupled mode, diagnostic ablation): which draws include the reused-weight terms —
    forward passes (W φ given earlier Wᵀ g) and/or backward passes (Wᵀ g given earlier W φ).
    ``joint_eval=True`` records the test-input passes in the Gaussian families too (as in a finite
    network, where they read the same W_0), so f_test has the right joint law across steps;
    ``False`` draws them as leaves (right marginals per step, cheaper).
    Raises ``ValueError`` for T ≤ 0, L < 1, non-finite data, mismatched shapes, or a memory
    estimate above ``max_memory_gb``; warns when the particle standard error of the test outputs
    exceeds ``target_se`` (too few particles for the requested accuracy).
    """
    T = positive_float(T, "T")
    L = positive_int(L, "L")
    M = positive_int(M, "M", minimum=2)
    if target_se is not None:
        target_se = positive_float(target_se, "target_se")
    eta_bar = nonnegative_float(eta_bar, "eta_bar")
    Xtr = finite_array(X_train, "X_train", ndim=2)
    ytr = finite_array(y_train, "y_train", ndim=1)
    if ytr.shape[0] != Xtr.shape[0]:
        raise ValueError(f"y_train has {ytr.shape[0]} entries but X_train has {Xtr.shape[0]} rows")
    K = positive_int(Xtr.shape[0], "len(X_train)")
    d = Xtr.shape[1]
    Xte = np.zeros((0, d)) if X_test is None else finite_array(X_test, "X_test", ndim=2)
    if Xte.shape[1] != d:
        raise ValueError(f"X_test must have d={d} columns, got {Xte.shape[1]}")
    P = Xte.shape[0]
    n_pass = K + (K + 1) * P if joint_eval else K
    if mode not in ("decoupled", "coupled"):
        raise ValueError(f"mode must be 'decoupled' or 'coupled', got {mode!r}")
    coupled = mode == "coupled"
    response = tuple(response)
    if not set(response) <= {"forward", "backward"}:
        raise ValueError(f"response must be a subset of ('forward', 'backward'), got {response!r}")
    if coupled and not joint_eval:
        raise ValueError("mode='coupled' needs joint_eval=True (test passes also read W)")
    mem = memory_estimate(K, L, M, n_pass)
    if mem > positive_float(max_memory_gb, "max_memory_gb") * 2**30:
        raise ValueError(f"M={M} particles with K={K}, L={L}, {n_pass} forward passes need ≈{mem / 2**30:.2f} GB "
                         f"> max_memory_gb={max_memory_gb}; reduce M (or use joint_eval=False)")
    rng = generator(rng, seed)
    import limits

    act = limits.activation(activation)
    dt = T / L
    sdt = np.sqrt(dt)
    u = rng.standard_normal((M, d))
    v0 = rng.standard_normal(M)
    PhiAll = np.empty((n_pass, L, M))  # φ(h^{(a)}_l) of every recorded forward pass, l < L
    Phi = np.empty((K, L + 1, M))      # φ(h^{(j)}_l) of training passes (drift terms)
    G = np.empty((K, L + 1, M))        # g^{(j)}_l
    train_idx = np.zeros(K, dtype=int)
    chi = np.zeros(K)
    fwd = [GrowingCholesky(n_pass, M, store_normals=not coupled) for _ in range(L)]
    bwd = [GrowingCholesky(K, M, store_normals=not coupled) for _ in range(L)]
    if coupled:
        Aval = np.empty((n_pass, L, M))    # ζ^{(a)}_l values (forward products W φ/√n)
        Bval = np.empty((K, L, M))         # ζ̃^{(b)}_l values (backward products Wᵀ g/√n)
    deficient = 0
    npass = 0

    def h0(x, k):
        h = u @ x / np.sqrt(d)
        if train_input_layer and k > 0:
            coef = chi[:k] * (Xtr[:k] @ x) / d
            h = h - eta_bar * (coef @ G[:k, 0])
        return h

    def forward(x, k, record: bool):
        """Forward pass of x with weights after k updates; record=True makes it a member of every
        layer's Gaussian family (later passes are drawn conditionally on it)."""
        nonlocal deficient, npass
        h = h0(x, k)
        Hs = np.empty((L + 1, M))
        Hs[0] = h
        a = eta_bar * chi[:k]
        tr = train_idx[:k]
        for l in range(L):
            ph = act.phi(h)
            fam = fwd[l]
            m = fam.n
            c = PhiAll[:m, l] @ ph / M if m else np.zeros(0)
            ckk = float(ph @ ph) / M
            w, r = fam.conditional(c, ckk)
            z = rng.standard_normal(M) if r > 0 else np.zeros(M)
            if coupled:
                zeta = _coupled_draw(fam, w, r, z, ph, PhiAll[:m, l], Aval[:m, l], bwd[l], G[:bwd[l].n, l + 1],
                                     Bval[:bwd[l].n, l], "forward" in response)
            else:
                zeta = fam.sample(w, r, z)
            if record:
                fam.append(w, r, z)
                PhiAll[m, l] = ph
                if coupled:
                    Aval[m, l] = zeta
                deficient += r == 0.0
            h = h + sdt * zeta
            if k:
                h = h - dt * ((a * c[tr]) @ G[:k, l + 1])
            Hs[l + 1] = h
        if record:
            npass += 1
        phL = act.phi(h)
        contrib = v0 * phL
        if k:
            contrib = contrib - (a @ Phi[:k, L]) * phL
        return Hs, contrib

    def backward(Hs, k):
        nonlocal deficient
        vk = v0 - (eta_bar * chi[:k]) @ Phi[:k, L] if k else v0
        g = vk * act.dphi(Hs[L])
        G[k, L] = g
        a = eta_bar * chi[:k]
        for l in range(L - 1, -1, -1):
            dvec = G[:k, l + 1] @ g / M if k else np.zeros(0)
            dkk = float(g @ g) / M
            fam = bwd[l]
            w, r = fam.conditional(dvec, dkk)
            z = rng.standard_normal(M) if r > 0 else np.zeros(M)
            if coupled:
                nf = fwd[l].n
                zt = _coupled_draw(fam, w, r, z, g, G[:k, l + 1], Bval[:k, l], fwd[l], PhiAll[:nf, l], Aval[:nf, l],
                                   "backward" in response)
                Bval[k, l] = zt
            else:
                zt = fam.sample(w, r, z)
            fam.append(w, r, z)
            deficient += r == 0.0
            inc = sdt * zt
            if k:
                inc = inc - dt * ((a * dvec) @ Phi[:k, l])
            g = g + act.dphi(Hs[l]) * inc
            G[k, l] = g
        if not np.all(np.isfinite(G[k])):
            raise ValueError("backward pass produced non-finite values (training diverged; lower eta_bar)")

    f_test = np.zeros((K + 1, P))
    f_se = np.zeros((K + 1, P))
    f_train = np.zeros(K)
    feat = np.zeros((K, L + 1))

    def evaluate(k):
        for p in range(P):
            _, contrib = forward(Xte[p], k, record=joint_eval)
            f_test[k, p] = contrib.mean()
            f_se[k, p] = contrib.std(ddof=1) / np.sqrt(M)

    from ..progress import progress

    for k in progress(range(K), total=K, desc="NFD particles", disable=None if progress_bar else True):
        evaluate(k)
        train_idx[k] = npass
        Hs, contrib = forward(Xtr[k], k, record=True)
        if not np.all(np.isfinite(Hs)):
            raise ValueError("forward pass produced non-finite values (training diverged; lower eta_bar)")
        Phi[k] = act.phi(Hs)
        feat[k] = _rms_rows(Hs)
        f_train[k] = contrib.mean()
        chi[k] = f_train[k] - ytr[k]
        backward(Hs, k)
    evaluate(K)
    for name, arr in (("f_test", f_test), ("f_test_se", f_se), ("f_train", f_train), ("chi", chi)):
        bad = ~np.isfinite(arr)
        if np.any(bad):                               # never return NaN/inf outputs as if they were results
            step = int(np.argwhere(bad)[0][0])
            raise ValueError(f"training diverged: {name} is non-finite from step {step} on "
                             f"(eta_bar = {eta_bar:g} is too large for T = {T:g}, L = {L}); lower eta_bar")

    def min_eigs(fams, idx):
        out = np.zeros((K, L))
        for l, fam in enumerate(fams):
            C = fam.covariance()[np.ix_(idx, idx)]
            for k in range(K):
                B = C[: k + 1, : k + 1]
                scale = max(float(np.max(np.diag(B))), 1e-300)
                out[k, l] = np.linalg.eigvalsh(B)[0] / scale
        return out

    if target_se is not None and P:
        worst = float(np.max(f_se))
        if worst > target_se:
            from .sde import particles_needed

            warnings.warn(f"particle standard error of f_test is {worst:.3g} > target_se={target_se:g}; "
                          f"M={M} particles are too few (≈{particles_needed(M, worst, target_se)} needed)",
                          RuntimeWarning, stacklevel=2)
    return TrainParticles(T=T, L=L, M=M, K=K, activation=activation_label(activation), eta_bar=eta_bar,
                          train_input_layer=bool(train_input_layer), mode=mode, f_train=f_train, chi=chi, f_test=f_test,
                          f_test_se=f_se, min_eig_forward=min_eigs(fwd, train_idx), min_eig_backward=min_eigs(bwd, np.arange(K)),
                          feature_rms=feat, rank_deficient_pivots=int(deficient), memory_bytes=mem)
