"""Closed-form equilibrium of linear predictive coding via the telescoped rescaling ``S``.

For φ = id the energy is quadratic in the free activities and its minimiser is (docs/theory/pc.rst §2;
seed 001 Eq. 31–32, seed 000 Eq. 5–6, seed 003 Thm 4.2 / B.3)::

    r   = y − f(x)                               residual (target minus forward output)
    G_l = ∂z_L/∂ε_l                              (= B_{L:l+1} for a chain; G_L = I)
    S   = Σ_l λ_l^{-1} G_l G_lᵀ  (+ I/β nudged)  d_out × d_out, Cholesky-factorised
    ε*_l = λ_l^{-1} G_lᵀ S⁻¹ r                   prediction errors, ε_l := z_l − prediction_l
    z*_l = h_l + M_l S⁻¹ r,  M_l = B_l M_{l−1} + λ_l^{-1} G_lᵀ   (forward accumulation)
    F*  = (1/B) Σ_i ½ r_iᵀ S⁻¹ r_i

Cost O(L N² (B + d_out)) — never the (NH)×(NH) activity Hessian.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from ..checks import invertible_float
from ..results import Result
from .network import Net, check_data, forward, make_net, output_jacobians, phi_pair, predictions
from ..registry import sweep_computation


def check_nudge_decay(nudge, decay):
    """The nudge β (None or a positive float whose 1/β is finite: S gets I/β) and the activity decay α ≥ 0."""
    if nudge is not None:
        nudge = invertible_float(nudge, "nudge")
    decay = float(decay)
    if not np.isfinite(decay) or decay < 0:
        raise ValueError(f"decay (activity decay α) must be >= 0, got {decay}")
    return nudge, decay


@dataclass(frozen=True)
class Equilibrium(Result):
    """Equilibrated linear PC network for a batch (rows = samples).

    ``energy`` = (1/B) Σ_i ½ r_iᵀ S⁻¹ r_i (seed 001 Eq. 31); ``errors[l-1]`` = ε*_l (B × N_l), l = 1..L;
    ``z[l-1]`` = z*_l (B × N_l) for the hidden layers l = 1..H (plus ``z_out`` when the output is
    nudged); ``S`` the d_out × d_out rescaling (``s = S`` for scalar output, seed 000 Eq. 6);
    ``mse`` = (1/B) Σ ½‖r_i‖² (seed 000 Eq. 1)."""

    energy: float
    S: np.ndarray
    errors: list
    z: list
    residual: np.ndarray
    forward: list
    mse: float
    energies: np.ndarray
    z_out: np.ndarray | None = None
    nudge: float | None = None
    method: str = "telescoped"
    cond_S: float = 1.0
    converged: bool = True
    z_in: np.ndarray | None = None

    @property
    def s(self) -> float:
        """Scalar rescaling ``s(θ)`` (seed 000 Eq. 6); only for d_out = 1."""
        if self.S.shape != (1, 1):
            raise ValueError("s is defined for scalar output (d_out = 1); use .S")
        return float(self.S[0, 0])

    @property
    def ratio(self) -> float:
        """``MSE / F*`` (seed 001 Fig. 6); equals s(θ) for scalar output."""
        return self.mse / self.energy if self.energy > 0 else float("nan")


def rescaling(net: Net, G=None, nudge=None) -> np.ndarray:
    """``S = Σ_{l=1}^{L} λ_l^{-1} G_l G_lᵀ`` (+ I/β when the output is nudged with strength β)."""
    if G is None:
        G = output_jacobians(net)
    S = np.zeros((net.d_out, net.d_out))
    for l in range(1, net.L + 1):
        S += (G[l] @ G[l].T) / net.lam[l - 1]
    if nudge is not None:
        S += np.eye(net.d_out) / nudge
    return 0.5 * (S + S.T)


def check_finite_result(*arrays):
    """Overflow guard: float64 cannot represent the equilibrium (weights/data too large)."""
    if not all(np.all(np.isfinite(a)) for a in arrays if a is not None):
        raise ValueError("the equilibrium overflowed float64 (non-finite S, z* or F*): weights (or X, Y) are "
                         "too large in magnitude for this depth")


def cholesky_or_raise(S):
    """Cholesky factor of the rescaling S, or ``ValueError`` when S is not positive definite."""
    try:
        return sla.cho_factor(S, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        raise ValueError("the rescaling S is not positive definite (check layer_weights and weights)") from None


@sweep_computation
def equilibrium(weights, X, Y, multipliers=None, skips=None, layer_weights=None, biases=None,
                nudge=None, decay=0.0, method="telescoped") -> Equilibrium:
    """Closed-form equilibrium of the linear PC energy (docs/theory/pc.rst §2).

    ``weights`` W_1 (N×d_in) … W_L (d_out×N); ``X`` (B×d_in), ``Y`` (B×d_out); ``multipliers`` a_l;
    ``skips`` (None, "1-skip", n, or τ_l list); ``layer_weights`` λ_l (seed 003 γ_l); ``nudge`` β
    frees z_L with loss (β/2)‖y − z_L‖² (seed 003 Eq. S.10, Thm B.3); ``decay`` α adds
    (α/2)Σ_hidden‖z_l‖² (no telescoped form: solved by block Cholesky of H_z).
    ``method="block"`` forces the block-tridiagonal (banded) Cholesky solve of ``H_z z = b``.
    """
    net = make_net(weights, multipliers, skips, layer_weights, biases)
    if X is None:
        return _unsupervised(net, Y, nudge, decay, method)
    X, Y = check_data(net, X, Y)
    nudge, decay = check_nudge_decay(nudge, decay)
    if method not in ("telescoped", "block"):
        raise ValueError(f"method must be 'telescoped' or 'block', got {method!r}")
    if decay > 0 or method == "block":
        with np.errstate(over="ignore", invalid="ignore"):             # overflow → ValueError
            return block_equilibrium(net, X, Y, nudge=nudge, decay=decay)
    from ._threads import blas_threads

    with blas_threads(), np.errstate(over="ignore", invalid="ignore"):   # overflow → ValueError below
        return solve_telescoped(net, X, Y, nudge)


def _unsupervised(net: Net, Y, nudge, decay, method) -> Equilibrium:
    """Unsupervised PC (z_0 free, seed 001 §A.2.1): with the input free the energy is minimised over
    z_0 as well, ``min_{z_0} ½ (y − c − G_0 z_0)ᵀ S⁻¹ (y − c − G_0 z_0)`` — a generalised least-squares
    problem solved (minimum-norm z_0) through the Cholesky factor of S; then the supervised
    equilibrium at x = z_0*. Returned ``forward[…]`` are computed from z_0*; ``z_in`` holds z_0*."""
    if decay or method != "telescoped" or nudge is not None:
        raise ValueError("the unsupervised equilibrium (X=None) supports only method='telescoped', "
                         "no decay and no nudge")
    from ..checks import finite_array

    Y = finite_array(Y, "Y")
    if Y.ndim == 1:
        Y = Y[:, None] if net.d_out == 1 else Y[None, :]
    if Y.ndim != 2 or Y.shape[1] != net.d_out:
        raise ValueError(f"Y must be B×d_out with d_out = {net.d_out}, got shape {Y.shape}")
    if Y.shape[0] == 0:
        raise ValueError("Y has no samples (batch size B = 0); pass at least one row")
    G = output_jacobians(net)
    S = rescaling(net, G)
    Lc = np.linalg.cholesky(S)
    c = forward(net, np.zeros((1, net.d_in)))[-1]            # bias offset of the output
    A = sla.solve_triangular(Lc, G[0], lower=True)
    Bm = sla.solve_triangular(Lc, (Y - c).T, lower=True)
    Z0 = np.linalg.lstsq(A, Bm, rcond=None)[0].T
    with_blas = solve_telescoped(net, Z0, Y, None)
    return Equilibrium(**{**with_blas.__dict__, "method": "telescoped (unsupervised)", "z_in": Z0})


def solve_telescoped(net: Net, X, Y, nudge) -> Equilibrium:
    """The equilibrium by the telescoped closed form (u = S⁻¹ r per sample, r = y − f(x); docs/theory/pc.rst), all
    samples at once."""
    L = net.L
    hs = forward(net, X)
    R = Y - hs[L]
    G = output_jacobians(net)
    S = rescaling(net, G, nudge)
    cf = cholesky_or_raise(S)
    U = sla.cho_solve(cf, R.T, check_finite=False).T          # rows u_i = S⁻¹ r_i
    errors = [(U @ G[l]) / net.lam[l - 1] for l in range(1, L + 1)]
    M = [np.zeros((net.d_in, net.d_out))]                       # δ_l = M_l u, forward accumulation
    for l in range(1, L + 1):
        m = net.a[l - 1] * (net.W[l - 1] @ M[l - 1]) + G[l].T / net.lam[l - 1]
        if net.tau[l - 1] != 0:
            m = m + net.tau[l - 1] * M[net.src[l - 1]]
        M.append(m)
    z = [hs[l] + U @ M[l].T for l in range(1, L)]
    z_out = hs[L] + U @ M[L].T if nudge is not None else None
    e_i = 0.5 * np.einsum("ij,ij->i", R, U)
    check_finite_result(S, e_i, *z, *errors)
    ev = np.linalg.eigvalsh(S)
    return Equilibrium(
        energy=float(e_i.mean()), S=S, errors=errors, z=z, residual=R, forward=hs[1:],
        mse=float(0.5 * np.mean(np.sum(R * R, axis=1))), energies=e_i, z_out=z_out, nudge=nudge,
        method="telescoped", cond_S=float(ev[-1] / ev[0]), converged=True)


def energy(weights, X, Y, z, multipliers=None, skips=None, layer_weights=None, biases=None,
           nudge=None, decay=0.0, activation=None, z_out=None) -> float:
    """Evaluate the general PC energy ``F(z)`` (1/B batch average) at hidden activities ``z``
    (list of B × N_l, l = 1..H); with ``nudge`` β the output activity ``z_out`` is free and the
    output term is (β/2)‖y − z_L‖². ``activation``: name or Activation for φ on hidden layers."""
    net = make_net(weights, multipliers, skips, layer_weights, biases)
    X, Y = check_data(net, X, Y)
    phi = phi_pair(activation)
    zs = full_states(net, X, Y, z, z_out, nudge)
    return float(layer_energy(net, zs, phi, Y, nudge, decay))


def full_states(net, X, Y, z, z_out, nudge):
    """The full activity list [x, z_1 … z_H, z_out or y] after validating the given hidden activities ``z``."""
    z = list(z)
    if len(z) != net.H:
        raise ValueError(f"z must hold the {net.H} hidden layers, got {len(z)} arrays")
    from ..checks import finite_array

    z = [finite_array(zl, f"z[{l - 1}]") for l, zl in enumerate(z, start=1)]
    for l, zl in enumerate(z, start=1):
        if np.shape(zl) != (X.shape[0], net.dims[l]):
            raise ValueError(f"z[{l - 1}] must have shape {(X.shape[0], net.dims[l])}, got {np.shape(zl)}")
    if nudge is not None:
        if z_out is None:
            raise ValueError("z_out (free output activity) is required when nudge is given")
        last = finite_array(z_out, "z_out")
        if last.shape != Y.shape:
            raise ValueError(f"z_out must have shape {Y.shape}, got {last.shape}")
    else:
        last = Y
    return [X] + z + [last]


def layer_energy(net, zs, phi, Y, nudge, decay):
    """PC energy (1/B) Σ_l ½ λ_l ‖z_l − μ_l‖² (+ ½ β‖y − z_out‖² with a nudge, + ½ decay Σ‖z_l‖²) at activities ``zs``."""
    mus = predictions(net, zs, phi)
    B = zs[0].shape[0]
    F = 0.0
    for l in range(1, net.L + 1):
        e = zs[l] - mus[l - 1]
        F += 0.5 * net.lam[l - 1] * np.sum(e * e)
    if nudge is not None:
        F += 0.5 * nudge * np.sum((Y - zs[-1]) ** 2)
    if decay:
        F += 0.5 * decay * sum(np.sum(v * v) for v in zs[1:net.L])
    return F / B


# ----------------------------------------------------------------------------- seed forms
def s_theta(weights, multipliers=None, skips=None, layer_weights=None) -> float:
    """Scalar rescaling ``s(θ) = Σ_l λ_l^{-1}‖G_l‖²`` (= 1 + Σ_{l≥2}‖W^{(L:l)}‖², seed 000 Eq. 6)."""
    net = make_net(weights, multipliers, skips, layer_weights)
    if net.d_out != 1:
        raise ValueError(f"s_theta needs scalar output (d_out = 1), got d_out = {net.d_out}; use rescaling")
    return float(rescaling(net)[0, 0])


def s_seed000_eq6(weights) -> float:
    """Seed 000 Eq. 6 literally: ``s = 1 + Σ_{l=2}^{L} ‖W^{(L:l)}‖²`` with W^{(L:l)} = W_L ⋯ W_l."""
    W = list(make_net(weights).W)
    s, P = 1.0, None
    for l in range(len(W), 1, -1):
        P = W[l - 1] if P is None else P @ W[l - 1]
        s += float(np.sum(P * P))
    return s


def s_seed000_eq25(weights, a_exponents, N, gamma) -> float:
    """Seed 000 Eq. 25: ``s = 1 + γ^{-2} Σ_{l=2}^{L} N^{-2Σ_{k=l}^{L} a_k} ‖W^{(L:l)}‖²`` (raw weights,
    preactivations h_l = N^{-a_l} W_l h_{l−1}, output f = h_L/γ)."""
    from ..checks import positive_float
    from .network import per_layer

    W = list(make_net(weights).W)
    L = len(W)
    a = per_layer(a_exponents, L, "a_exponents", 0.0)
    N = positive_float(N, "N")
    gamma = positive_float(gamma, "gamma")
    s, P = 1.0, None
    for l in range(L, 1, -1):
        P = W[l - 1] if P is None else P @ W[l - 1]
        s += float(N ** (-2.0 * a[l - 1:].sum()) * np.sum(P * P)) / gamma**2
    return s


def s_seed000_eq104(weights, N, alpha=0.5, gamma0=1.0) -> float:
    """Seed 000 Eq. 104–105 (mean-field linear ResNet, h_l = (I + W_l/(L^α√N)) h_{l−1} for
    l = 2..L−1, f = w_L h_{L−1}/(γ0 N)):
    ``s = 1 + (γ0² N²)^{-1} (‖w_L‖² + Σ_{l=2}^{L−1} ‖p^{(L:l)}‖²)``,
    ``p^{(L:l)} = w_L (I + W_{L−1}/(L^α√N)) ⋯ (I + W_l/(L^α√N))``."""
    from ..checks import positive_float

    W = list(make_net(weights).W)
    N = positive_float(N, "N")
    gamma0 = positive_float(gamma0, "gamma0")
    alpha = float(alpha)
    if not np.isfinite(alpha):
        raise ValueError(f"alpha must be finite, got {alpha}")
    L = len(W)
    wL = W[-1]
    acc = float(np.sum(wL * wL))
    p = wL
    for l in range(L - 1, 1, -1):
        p = p @ (np.eye(W[l - 1].shape[0]) + W[l - 1] / (L**alpha * np.sqrt(N)))
        acc += float(np.sum(p * p))
    return 1.0 + acc / (gamma0**2 * N**2)


def S_seed001_eq32(weights, multipliers) -> np.ndarray:
    """Seed 001 Eq. 32 literally (1-skip linear ResNet, τ_l = 1 for l = 2..H):
    ``S = I + a_L² W_L W_Lᵀ + Σ_{l=2}^{H} (a_L W_L Π_{k=l}^{H}(I + a_k W_k)) (⋯)ᵀ``."""
    net = make_net(weights, multipliers, "1-skip" if len(list(weights)) > 2 else None)
    W, a = list(net.W), net.a
    L = len(W)
    H = L - 1
    aW = a[-1] * W[-1]
    S = np.eye(aW.shape[0]) + aW @ aW.T
    P = aW
    for l in range(H, 1, -1):
        P = P @ (np.eye(W[l - 1].shape[0]) + a[l - 1] * W[l - 1])
        S += P @ P.T
    return S


@dataclass(frozen=True)
class Seed003FixedPoint(Result):
    """Seed 003 Thm 4.2 / B.3 quantities (plain MLP, layer weights γ_l; single sample as columns).

    Convention: ``e_l = v_l − W_l v_{l−1}`` for every l including the output (``e_L = y − W_L v_{L−1}``
    when clamped), which is what the proof (Eq. S.80–S.92) derives; then ``e*_l = (γ_L/γ_l)
    W_{L:l+1}ᵀ (I + C_γ [+ γ_L/β I])⁻¹ (y − f)``. The printed Eq. 15 / S.104 write ``(W_{L:1}x − y)``,
    i.e. the opposite sign (prediction-minus-activity errors)."""

    e: list          # e*_1..e*_L (columns d × B)
    v: list          # v*_1..v*_{L−1}
    C: np.ndarray    # C_γ (d_out × d_out)


def seed003_fixed_point(weights, x, y, gammas, beta=None) -> Seed003FixedPoint:
    """Seed 003 Thm 4.2 (β=None) / Thm B.3 (nudged, damping ``(1 + γ_L/β) I``), implemented
    literally from products ``W_{L:i}``; ``v*_l`` from Eq. 16 with the sum over ``i = 2..l``
    (the printed upper limit ``l−1`` drops the i = l term; see tests)."""
    from ..checks import finite_array, positive_float
    from .network import per_layer

    W = list(make_net(weights).W)
    L = len(W)
    if gammas is None:
        raise ValueError(f"gammas (layer weights γ_1..γ_L) must be given, one per layer (L = {L})")
    g = per_layer(gammas, L, "gammas", 1.0, positive=True)
    if beta is not None:
        beta = positive_float(beta, "beta")
    x, y = finite_array(x, "x"), finite_array(y, "y")
    if x.size == 0 or x.size % W[0].shape[1] or y.size % W[-1].shape[0] or \
            x.size // W[0].shape[1] != y.size // W[-1].shape[0]:
        raise ValueError(f"x must hold B columns of length d_in = {W[0].shape[1]} and y B columns of length "
                         f"d_out = {W[-1].shape[0]}; got sizes {x.size} and {y.size}")
    x = x.reshape(W[0].shape[1], -1)
    y = y.reshape(W[-1].shape[0], -1)

    def prod(hi, lo):  # W_{hi:lo} = W_hi ⋯ W_lo (1-based, identity if hi < lo)
        P = np.eye(W[lo - 2].shape[0]) if hi < lo else W[hi - 1]
        for k in range(hi - 1, lo - 1, -1):
            P = P @ W[k - 1]
        return P

    d_out = W[-1].shape[0]
    C = np.zeros((d_out, d_out))
    for i in range(2, L + 1):
        P = prod(L, i)
        C += (g[L - 1] / g[i - 2]) * P @ P.T
    f = prod(L, 1) @ x
    D = np.eye(d_out) + C + ((g[L - 1] / beta) * np.eye(d_out) if beta is not None else 0.0)
    u = np.linalg.solve(D, y - f)
    e = [(g[L - 1] / g[l - 1]) * prod(L, l + 1).T @ u for l in range(1, L)] + [u]
    v = []
    for l in range(1, L):
        A = (g[L - 1] / g[l - 1]) * prod(L, l + 1).T
        for i in range(2, l + 1):
            A = A + (g[L - 1] / g[i - 2]) * prod(l, i) @ prod(L, i).T
        v.append(prod(l, 1) @ x + A @ u)
    return Seed003FixedPoint(e=e, v=v, C=C)


def block_equilibrium(net: Net, X, Y, nudge=None, decay=0.0):
    """Equilibrium by solving ``H_z z = b`` with :class:`BlockCholesky` (all samples at once)."""
    from ._threads import blas_threads
    from .hessian import BlockCholesky, hessian_operator, layout, rhs

    lay = layout(net, False, nudge, decay)
    with blas_threads():
        chol = BlockCholesky(net, lay)
        b = rhs(net, lay, X, Y)
        Zc = chol.solve(b)
    res = np.linalg.norm(hessian_operator(net, lay).matmat(Zc) - b) / max(np.linalg.norm(b), 1e-300)
    off = lay.offsets
    zfree = [Zc[off[p]:off[p + 1]].T for p in range(len(lay.layers))]
    hidden = zfree[: net.L - 1]
    z_out = zfree[-1] if nudge is not None else None
    zs = [X] + hidden + [z_out if nudge is not None else Y]
    mus = predictions(net, zs, None)
    errors = [zs[l] - mus[l - 1] for l in range(1, net.L + 1)]
    hs = forward(net, X)
    R = Y - hs[net.L]
    S = rescaling(net, output_jacobians(net), nudge)
    B = X.shape[0]
    e_i = np.array([layer_energy(net, [v[i:i + 1] for v in zs], None, Y[i:i + 1], nudge, decay) for i in range(B)])
    check_finite_result(S, e_i, *zfree)
    ev = np.linalg.eigvalsh(S)
    return Equilibrium(energy=float(e_i.mean()), S=S, errors=errors, z=hidden, residual=R, forward=hs[1:],
                       mse=float(0.5 * np.mean(np.sum(R * R, axis=1))), energies=e_i, z_out=z_out,
                       nudge=nudge, method="block" if not decay else f"block (decay {decay:g})",
                       cond_S=float(ev[-1] / ev[0]), converged=bool(res < 1e-8))
