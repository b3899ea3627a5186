"""O(1/N) fluctuations of the empirical kernels across initialisations (seed 004 Eq. 33–43, App. C).

Observables (per entry (α ≤ β), m = P(P+1)/2 of them per layer):

* ``C^l = s_l · (1/N) Σ_i φ(h^{l-1}_{iα}) φ(h^{l-1}_{iβ}) + b_l`` for l = 1..L+1 (seed 004 Eq. 17–18;
  s_l = ρ²σ_w², b_l = ρ²σ_b², and σ²_w,out, σ²_b,out for the read-out l = L+1); C⁰ is fixed by the data.
* optionally the stream Grams ``G^l = (1/N) Σ_i h^l_{iα} h^l_{iβ}`` (l = 0..L), what a finite network
  measures as its layer kernel (``limits.finite.empirical_kernels(...).K``).

Derivation (the seed's S11/S22 labels are inconsistent; this is the block inverse used). At the saddle
point the Hessian of the action in (δC̃, δC) is H = [[A, B], [Bᵀ, 0]] with A = ∂²S/∂C̃² = N·Σ
(connected four-point functions of one neuron's trajectory under the layer-joint Gaussian,
Cov(h^a, h^b) = K^{min(a,b)} for ResNets, δ_ab K^a for feed-forward nets) and B = ∂²S/∂C̃∂C = −N·M,
M = I − J block lower-triangular with unit diagonal, J_lk = ∂C^l/∂C^k = s_l D(K^{l-1}) for every k < l
(ResNet; feed-forward: k = l−1 only), D = ∂E[φ_αφ_β]/∂K_γδ the full Price Jacobian (the seed's C6
keeps only its diagonal). Since [[A, B], [Bᵀ, 0]]⁻¹ = [[0, B⁻ᵀ], [B⁻¹, −B⁻¹AB⁻ᵀ]], the propagator
G = −H⁻¹ gives ⟨δC̃ δC̃⟩ = 0, N⟨δC δC̃⟩ = M⁻¹ (the response), and

    ⟨δC δC⟩ = B⁻¹ A B⁻ᵀ = (1/N) M⁻¹ Σ M⁻ᵀ,

evaluated with two unit-lower-triangular solves (no inverse). Equivalently δC = M⁻¹ξ with ξ the
sampling noise of the neuron averages. Grams enter the same way with rows G^l − Σ_{k≤l} C^k = ξ_G
(ResNet; feed-forward G^l − C^l), so their covariance includes the sampling noise of the Gram itself.
Cost: O((L m)²) four-point quadratures and O((L m)³) for the solves.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import positive_int
from ..results import Result
from ._args import resolve
from .expectations import cross_price, dgram, diag_price
from .fourpoint import ORDERS, cov4, cov4_erf, cov_pairs, is_relu
from .nngp import run_recursion
from ..registry import sweep_computation


def pair_index(P):
    """List of (α, β), α ≤ β, in the order used for the m = P(P+1)/2 entries of a layer."""
    return [(a, b) for a in range(P) for b in range(a, P)]


def to_matrix(v, pairs, P):
    """The symmetric P×P matrix whose entries (α, β) and (β, α) are v[t] for pairs[t] = (α, β)."""
    out = np.zeros((P, P))
    for t, (a, b) in enumerate(pairs):
        out[a, b] = out[b, a] = v[t]
    return out


def price_jacobian(act, K):
    """D[(αβ), (γδ)] = ∂E_{N(0,K)}[φ_αφ_β]/∂K_γδ over symmetric entries (full Price Jacobian, m×m)."""
    P = K.shape[0]
    pairs = pair_index(P)
    pos = {p: i for i, p in enumerate(pairs)}
    G = dgram(act, K)
    A = cross_price(act, K)
    dp = diag_price(act, np.diag(K))
    m = len(pairs)
    D = np.zeros((m, m))
    for i, (a, b) in enumerate(pairs):
        if a == b:
            D[i, i] = dp[a]
        else:
            D[i, i] = G[a, b]
            D[i, pos[(a, a)]] += A[a, b]
            D[i, pos[(b, b)]] += A[b, a]
    return D


@dataclass(frozen=True)
class KernelFluctuations(Result):
    """Covariances of empirical kernels across initialisations at width N (leading order 1/N).

    ``cov`` is the full covariance of the observable vector (C blocks l = 1..L+1, then Gram blocks
    l = 0..L if requested), entries ordered by ``pairs``. Convenience views: ``var_C[l]`` (P×P, l =
    1..L+1; index 0 is zero), ``var_K[l]`` = Var(Σ_{k≤l} C^k) (ResNet; the seed's δK), ``var_gram[l]``
    (P×P or None), and ``var_K_seed[l]`` = Σ_{k≤l} Var(C^k) (the seed's formula after C20, which
    omits cross-layer covariances)."""

    cov: np.ndarray
    M: np.ndarray
    Sigma: np.ndarray
    pairs: list
    var_C: np.ndarray
    var_K: np.ndarray
    var_K_seed: np.ndarray
    var_gram: np.ndarray | None
    width: int
    params: dict
    note: str = ""


def _layer_cov(res, a, b, residual):
    """Cov(h^a_·, h^b_·) (P×P) under the layer-joint Gaussian of one neuron's trajectory."""
    if a == b:
        return res.K[a]
    if not residual:
        return np.zeros_like(res.K[a])
    return res.K[min(a, b)]


@sweep_computation
def kernel_fluctuations(X=None, depth=1, activation="erf", sigma_w2=1.0, sigma_b2=0.0, residual=False,
                        rho=1.0, sigma_w2_in=None, sigma_b2_in=None, sigma_w2_out=None, sigma_b2_out=None, *,
                        width, K0=None, depth_scaling="none", include_gram=True,
                        elementwise_jacobian=False) -> KernelFluctuations:
    """Leading-order covariance ⟨δC δC⟩ = M⁻¹ Σ M⁻ᵀ / N of the empirical kernels (module docstring).

    ``elementwise_jacobian=True`` keeps only the diagonal of the Price Jacobian (the seed's Eq. C6)
    — for comparison; the default is the exact linearisation."""
    from scipy.linalg import solve_triangular

    N = positive_int(width, "width")
    K0m, arch = resolve(X, K0, depth=depth, activation=activation, sigma_w2=sigma_w2, sigma_b2=sigma_b2,
                        residual=residual, rho=rho, sigma_w2_in=sigma_w2_in, sigma_b2_in=sigma_b2_in,
                        sigma_w2_out=sigma_w2_out, sigma_b2_out=sigma_b2_out, depth_scaling=depth_scaling)
    res = run_recursion(K0m, arch, ntk=False, on_explode="raise")
    act, L, P = arch.activation, arch.depth, K0m.shape[0]
    pairs = pair_index(P)
    m = len(pairs)
    nC = (L + 1) * m                       # C^1..C^{L+1}
    nG = (L + 1) * m if include_gram else 0  # G^0..G^L
    n = nC + nG
    s = np.array([arch.rho ** 2 * arch.sigma_w2] * L + [arch.sigma_w2_out])

    # observable descriptors: (layer of h, uses φ, scale)
    obs_layer = np.concatenate([np.repeat(np.arange(0, L + 1), m), np.repeat(np.arange(0, L + 1), m)])[:n]
    obs_phi = np.concatenate([np.ones(nC, bool), np.zeros(nG, bool)])
    obs_scale = np.concatenate([np.repeat(s, m), np.ones(nG)])
    obs_pair = pairs * ((L + 1) * (2 if include_gram else 1))

    # Σ: per-neuron covariance of the observables (upper triangle, batched 4-point quadrature)
    iu, ju = np.triu_indices(n)
    S4 = np.empty((iu.size, 4, 4))
    kinds = np.empty((iu.size, 2), bool)
    cache = {}
    for t, (i, j) in enumerate(zip(iu, ju)):
        la, lb = obs_layer[i], obs_layer[j]
        (a1, a2), (b1, b2) = obs_pair[i], obs_pair[j]
        key = (la, lb)
        if key not in cache:
            cache[key] = (res.K[la], res.K[lb], _layer_cov(res, la, lb, arch.residual))
        Ka, Kb, Kab = cache[key]
        idx_a, idx_b = (a1, a2), (b1, b2)
        M4 = np.empty((4, 4))
        for p in range(2):
            for q in range(2):
                M4[p, q] = Ka[idx_a[p], idx_a[q]]
                M4[2 + p, 2 + q] = Kb[idx_b[p], idx_b[q]]
                M4[p, 2 + q] = M4[2 + q, p] = Kab[idx_a[p], idx_b[q]]
        S4[t] = M4
        kinds[t] = (obs_phi[i], obs_phi[j])
    if str(getattr(act, "name", "")) == "erf":
        cvals, _, _ = cov4_erf(kinds, S4)      # inner pair in closed form, ~1e-9
    elif is_relu(act):                         # no quadrature across relu's kinks (relu_fourpoint)
        cvals = cov_pairs(kinds, S4)
    else:
        cvals, _, _ = cov4(act.phi, kinds, S4)  # tensor Gauss–Hermite (see fourpoint.py for accuracy)
    Sigma = np.zeros((n, n))
    Sigma[iu, ju] = cvals * obs_scale[iu] * obs_scale[ju]
    Sigma = Sigma + np.triu(Sigma, 1).T

    # M = I − J (unit lower triangular)
    Mm = np.eye(n)
    for l in range(1, L + 2):              # row block of C^l
        D = price_jacobian(act, res.K[l - 1])
        if elementwise_jacobian:
            D = np.diag(np.diag(D))
        J = s[l - 1] * D
        rows = slice((l - 1) * m, l * m)
        ks = range(1, l) if arch.residual else ([l - 1] if l - 1 >= 1 else [])
        for k in ks:
            Mm[rows, (k - 1) * m:k * m] -= J
    if include_gram:
        I = np.eye(m)
        for l in range(0, L + 1):          # G^l − Σ C^k = ξ_G
            rows = slice(nC + l * m, nC + (l + 1) * m)
            ks = range(1, l + 1) if arch.residual else ([l] if l >= 1 else [])
            for k in ks:
                Mm[rows, (k - 1) * m:k * m] -= I
    Y = solve_triangular(Mm, Sigma, lower=True, unit_diagonal=True)          # M⁻¹Σ
    cov = solve_triangular(Mm, Y.T, lower=True, unit_diagonal=True) / N       # M⁻¹ Σ M⁻ᵀ / N
    cov = 0.5 * (cov + cov.T)

    def to_mat(v):
        out = np.zeros((P, P))
        for t, (a, b) in enumerate(pairs):
            out[a, b] = out[b, a] = v[t]
        return out

    var_C = np.zeros((L + 2, P, P))
    var_K = np.zeros((L + 1, P, P))
    var_K_seed = np.zeros((L + 1, P, P))
    for l in range(1, L + 2):
        blk = slice((l - 1) * m, l * m)
        var_C[l] = to_mat(np.diag(cov[blk, blk]))
    for l in range(1, L + 1):
        if arch.residual:
            sel = np.concatenate([np.arange((k - 1) * m, k * m) for k in range(1, l + 1)])
            sub = cov[np.ix_(sel, sel)]
            tot = np.zeros(m)
            nb = l
            for a_ in range(nb):
                for b_ in range(nb):
                    tot += np.diag(sub[a_ * m:(a_ + 1) * m, b_ * m:(b_ + 1) * m])
            var_K[l] = to_mat(tot)
            var_K_seed[l] = var_C[1:l + 1].sum(axis=0)
        else:
            var_K[l] = var_C[l]
            var_K_seed[l] = var_C[l]
    var_gram = None
    if include_gram:
        var_gram = np.zeros((L + 1, P, P))
        for l in range(L + 1):
            blk = slice(nC + l * m, nC + (l + 1) * m)
            var_gram[l] = to_mat(np.diag(cov[blk, blk]))
    note = ""
    if str(getattr(act, "name", "")) != "erf" and P >= 2:
        kmax = float(np.max(np.diag(res.K[L])))
        note = (f"four-point functions with four distinct variables use a tensor Gauss–Hermite rule of "
                f"order {ORDERS[4]} (relative accuracy ~1e-3 at variances ≈ 1.3, ~1e-2 at ≈ 3; here max "
                f"variance {kmax:.3g}); erf and P = 1 are accurate to ~1e-9")
    return KernelFluctuations(cov, Mm, Sigma, [list(p) for p in pairs], var_C, var_K, var_K_seed, var_gram,
                              N, arch.as_dict(), note)
