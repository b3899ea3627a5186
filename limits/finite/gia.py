"""Finite pre-activation ResNets trained by online SGD in two backprop modes — the gradient-
independence (GIA) study of docs/theory/nfd.rst §5 — and the two-layer residual-block study of docs/theory/nfd.rst §6.

Network (docs/theory/nfd.rst §1, γ = 1): ``h⁰ = U x/√d``, ``h^{l+1} = h^l + √(T/L) n^{-1/2} W^l φ(h^l)``,
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
from ._blas import limit_blas
from ..registry import sweep_computation


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


class _Negated:
    """−W^l_0 of a :class:`_Weights` (the antithetic copy: the same law)."""

    def __init__(self, w):
        self.w = w

    def __getitem__(self, l):
        return -self.w[l]


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


@sweep_computation
@limit_blas
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
    positive_int(K, "len(X_train)")
    positive_int(d, "X_train columns (d)")
    if Xte.shape[1] != d:
        raise ValueError(f"X_test must have d={d} columns (as X_train), got {Xte.shape[1]}")
    nmat = (2 if mode == "decoupled" else 1) * L * n * n * 8
    store = dense or nmat <= store_gb * 2**30
    W0 = _Weights(seed, n, L, 1, store)
    Wt0 = _Weights(seed, n, L, 2, store) if mode == "decoupled" else W0
    return _train(Xtr, ytr, Xte, n, L, T, activation, eta_bar, mode, seed, train_input_layer, dense, W0, Wt0)


def _train(Xtr, ytr, Xte, n, L, T, activation, eta_bar, mode, seed, train_input_layer, dense, W0, Wt0):
    """The online-SGD run of :func:`online_sgd` on validated inputs and given W^l_0 (and W̃^l_0)."""
    K, d = Xtr.shape
    act = _act(activation)
    s = np.sqrt(T / L)
    rng0 = np.random.default_rng([seed, 0])
    U = rng0.standard_normal((n, d))
    v = rng0.standard_normal(n)
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


@limit_blas
def online_sgd_modes(X_train, y_train, X_test, n: int, L: int, T: float = 1.0, activation="tanh",
                     eta_bars=(0.01, 0.02), seed: int = 0, train_input_layer: bool = True,
                     store_gb: float = 1.0, antithetic: bool = False) -> np.ndarray:
    """Final test outputs of :func:`online_sgd` for both modes and several ``eta_bars`` from ONE
    initialisation (the same U_0, v_0, W_0, W̃_0 as ``online_sgd(..., seed=seed)``; the weights are
    drawn once and shared, which is where the time goes at large n). Returns an array
    (2, len(eta_bars), P_test): index 0 coupled, 1 decoupled; entry-for-entry equal to the
    separate ``online_sgd`` runs. ``antithetic=True``: the decoupled entry is the average of the
    runs with W̃_0 and −W̃_0 (same law; cancels the fluctuations linear in W̃_0, an unbiased and
    lower-variance estimate of the decoupled networks' mean output)."""
    n = positive_int(n, "n")
    L = positive_int(L, "L")
    T = positive_float(T, "T")
    etas = finite_array(eta_bars, "eta_bars", ndim=1)
    if etas.size < 1 or np.any(etas < 0):
        raise ValueError("eta_bars must be a non-empty list of non-negative learning rates")
    Xtr = finite_array(X_train, "X_train", ndim=2)
    ytr = finite_array(y_train, "y_train", ndim=1)
    Xte = finite_array(X_test, "X_test", ndim=2)
    if ytr.shape[0] != Xtr.shape[0]:
        raise ValueError("y_train and X_train have different lengths")
    positive_int(Xtr.shape[0], "len(X_train)")
    if Xte.shape[1] != Xtr.shape[1]:
        raise ValueError(f"X_test must have d={Xtr.shape[1]} columns (as X_train), got {Xte.shape[1]}")
    store = 2 * L * n * n * 8 <= nonnegative_float(store_gb, "store_gb") * 2**30
    W0 = _Weights(seed, n, L, 1, store)
    Wt0 = _Weights(seed, n, L, 2, store)
    out = np.empty((2, etas.size, Xte.shape[0]))
    for j, eta in enumerate(etas):
        out[0, j] = _train(Xtr, ytr, Xte, n, L, T, activation, float(eta), "coupled", seed, train_input_layer,
                           False, W0, W0).f_test[-1]
        back = (Wt0, _Negated(Wt0)) if antithetic else (Wt0,)
        out[1, j] = np.mean([_train(Xtr, ytr, Xte, n, L, T, activation, float(eta), "decoupled", seed,
                                    train_input_layer, False, W0, b).f_test[-1] for b in back], axis=0)
    return out


@sweep_computation
def gia_task(d: int = 10, K: int = 4, P_test: int = 4, seed: int = 12345):
    """The synthetic task of the GIA study: inputs on the sphere of radius √d, targets
    y = tanh-teacher ``sin(β·x/√d) + 0.5`` (fixed seed, so every study uses the same data)."""
    d = positive_int(d, "d")
    K = positive_int(K, "K")
    P_test = positive_int(P_test, "P_test", minimum=0)
    rng = np.random.default_rng(seed)
    beta = rng.standard_normal(d)

    def sphere(m):
        Z = rng.standard_normal((m, d))
        return Z / np.linalg.norm(Z, axis=1, keepdims=True) * np.sqrt(d)

    Xtr = sphere(K)
    Xte = sphere(P_test)
    ytr = np.sin(Xtr @ beta / np.sqrt(d)) + 0.5
    return Xtr, ytr, Xte


# ============================================================================ GIA sweep (docs/theory/nfd.rst §5)
@dataclass(frozen=True)
class GIASweep(Result):
    """Coupled vs decoupled finite networks over an (n, L) grid, common random numbers per seed.

    ``f_coupled``/``f_decoupled``: (len(ns), len(Ls), S, K+1, P) test outputs after k updates.
    ``gap_mean``/``gap_se``: (len(ns), len(Ls), P) paired mean and SE of f_coupled − f_decoupled
    at the final step.
    """

    ns: np.ndarray
    Ls: np.ndarray
    seeds: np.ndarray
    T: float
    eta_bar: float
    activation: str
    train_input_layer: bool
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    f_coupled: np.ndarray
    f_decoupled: np.ndarray
    gap_mean: np.ndarray
    gap_se: np.ndarray
    seconds: float


def gia_sweep(ns, Ls, n_seeds: int = 8, X_train=None, y_train=None, X_test=None, T: float = 1.0,
              activation="tanh", eta_bar: float = 1.0, train_input_layer: bool = True, seed0: int = 0,
              progress_bar: bool = True) -> GIASweep:
    """Run coupled and decoupled online SGD for every (n, L) and seed (same init for both modes)."""
    import time

    from ..progress import progress

    ns = int_list(ns, "ns")
    Ls = int_list(Ls, "Ls")
    n_seeds = positive_int(n_seeds, "n_seeds", minimum=2)
    if X_train is None:
        X_train, y_train, X_test = gia_task()
    K, P = len(X_train), len(X_test)
    fc = np.zeros((len(ns), len(Ls), n_seeds, K + 1, P))
    fd = np.zeros_like(fc)
    t0 = time.perf_counter()
    jobs = [(i, j, s) for i in range(len(ns)) for j in range(len(Ls)) for s in range(n_seeds)]
    for i, j, s in progress(jobs, total=len(jobs), desc="GIA sweep", disable=None if progress_bar else True):
        kw = dict(n=int(ns[i]), L=int(Ls[j]), T=T, activation=activation, eta_bar=eta_bar,
                  seed=seed0 + s, train_input_layer=train_input_layer)
        fc[i, j, s] = online_sgd(X_train, y_train, X_test, mode="coupled", **kw).f_test
        fd[i, j, s] = online_sgd(X_train, y_train, X_test, mode="decoupled", **kw).f_test
    gap = fc[..., -1, :] - fd[..., -1, :]
    return GIASweep(ns=ns, Ls=Ls, seeds=np.arange(seed0, seed0 + n_seeds), T=float(T), eta_bar=float(eta_bar),
                    activation=activation if isinstance(activation, str) else repr(activation),
                    train_input_layer=bool(train_input_layer), X_train=np.asarray(X_train, float),
                    y_train=np.asarray(y_train, float), X_test=np.asarray(X_test, float),
                    f_coupled=fc, f_decoupled=fd, gap_mean=gap.mean(axis=2),
                    gap_se=gap.std(axis=2, ddof=1) / np.sqrt(n_seeds), seconds=time.perf_counter() - t0)


def int_list(v, name):
    """Non-empty 1-D list of integers >= 1 (widths, depths) or ValueError naming ``name``."""
    out = np.array([positive_int(x, name) for x in np.atleast_1d(v)], dtype=np.int64)
    if out.size == 0:
        raise ValueError(f"{name} must list at least one value")
    return out


def extrapolate_inverse(x, y, se):
    """Weighted least squares ``y = a + b/x``; returns (a, se_a, b, se_b, chi2/dof).
    Used for n → ∞ (x = n) and L → ∞ (x = L) extrapolation of the GIA gap."""
    x, y, se = (finite_array(v, k, ndim=1) for v, k in ((x, "x"), (y, "y"), (se, "se")))
    if not x.shape == y.shape == se.shape:
        raise ValueError(f"x, y and se must have equal lengths, got {x.shape}, {y.shape}, {se.shape}")
    if np.any(x <= 0):
        raise ValueError("x (widths or depths) must be > 0")
    if np.any(se < 0):
        raise ValueError("se must be >= 0")
    if x.size < 2:
        raise ValueError("need at least two points to extrapolate")
    w = 1.0 / np.maximum(se, 1e-300) ** 2
    A = np.stack([np.ones_like(x), 1.0 / x], axis=1)
    Aw = A * np.sqrt(w)[:, None]
    coef, *_ = np.linalg.lstsq(Aw, y * np.sqrt(w), rcond=None)
    cov = np.linalg.inv(Aw.T @ Aw)
    dof = max(x.size - 2, 1)
    chi2 = float(np.sum(w * (y - A @ coef) ** 2)) / dof
    scale = max(chi2, 1.0) if x.size > 2 else 1.0
    return float(coef[0]), float(np.sqrt(cov[0, 0] * scale)), float(coef[1]), float(np.sqrt(cov[1, 1] * scale)), chi2


# ============================================================================ two-layer blocks (docs/theory/nfd.rst §6)
def two_layer_net(d, n, L, T=1.0, activation="tanh"):
    """limits.finite Network: ``u^l = n^{-1/2} W^{l,1} φ(h^l)``, ``h^{l+1} = h^l + √(T/L) n^{-1/2} W^{l,2} φ(u^l)``,
    ``h⁰ = Ux/√d``, ``f = n^{-1} v·φ(h^L)``, all weights N(0, 1)."""
    from .network import Block, Dense, Network

    s = np.sqrt(T / L)
    blocks = [Block((Dense(n, n, mult=1 / np.sqrt(n)), Dense(n, n, mult=1 / np.sqrt(n))), True, branch=s)
              for _ in range(L)]
    return Network(readin=Dense(d, n, mult=1 / np.sqrt(d)), blocks=blocks, readout=Dense(n, 1, mult=1 / n),
                   activation=activation, out_scale=1.0)


def layer_rates(L, n, eta_bar, T=1.0, correction=False):
    """Per-layer learning rates: η = η̄ n everywhere; with ``correction`` the first internal layer of
    every block gets η₁ = η̄ n √(L/T) (docs/theory/nfd.rst §6, seed 002 Eq. 8)."""
    base = eta_bar * n
    rates = {"in": base, "out": base}
    for i in range(1, L + 1):
        rates[f"{i}.1"] = base * (np.sqrt(L / T) if correction else 1.0)
        rates[f"{i}.2"] = base
    return rates


@dataclass(frozen=True)
class CollapseStudy(Result):
    """One SGD step on one sample, measured per layer against frozen-weight baselines (App. H).

    ``du_rms[j, s]``: rms over units and blocks of u(W¹_1, h_1) − u(W¹_0, h_1) (first-layer learning);
    ``dr_rms[j, s]``: L × rms of r(W²_1, u_1) − r(W²_0, u_1), r = √(T/L) W² φ(u)/√n (residual-stream
    learning, scaled by L so that Θ(1/L) per block reads Θ(1)); both without and with the correction.
    """

    Ls: np.ndarray
    n: int
    eta_bar: float
    T: float
    du_rms: np.ndarray
    dr_rms: np.ndarray
    du_rms_corrected: np.ndarray
    dr_rms_corrected: np.ndarray


@sweep_computation
@limit_blas
def collapse_study(Ls, n=256, eta_bar=0.5, T=1.0, n_seeds=4, d=10, activation="tanh", seed=0) -> CollapseStudy:
    """Measure first-layer vs residual-increment learning after one SGD step, vs depth L."""
    from .backward import loss_and_grads
    from .forward import forward
    from .weights import init_streams, init_weights

    Ls = int_list(Ls, "Ls")
    n = positive_int(n, "n")
    d = positive_int(d, "d")
    n_seeds = positive_int(n_seeds, "n_seeds")
    T = positive_float(T, "T")
    eta_bar = nonnegative_float(eta_bar, "eta_bar")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, d))
    x *= np.sqrt(d) / np.linalg.norm(x)
    y = np.array([[1.0]])
    out = {c: (np.zeros((len(Ls), n_seeds)), np.zeros((len(Ls), n_seeds))) for c in (False, True)}
    act = _act(activation)
    for j, L in enumerate(Ls):
        net = two_layer_net(d, n, int(L), T, activation)
        s_branch = np.sqrt(T / L)
        streams = init_streams(n_seeds, seed=seed + 1000 * j)
        for s in range(n_seeds):                 # one init at a time: memory ≈ 3 · 2L · n² · 8 bytes
            w0 = init_weights(net, streams=streams[s:s + 1])
            _, g, _ = loss_and_grads(net, w0, x, y, reduction="sum")
            for corr in (False, True):
                rates = layer_rates(int(L), n, eta_bar, T, corr)
                w1 = w0.copy()
                for name in w1.W:
                    w1.W[name] = w1.W[name] - rates[name] * g.dW[name]
                f1 = forward(net, w1, x)
                du = dr = 0.0
                for i in range(1, int(L) + 1):
                    a1 = f1.inp[f"{i}.1"]            # φ(h^l) after the update, (1, 1, n)
                    u1 = f1.pre[f"{i}.1"]
                    u_frozen = np.einsum("sij,spj->spi", w0.W[f"{i}.1"], a1) / np.sqrt(n)
                    du += float(np.mean((u1 - u_frozen) ** 2))
                    a2 = act.phi(u1)
                    r1 = s_branch * np.einsum("sij,spj->spi", w1.W[f"{i}.2"], a2) / np.sqrt(n)
                    r_frozen = s_branch * np.einsum("sij,spj->spi", w0.W[f"{i}.2"], a2) / np.sqrt(n)
                    dr += float(np.mean((r1 - r_frozen) ** 2))
                out[corr][0][j, s] = np.sqrt(du / L)
                out[corr][1][j, s] = L * np.sqrt(dr / L)
    for corr in (False, True):
        for arr in out[corr]:
            if not np.all(np.isfinite(arr)):         # the SGD step overflowed: no NaN passed off as a result
                raise ValueError(f"eta_bar = {eta_bar:g} is too large: one SGD step makes the weights overflow "
                                 f"float64 (non-finite layer changes); lower eta_bar")
    return CollapseStudy(Ls=Ls, n=int(n), eta_bar=float(eta_bar), T=float(T), du_rms=out[False][0],
                         dr_rms=out[False][1], du_rms_corrected=out[True][0], dr_rms_corrected=out[True][1])


