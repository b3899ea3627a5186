"""Finite pre-activation ResNets trained by online SGD in two backprop modes — the gradient-
independence (GIA) study of nfd.md §5 — and the two-layer residual-block study of nfd.md §6.

Network (nfd.md §1, γ = 1): ``h⁰ = U x/√d``, ``h^{l+1} = h^l + √(T/L) n^{-1/2} W^l φ(h^l)``,
``f = n^{-1} v·φ(h^L)``; U, W^l, v ~ N(0,1); learning rate η = η̄ n on all weights; loss ½(f − y)².

* ``mode="coupled"``   — ordinary backprop: ``g^l = g^{l+1} + √(T/L) φ'(h^l) ⊙ W^{lᵀ} g^{l+1}/√n``.
* ``mode="decoupled"`` — backprop uses an independent copy W̃^l (drawn independently at init)
  that receives the *same* updates ΔW^l as W^l.

Implementation: every update is rank one,
``ΔW^l_k = −η̄ χ_k √(T/L) n^{-1/2} g^{(k),l+1} φ(h^{(k),l})ᵀ``, so ``W^l_k = W^l_0 + Σ_j ΔW^l_j`` is
applied as ``W^l_0 φ`` plus K inner products (exact algebra, tested against dense updates to
1e-10). W^l_0 is stored when it fits ``store_gb``, otherwise regenerated per layer from its seed.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import finite_array, nonnegative_float, positive_float, positive_int
from ..results import Result


def _act(activation):
    import limits

    return limits.activation(activation)


class _Weights:
    """W^l_0 (and W̃^l_0) from per-layer seeds; stored or regenerated on demand."""

    def __init__(self, seed, n, L, tag, store):
        self.seed, self.n, self.L, self.tag = seed, n, L, tag
        self._cache = [self._gen(l) for l in range(L)] if store else None

    def _gen(self, l):
        return np.random.default_rng([self.seed, self.tag, l]).standard_normal((self.n, self.n))

    def __getitem__(self, l):
        return self._cache[l] if self._cache is not None else self._gen(l)


@dataclass(frozen=True)
class FiniteSGDRun(Result):
    """One finite network trained K online-SGD steps. ``f_test[k]`` after k updates (k = 0..K)."""

    n: int
    L: int
    T: float
    mode: str
    seed: int
    eta_bar: float
    train_input_layer: bool
    f_train: np.ndarray
    chi: np.ndarray
    f_test: np.ndarray
    feature_rms: np.ndarray


def online_sgd(X_train, y_train, X_test, n: int, L: int, T: float = 1.0, activation="tanh",
               eta_bar: float = 1.0, mode: str = "coupled", seed: int = 0, train_input_layer: bool = True,
               store_gb: float = 0.5, dense: bool = False) -> FiniteSGDRun:
    """Train one width-n, depth-L ResNet by online SGD (one sample of ``X_train`` per step).

    Same ``seed`` ⇒ same U_0, v_0, W_0 in both modes (common random numbers); W̃_0 uses an
    independent stream. ``dense=True`` materialises and updates every W^l explicitly (reference).
    """
    n = positive_int(n, "n")
    L = positive_int(L, "L")
    T = positive_float(T, "T")
    eta_bar = nonnegative_float(eta_bar, "eta_bar")
    if mode not in ("coupled", "decoupled"):
        raise ValueError(f"mode must be 'coupled' or 'decoupled', got {mode!r}")
    Xtr = finite_array(X_train, "X_train", ndim=2)
    ytr = finite_array(y_train, "y_train", ndim=1)
    Xte = finite_array(X_test, "X_test", ndim=2)
    if ytr.shape[0] != Xtr.shape[0]:
        raise ValueError("y_train and X_train have different lengths")
    K, d = Xtr.shape
    act = _act(activation)
    s = np.sqrt(T / L)
    rng0 = np.random.default_rng([seed, 0])
    U = rng0.standard_normal((n, d))
    v = rng0.standard_normal(n)
    nmat = (2 if mode == "decoupled" else 1) * L * n * n * 8
    store = dense or nmat <= store_gb * 2**30
    W0 = _Weights(seed, n, L, 1, store)
    Wt0 = _Weights(seed, n, L, 2, store) if mode == "decoupled" else W0
    if dense:
        W = [W0[l].copy() for l in range(L)]
        Wt = W if mode == "coupled" else [Wt0[l].copy() for l in range(L)]
    Phi = np.zeros((K, L + 1, n))
    G = np.zeros((K, L + 1, n))
    chi = np.zeros(K)

    def forward(Xb, k):
        h = Xb @ U.T / np.sqrt(d)                       # B × n
        Hs = [h]
        a = eta_bar * chi[:k] * s / n                   # low-rank coefficients
        for l in range(L):
            ph = act.phi(h)
            if dense:
                pre = ph @ W[l].T / np.sqrt(n)
            else:
                pre = ph @ W0[l].T / np.sqrt(n)
                if k:
                    pre = pre - ((ph @ Phi[:k, l].T) * a) @ G[:k, l + 1]
            h = h + s * pre
            Hs.append(h)
        return np.stack(Hs)                             # (L+1) × B × n

    def backward(Hs, k):
        hL = Hs[L]
        g = v * act.dphi(hL)
        Gk = np.empty((L + 1, n))
        Gk[L] = g
        a = eta_bar * chi[:k] * s / n
        for l in range(L - 1, -1, -1):
            if dense:
                back = Wt[l].T @ g / np.sqrt(n)
            else:
                back = Wt0[l].T @ g / np.sqrt(n)
                if k:
                    back = back - (a * (G[:k, l + 1] @ g)) @ Phi[:k, l]
            g = g + s * act.dphi(Hs[l]) * back
            Gk[l] = g
        return Gk

    P = Xte.shape[0]
    f_test = np.zeros((K + 1, P))
    f_train = np.zeros(K)
    feat = np.zeros((K, L + 1))
    for k in range(K + 1):
        Xb = Xte if k == K else np.vstack([Xtr[k:k + 1], Xte])
        Hs = forward(Xb, k)
        if not np.all(np.isfinite(Hs)):
            raise ValueError("finite network diverged (non-finite features); lower eta_bar")
        f = act.phi(Hs[L]) @ v / n
        if k == K:
            f_test[k] = f
            break
        f_test[k] = f[1:]
        f_train[k] = f[0]
        chi[k] = f[0] - ytr[k]
        H1 = Hs[:, 0, :]
        feat[k] = np.sqrt((H1 ** 2).mean(axis=1))
        Gk = backward(H1, k)
        Phi[k] = act.phi(H1)
        G[k] = Gk
        # updates (η = η̄ n): v, U, and (dense only) every W^l; low-rank path keeps Phi, G, chi
        if dense:
            for l in range(L):
                dW = -eta_bar * chi[k] * s / np.sqrt(n) * np.outer(Gk[l + 1], Phi[k, l])
                W[l] += dW
                if mode == "decoupled":
                    Wt[l] += dW
        v = v - eta_bar * chi[k] * Phi[k, L]
        if train_input_layer:
            U = U - eta_bar * chi[k] * np.outer(Gk[0], Xtr[k]) / np.sqrt(d)
    return FiniteSGDRun(n=n, L=L, T=T, mode=mode, seed=int(seed), eta_bar=eta_bar,
                        train_input_layer=bool(train_input_layer), f_train=f_train, chi=chi, f_test=f_test,
                        feature_rms=feat)


def gia_task(d: int = 10, K: int = 4, P_test: int = 4, seed: int = 12345):
    """The synthetic task of the GIA study: inputs on the sphere of radius √d, targets
    y = tanh-teacher ``sin(β·x/√d) + 0.5`` (fixed seed, so every study uses the same data)."""
    d = positive_int(d, "d")
    K = positive_int(K, "K")
    rng = np.random.default_rng(seed)
    beta = rng.standard_normal(d)

    def sphere(m):
        Z = rng.standard_normal((m, d))
        return Z / np.linalg.norm(Z, axis=1, keepdims=True) * np.sqrt(d)

    Xtr = sphere(K)
    Xte = sphere(P_test)
    ytr = np.sin(Xtr @ beta / np.sqrt(d)) + 0.5
    return Xtr, ytr, Xte
