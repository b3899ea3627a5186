"""Matrix-free linear algebra for A = K + σ²I given only products A·V.

* :func:`pivoted_cholesky` — K ≈ L Lᵀ of rank k, greedy on the residual diagonal (Harbrecht, Peters &
  Schneider 2012, Alg. 1), rows fetched in batches: k rows of K and O(P·k²) work; the residual diagonal
  d = diag(K − L Lᵀ) is kept.
* :class:`Preconditioner` — M = L Lᵀ + D, D = diag(d + σ²), applied by the Woodbury identity with
  U = D^{−1/2} L:  M⁻¹ = D^{−1/2} (I + UUᵀ)⁻¹ D^{−1/2} = D^{−1/2} (I − U (I + UᵀU)⁻¹ Uᵀ) D^{−1/2},
  log det M = Σ log D + Σ log(1 + s²) (s² the eigenvalues of UᵀU), and a factor C = D^{1/2}(I + UUᵀ)^{1/2} with M = C Cᵀ.
  When K's spectrum decays (smooth kernels) the top k eigen-directions are caught by L and the
  preconditioned spectrum clusters near 1, so the iteration count depends on the rank and on σ², not on P.
* :func:`block_pcg` — preconditioned conjugate gradients on every column of B at once (one product A·V
  per iteration for all columns still running). Stopping rule: ‖b − A x‖ ≤ tol·‖b‖ per column, with
  the recursively updated residual; the true residual is recomputed once at the end and reported.
* :func:`lanczos_logdet` — stochastic Lanczos quadrature (Ubaru, Chen & Saad 2017): tr log B for the
  symmetric positive definite B = C⁻¹ A C⁻ᵀ from Rademacher probes, with the standard error of the mean
  over probes; log det A = log det M + tr log B.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["pivoted_cholesky", "Preconditioner", "block_pcg", "PCGResult", "lanczos_logdet"]


def pivoted_cholesky(diag, rows, rank, rel_tol=1e-12, batch=32):
    """(L, d, pivots): K ≈ L Lᵀ with L of shape P×k (k ≤ ``rank``), d = diag(K − L Lᵀ) ≥ 0.

    ``diag``: K_αα (P,); ``rows(idx)``: K[idx, :] (len(idx)×P). Greedy on the residual diagonal, with the
    rows fetched ``batch`` at a time: the ``batch`` largest residual diagonals are the candidates, and
    pivots are taken among them greedily while the best candidate's residual is at least half the largest
    residual anywhere (then a new batch is fetched) — one kernel evaluation per batch instead of per pivot.
    ``batch=1`` is the classical algorithm. Stops early when max d ≤ ``rel_tol``·trace K."""
    d = np.array(diag, dtype=np.float64)
    P = d.size
    k = min(int(rank), P)
    L = np.zeros((P, k))
    pivots = []
    stop = rel_tol * float(d.sum())
    j = 0
    while j < k:
        cand = np.argsort(-d, kind="stable")[:min(int(batch), k - j)]
        if not d[cand[0]] > stop:
            break
        R = np.asarray(rows(cand), dtype=np.float64)
        left = list(range(cand.size))
        while left and j < k:
            c = max(left, key=lambda t: d[cand[t]])
            i = int(cand[c])
            if not (d[i] > stop and d[i] >= 0.5 * d.max()):
                break
            left.remove(c)
            r = R[c] - L[:, :j] @ L[i, :j]
            L[:, j] = r / math.sqrt(d[i])
            d -= L[:, j] ** 2
            d[i] = 0.0
            np.maximum(d, 0.0, out=d)
            pivots.append(i)
            j += 1
    return L[:, :len(pivots)], d, pivots


class Preconditioner:
    """M = L Lᵀ + D (module docstring): ``solve`` M⁻¹V, ``logdet``, ``inv_factor`` C⁻¹V, ``inv_factor_t`` C⁻ᵀV.

    With U = D^{−1/2} L and UᵀU = W diag(s²) Wᵀ (a k×k eigendecomposition: O(P·k²) for the product, no
    P×k SVD), every operator above is I + U G Uᵀ for a k×k G = W diag(g(s²)) Wᵀ, with g(s²) = −1/(1 + s²)
    for (I + UUᵀ)⁻¹ and g(s²) = −1/(√(1 + s²)(1 + √(1 + s²))) for (I + UUᵀ)^{−1/2} − I divided by s²
    (both finite as s → 0)."""

    def __init__(self, L, D):
        D = np.asarray(D, dtype=np.float64)
        if not np.all(D > 0):
            raise ValueError("preconditioner: the diagonal part must be positive (noise > 0)")
        self.rs = 1.0 / np.sqrt(D)
        self.U = L * self.rs[:, None]
        s2, W = np.linalg.eigh(self.U.T @ self.U)
        s2 = np.maximum(s2, 0.0)
        r = np.sqrt(1.0 + s2)
        self.G_inv = (W * (-1.0 / (1.0 + s2))) @ W.T
        self.G_half = (W * (-1.0 / (r * (1.0 + r)))) @ W.T
        self.logdet = float(np.sum(np.log(D)) + np.sum(np.log1p(s2)))
        self.rank = self.U.shape[1]

    def _mix(self, V, G):
        return V + self.U @ (G @ (self.U.T @ V))

    def solve(self, V):
        V2 = V[:, None] if V.ndim == 1 else V
        out = self.rs[:, None] * self._mix(self.rs[:, None] * V2, self.G_inv)
        return out[:, 0] if V.ndim == 1 else out

    def inv_factor(self, V):          # C⁻¹ V = (I + UUᵀ)^{-1/2} D^{-1/2} V
        return self._mix(self.rs[:, None] * V, self.G_half)

    def inv_factor_t(self, V):        # C⁻ᵀ V = D^{-1/2} (I + UUᵀ)^{-1/2} V
        return self.rs[:, None] * self._mix(V, self.G_half)


@dataclass(frozen=True)
class PCGResult:
    """Solution X (P×r) of A X = B; per-column ``iterations`` and ``converged``; ``history``: the largest
    relative residual over the columns still running, after each iteration; ``true_residual``: the
    relative residual ‖B − A X‖/‖B‖ per column, recomputed from X at the end."""
    x: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    history: tuple
    true_residual: np.ndarray


def block_pcg(matvec, B, precond=None, tol=1e-10, maxiter=1000, progress=None) -> PCGResult:
    """Preconditioned CG for the SPD A on every column of ``B`` (P×r); ``matvec(V)`` = A V (P×c → P×c),
    ``precond(V)`` = M⁻¹ V (identity when None). Columns stop when ‖r‖ ≤ ``tol``·‖b‖."""
    B = np.asarray(B, dtype=np.float64)
    if B.ndim == 1:
        B = B[:, None]
    P, r = B.shape
    M = precond if precond is not None else (lambda V: V)
    X = np.zeros((P, r))
    R = B.copy()
    bn = np.linalg.norm(B, axis=0)
    its = np.zeros(r, dtype=int)
    done = bn == 0.0
    act = np.flatnonzero(~done)
    Z = M(R[:, act])
    D = Z.copy()
    rz = np.einsum("ij,ij->j", R[:, act], Z)
    history = []
    for it in range(1, int(maxiter) + 1):
        if act.size == 0:
            break
        AD = matvec(D)
        alpha = rz / np.einsum("ij,ij->j", D, AD)
        X[:, act] += alpha * D
        R[:, act] -= alpha * AD
        its[act] = it
        rel = np.linalg.norm(R[:, act], axis=0) / bn[act]
        history.append(float(rel.max()))
        if progress is not None:
            progress(it, history[-1])
        keep = rel > tol
        done[act[~keep]] = True
        act, D, rz = act[keep], D[:, keep], rz[keep]
        if act.size == 0:
            break
        Z = M(R[:, act])
        rz_new = np.einsum("ij,ij->j", R[:, act], Z)
        D = Z + (rz_new / rz) * D
        rz = rz_new
    true = np.linalg.norm(B - matvec(X), axis=0) / np.where(bn > 0, bn, 1.0)
    return PCGResult(X, its, done.copy(), tuple(history), true)


def lanczos_logdet(matvec, P, probes=16, steps=60, rng=None, rtol=1e-10):
    """(estimate, standard error, per-probe estimates, steps used) of tr log B for the SPD operator
    ``matvec`` (P×n → P×n) by stochastic Lanczos quadrature with ``probes`` Rademacher vectors (full
    reorthogonalisation; a probe's Lanczos run stops when its Gauss-quadrature value changes by less than
    ``rtol`` relative, or at ``steps``)."""
    rng = np.random.default_rng(rng)
    n = int(probes)
    if n < 2:
        raise ValueError(f"probes must be ≥ 2 (the standard error needs two), got {probes!r}")
    Z = rng.choice(np.array([-1.0, 1.0]), size=(P, n))
    Qs = [Z / math.sqrt(P)]
    alphas, betas = [], []
    est = np.zeros(n)
    frozen = np.zeros(n, dtype=bool)
    used = np.zeros(n, dtype=int)
    q_prev, b_prev = np.zeros((P, n)), np.zeros(n)
    for m in range(1, int(steps) + 1):
        q = Qs[-1]
        w = matvec(q) - b_prev * q_prev
        a = np.einsum("ij,ij->j", q, w)
        w -= a * q
        for qq in Qs:                                  # full reorthogonalisation, column by column
            w -= np.einsum("ij,ij->j", qq, w) * qq
        b = np.linalg.norm(w, axis=0)
        alphas.append(a)
        betas.append(b)
        for j in np.flatnonzero(~frozen):
            T = (np.diag([al[j] for al in alphas]) + np.diag([be[j] for be in betas[:-1]], 1)
                 + np.diag([be[j] for be in betas[:-1]], -1))
            th, U = np.linalg.eigh(T)
            if th[0] <= 0:
                raise ValueError("lanczos_logdet: the operator is not positive definite")
            new = P * float(np.sum(U[0] ** 2 * np.log(th)))
            used[j] = m
            if m > 1 and abs(new - est[j]) <= rtol * max(1.0, abs(new)) or b[j] <= 1e-13:
                frozen[j] = True                       # converged, or an invariant subspace (exact)
            est[j] = new
        if frozen.all():
            break
        q_prev, b_prev = q, b
        Qs.append(w / np.where(b > 0, b, 1.0))
    return float(est.mean()), float(est.std(ddof=1) / math.sqrt(n)), est.copy(), int(used.max())