@dataclass(frozen=True)
class TransferStudy(Result):
    """Final training loss (mean over seeds) vs η̄ for several depths, without/with the correction."""

    Ls: np.ndarray
    etas: np.ndarray
    loss: np.ndarray            # (2, len(Ls), len(etas)): [plain, corrected]
    loss_se: np.ndarray | None  # None for one seed
    best_eta: np.ndarray        # (2, len(Ls))
    n: int
    steps: int


@sweep_computation
@limit_blas
def transfer_study(Ls, etas, n=128, steps=20, P=16, d=10, n_seeds=3, T=1.0, activation="tanh",
                   seed=0) -> TransferStudy:
    """Full-batch GD on a fixed synthetic regression task; divergent runs get loss = inf (and SE 0).
    ``loss_se`` is None for ``n_seeds = 1`` (a standard error needs ≥ 2 seeds)."""
    from .backward import loss_and_grads
    from .weights import init_weights

    Ls = int_list(Ls, "Ls")
    etas = finite_array(etas, "etas", ndim=1)
    if etas.size == 0 or np.any(etas < 0):
        raise ValueError(f"etas must list at least one learning rate >= 0, got {etas.tolist()}")
    n = positive_int(n, "n")
    steps = positive_int(steps, "steps", minimum=0)
    P = positive_int(P, "P")
    d = positive_int(d, "d")
    n_seeds = positive_int(n_seeds, "n_seeds")
    T = positive_float(T, "T")
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, d))
    X *= np.sqrt(d) / np.linalg.norm(X, axis=1, keepdims=True)
    beta = rng.standard_normal(d)
    Y = np.sin(X @ beta / np.sqrt(d))[:, None]
    loss = np.full((2, len(Ls), len(etas)), np.inf)
    loss_se = np.zeros_like(loss)
    for j, L in enumerate(Ls):
        net = two_layer_net(d, n, int(L), T, activation)
        w_init = init_weights(net, n_seeds, seed=seed + 7 * j + 1)
        for c, corr in enumerate((False, True)):
            for e, eta in enumerate(etas):
                rates = layer_rates(int(L), n, eta, T, corr)
                w = w_init.copy()
                ok = True
                with np.errstate(all="ignore"):
                    for _ in range(steps):
                        lv, g, _ = loss_and_grads(net, w, X, Y, reduction="mean")
                        if not np.all(np.isfinite(lv)) or np.max(lv) > 1e6:
                            ok = False
                            break
                        for name in w.W:
                            w.W[name] = w.W[name] - rates[name] * g.dW[name]
                    if ok:
                        lv, _, _ = loss_and_grads(net, w, X, Y, reduction="mean")
                        ok = bool(np.all(np.isfinite(lv)))
                if ok:
                    loss[c, j, e] = float(np.mean(lv))
                    if n_seeds > 1:
                        loss_se[c, j, e] = float(np.std(lv, ddof=1) / np.sqrt(n_seeds))
    best = etas[np.argmin(loss, axis=2)]
    return TransferStudy(Ls=Ls, etas=etas, loss=loss, loss_se=loss_se if n_seeds > 1 else None, best_eta=best,
                         n=int(n), steps=int(steps))
