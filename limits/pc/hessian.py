"""Activity Hessian ``H_z`` of the linear PC energy: sparse assembly, matrix-free products, and a
block-banded (block-tridiagonal for MLPs / 1-skip ResNets) Cholesky solver.

``∇_z F = H_z z − b`` (seed 001 Eq. 4, 15). Each energy term is ``e_l = Σ_k C_{l,k} z_k`` with
``C_{l,l} = I``, ``C_{l,l−1} = −a_l W_l − τ_l I`` (1-skip) and ``C_{l,l−n} = −τ_l I`` (n-skip), so
``H_z = Σ_l λ_l C_lᵀ C_l`` restricted to the free layers (+ α I decay, + β I on a nudged output).
MLP: diagonal ``λ_l I + λ_{l+1} a²_{l+1} W_{l+1}ᵀW_{l+1}``, off-diagonal ``−λ_{l+1} a_{l+1} W_{l+1}``
(seed 001 Eq. 5); 1-skip: seed 001 Eq. 25; n-skip: block bandwidth n.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .network import Net, make_net

# A coefficient block is (s, M): s·I + M, with M a dense matrix or None.


def _coef(net: Net, l: int, k: int):
    """``C_{l,k}`` of energy term l w.r.t. layer k as (scalar·I, matrix) or None."""
    if k == l:
        return (1.0, None)
    s, M = 0.0, None
    if k == l - 1:
        M = -net.a[l - 1] * net.W[l - 1]
    if net.tau[l - 1] != 0 and net.src[l - 1] == k:
        s = -float(net.tau[l - 1])
    if M is None and s == 0.0:
        return None
    return (s, M)


def _terms_of(net: Net, k: int):
    """Energy terms (layer indices 1..L) that contain layer k."""
    out = []
    if k >= 1:
        out.append(k)
    if k + 1 <= net.L:
        out.append(k + 1)
    for m in range(1, net.L + 1):
        if net.tau[m - 1] != 0 and net.src[m - 1] == k and m != k + 1 and m not in out:
            out.append(m)
    return out


def _ctc(c1, c2, n1, n2):
    """(s1 I + M1)ᵀ (s2 I + M2) as a dense n1 × n2 array."""
    s1, M1 = c1
    s2, M2 = c2
    out = np.zeros((n1, n2))
    if s1 and s2:
        out[np.diag_indices(min(n1, n2))] += s1 * s2
    if s1 and M2 is not None:
        out += s1 * M2
    if s2 and M1 is not None:
        out += s2 * M1.T
    if M1 is not None and M2 is not None:
        out += M1.T @ M2
    return out


@dataclass(frozen=True)
class Layout:
    """Free layers (in order) of the activity vector and their offsets."""

    layers: tuple
    sizes: tuple
    offsets: tuple
    decay: float
    nudge: float | None
    unsupervised: bool

    @property
    def n(self) -> int:
        return int(self.offsets[-1])


def layout(net: Net, unsupervised=False, nudge=None, decay=0.0) -> Layout:
    if nudge is not None:
        nudge = float(nudge)
        if not np.isfinite(nudge) or nudge <= 0:
            raise ValueError(f"nudge (β) must be a finite number > 0, got {nudge}")
    decay = _nonneg(decay, "decay")
    layers = ([0] if unsupervised else []) + list(range(1, net.L)) + ([net.L] if nudge is not None else [])
    if not layers:
        raise ValueError("the network has no free activities (L = 1, supervised, not nudged)")
    dims = net.dims
    sizes = tuple(dims[l] for l in layers)
    return Layout(tuple(layers), sizes, tuple(np.concatenate([[0], np.cumsum(sizes)]).astype(int)),
                  float(decay), nudge, bool(unsupervised))


def hessian_block(net: Net, lay: Layout, i: int, j: int) -> np.ndarray:
    """Dense block ``(H_z)_{ij}`` between free positions i and j."""
    li, lj = lay.layers[i], lay.layers[j]
    ni, nj = lay.sizes[i], lay.sizes[j]
    out = np.zeros((ni, nj))
    for l in set(_terms_of(net, li)) & set(_terms_of(net, lj)):
        ci, cj = _coef(net, l, li), _coef(net, l, lj)
        if ci is None or cj is None:
            continue
        out += net.lam[l - 1] * _ctc(ci, cj, ni, nj)
    if i == j:
        if lay.decay and 1 <= li <= net.L - 1:
            out[np.diag_indices(ni)] += lay.decay
        if lay.nudge is not None and li == net.L:
            out[np.diag_indices(ni)] += lay.nudge
    return out


def _bandwidth(net: Net, lay: Layout) -> int:
    bw = 1
    pos = {l: p for p, l in enumerate(lay.layers)}
    for m in range(1, net.L + 1):
        vs = [k for k in (m, m - 1, net.src[m - 1] if net.tau[m - 1] else m) if k in pos]
        if vs:
            bw = max(bw, max(pos[v] for v in vs) - min(pos[v] for v in vs))
    return bw


def activity_hessian(weights, multipliers=None, skips=None, layer_weights=None, unsupervised=False,
                     nudge=None, decay=0.0, dense=False):
    """Activity Hessian ``H_z`` (one sample) as a ``scipy.sparse.csr_matrix`` (block tridiagonal for
    MLPs and 1-skip ResNets, block bandwidth n for n-skip); ``dense=True`` returns an ndarray.

    ``unsupervised``: z_0 free (PSD, seed 001 §A.2.1); ``nudge`` β: z_L free with (β/2)‖y − z_L‖²;
    ``decay`` α: (α/2)Σ_hidden‖z_l‖² (shifts the spectrum by α)."""
    net = make_net(weights, multipliers, skips, layer_weights)
    lay = layout(net, unsupervised, nudge, _nonneg(decay, "decay"))
    p = _bandwidth(net, lay)
    n = len(lay.layers)
    rows = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(max(0, i - p), i + 1):
            blk = hessian_block(net, lay, i, j)
            if np.any(blk):
                rows[i][j] = sp.csr_matrix(blk)
                if i != j:
                    rows[j][i] = sp.csr_matrix(blk.T)
        if rows[i][i] is None:
            rows[i][i] = sp.csr_matrix((lay.sizes[i], lay.sizes[i]))
    Hs = sp.bmat(rows, format="csr")
    return Hs.toarray() if dense else Hs


def _nonneg(x, name):
    x = float(x)
    if not np.isfinite(x) or x < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {x}")
    return x


def ep_hessian(weights, beta=0.0, regulariser=True, dense=False):
    """Activity Hessian of the equilibrium-propagation energy (seed 001 Eq. 27–30):
    ``E = ½Σ_l‖z_l‖² − Σ_l z_lᵀ W_l z_{l−1} + (β/2)‖y − z_L‖²`` with z_1..z_L free:
    diagonal ``I`` (``(1+β) I`` for the output; 0 without the regulariser), off-diagonal ``−W_l``.
    Not convex in general (scalar L = 2 with w_2 > 1 has a negative eigenvalue)."""
    net = make_net(weights)
    beta = _nonneg(beta, "beta")
    L = net.L
    dims = net.dims
    rows = [[None] * L for _ in range(L)]
    for i in range(L):
        d = (1.0 if regulariser else 0.0) + (beta if i == L - 1 else 0.0)
        rows[i][i] = sp.identity(dims[i + 1], format="csr") * d
        if i + 1 < L:
            rows[i + 1][i] = sp.csr_matrix(-net.W[i + 1])
            rows[i][i + 1] = sp.csr_matrix(-net.W[i + 1].T)
    Hs = sp.bmat(rows, format="csr")
    return Hs.toarray() if dense else Hs


# ----------------------------------------------------------------------------- matrix-free
def hessian_operator(net: Net, lay: Layout) -> spla.LinearOperator:
    """Matrix-free ``v ↦ H_z v = Σ_l λ_l C_lᵀ (C_l v)`` (+ α v, + β v_L) at cost O(H N²): per energy
    term one product with ``W_l`` and one with ``W_lᵀ`` (never forms H_z, never copies or scales a
    weight matrix; blocks of vectors are BLAS-3)."""
    pos = {l: p for p, l in enumerate(lay.layers)}
    off = lay.offsets
    plan = []                                  # per term l: [(slice of z_k, s, c)] with C_{l,k} = s I + c W_l
    for l in range(1, net.L + 1):
        parts = []
        for k in sorted({l, l - 1, int(net.src[l - 1])}):
            if k not in pos:
                continue
            co = _coef(net, l, k)
            if co is None:
                continue
            s_, M = co
            c = -float(net.a[l - 1]) if M is not None else 0.0
            parts.append((slice(off[pos[k]], off[pos[k] + 1]), float(s_), c))
        if parts:
            plan.append((net.W[l - 1], float(net.lam[l - 1]), parts))
    diag = []
    for p, l in enumerate(lay.layers):
        d = (lay.decay if (lay.decay and 1 <= l <= net.L - 1) else 0.0) + \
            (lay.nudge if (lay.nudge is not None and l == net.L) else 0.0)
        if d:
            diag.append((slice(off[p], off[p + 1]), d))

    def mv(v):
        v = np.asarray(v, float)
        one = v.ndim == 1
        V = v.reshape(lay.n, -1)
        out = np.zeros_like(V)
        for W, lam, parts in plan:
            e = None
            for sl, s_, c in parts:
                if c:
                    t = W @ V[sl]
                    t *= c
                    e = t if e is None else e + t
            for sl, s_, c in parts:
                if s_:
                    e = s_ * V[sl] if e is None else e + s_ * V[sl]
            if lam != 1.0:
                e *= lam
            for sl, s_, c in parts:
                if s_:
                    out[sl] += s_ * e
                if c:
                    out[sl] += c * (W.T @ e)
        for sl, d in diag:
            out[sl] += d * V[sl]
        return out.ravel() if one else out

    return spla.LinearOperator((lay.n, lay.n), matvec=mv, matmat=mv, rmatvec=mv, dtype=np.float64)


def rhs(net: Net, lay: Layout, X, Y) -> np.ndarray:
    """``b`` of ``∇_z F = H_z z − b`` for each sample (columns): contributions of the clamped
    layers (x, y) and biases; e.g. MLP ``b = [a_1W_1x, 0, …, 0, a_LW_Lᵀy]`` (seed 001 Eq. 15)."""
    pos = {l: p for p, l in enumerate(lay.layers)}
    clamped = {}
    if not lay.unsupervised:
        clamped[0] = X.T
    if lay.nudge is None:
        clamped[net.L] = Y.T
    B = X.shape[0] if X is not None else Y.shape[0]
    b = np.zeros((lay.n, B))
    for l in range(1, net.L + 1):
        c = np.zeros((net.dims[l], B))
        if net.bias is not None:
            c -= net.bias[l - 1][:, None]
        for k in {l, l - 1, int(net.src[l - 1])}:
            if k in clamped:
                co = _coef(net, l, k)
                if co is not None:
                    s, M = co
                    if s:
                        c = c + s * clamped[k]
                    if M is not None:
                        c = c + M @ clamped[k]
        if not np.any(c):
            continue
        for k in {l, l - 1, int(net.src[l - 1])}:
            if k in pos:
                co = _coef(net, l, k)
                if co is None:
                    continue
                s, M = co
                sl = slice(lay.offsets[pos[k]], lay.offsets[pos[k] + 1])
                if s:
                    b[sl] -= net.lam[l - 1] * s * c
                if M is not None:
                    b[sl] -= net.lam[l - 1] * (M.T @ c)
    if lay.nudge is not None:
        p = pos[net.L]
        b[lay.offsets[p]:lay.offsets[p + 1]] += lay.nudge * Y.T
    return b


# ----------------------------------------------------------------------------- block Cholesky
class BlockCholesky:
    """Cholesky factorisation of a symmetric positive definite block-banded matrix (block
    bandwidth p; p = 1 is block tridiagonal). Cost O(n_blocks p² N³), memory O(n_blocks p N²);
    solves O(n_blocks p N²). ``shift`` factorises ``H − shift·I`` (shift-invert)."""

    def __init__(self, net: Net, lay: Layout, shift: float = 0.0, progress_bar=False):
        self.lay = lay
        self.p = _bandwidth(net, lay)
        n = len(lay.layers)
        self.Lf: dict = {}
        it = range(n)
        if progress_bar:
            from ..progress import progress

            it = progress(it, total=n, desc="block Cholesky")
        for i in it:
            for j in range(max(0, i - self.p), i + 1):
                A = hessian_block(net, lay, i, j)
                if i == j and shift:
                    A[np.diag_indices(A.shape[0])] -= shift
                for k in range(max(0, i - self.p), j):
                    if (i, k) in self.Lf and (j, k) in self.Lf:
                        A -= self.Lf[(i, k)] @ self.Lf[(j, k)].T
                if i == j:
                    try:
                        self.Lf[(i, i)] = np.linalg.cholesky(0.5 * (A + A.T))
                    except np.linalg.LinAlgError:
                        raise ValueError(
                            f"activity Hessian (minus shift {shift:g}) is not positive definite: Cholesky "
                            f"failed at block {i} (layer {lay.layers[i]})") from None
                else:
                    self.Lf[(i, j)] = sla.solve_triangular(self.Lf[(j, j)], A.T, lower=True,
                                                           check_finite=False).T

    def solve(self, b):
        lay = self.lay
        one = b.ndim == 1
        B = b.reshape(lay.n, -1)
        n = len(lay.layers)
        off = lay.offsets
        y = [None] * n
        for i in range(n):
            r = B[off[i]:off[i + 1]].copy()
            for k in range(max(0, i - self.p), i):
                r -= self.Lf[(i, k)] @ y[k]
            y[i] = sla.solve_triangular(self.Lf[(i, i)], r, lower=True, check_finite=False)
        x = [None] * n
        for i in range(n - 1, -1, -1):
            r = y[i].copy()
            for k in range(i + 1, min(n, i + self.p + 1)):
                r -= self.Lf[(k, i)].T @ x[k]
            x[i] = sla.solve_triangular(self.Lf[(i, i)], r, lower=True, trans="T", check_finite=False)
        out = np.concatenate(x, axis=0)
        return out.ravel() if one else out

    def logdet(self) -> float:
        n = len(self.lay.layers)
        return float(2 * sum(np.sum(np.log(np.diag(self.Lf[(i, i)]))) for i in range(n)))


def nonlinear_activity_hessian(weights, x, y, activation, z=None, multipliers=None, skips=None,
                               layer_weights=None, dense=False):
    """Activity Hessian of the nonlinear PC energy for one sample at activities ``z`` (hidden layers;
    default: the forward pass), e.g. for seed 001 Fig. 2's tanh / ReLU columns.

    With ``e_l = z_l − a_l W_l φ(z_{l−1}) − τ_l z_{src}`` the Hessian is ``Σ_l λ_l J_lᵀJ_l`` with the
    linearised maps ``a_l W_l diag(φ'(z_{l−1}))`` (exactly the linear Hessian of the effective weights)
    plus the curvature term ``−λ_l a_l diag(φ''(z_{l−1}) ⊙ W_lᵀ e_l)`` on block l−1. φ acts on hidden
    layers only (the input enters linearly), as in :func:`limits.pc.energy`."""
    from .network import check_data, forward, phi_pair, predictions

    net = make_net(weights, multipliers, skips, layer_weights)
    X, Y = check_data(net, np.atleast_2d(x), np.atleast_2d(y), "x", "y")
    if X.shape[0] != 1:
        raise ValueError("x must be a single sample (the Hessian is per sample)")
    act = phi_pair(activation)
    if z is None:
        hs = forward(net, X, act.phi if act is not None else None)
        zs = [X] + hs[1:net.L] + [Y]
    else:
        from ..checks import finite_array

        z = [np.atleast_2d(finite_array(v, f"z[{i}]")) for i, v in enumerate(z)]
        if len(z) != net.H:
            raise ValueError(f"z must hold the {net.H} hidden layers, got {len(z)}")
        for i, v in enumerate(z, start=1):
            if v.shape != (1, net.dims[i]):
                raise ValueError(f"z[{i - 1}] must have length N_{i} = {net.dims[i]}, got shape {v.shape}")
        zs = [X] + z + [Y]
    if act is None:
        return activity_hessian(net.W, net.a, _net_skips(net), net.lam, dense=dense)
    Weff = [net.W[0]] + [net.W[l - 1] * act.dphi(zs[l - 1][0])[None, :] for l in range(2, net.L + 1)]
    Hl = activity_hessian(Weff, net.a, _net_skips(net), net.lam, dense=True)
    mus = predictions(net, zs, act)
    lay = layout(net)
    for l in range(2, net.L + 1):
        e = zs[l][0] - mus[l - 1][0]
        curv = -net.lam[l - 1] * net.a[l - 1] * act.d2phi(zs[l - 1][0]) * (net.W[l - 1].T @ e)
        p = lay.layers.index(l - 1)
        sl = slice(lay.offsets[p], lay.offsets[p + 1])
        Hl[sl, sl] += np.diag(curv)
    return Hl if dense else sp.csr_matrix(Hl)


def _net_skips(net):
    from .network import skips_arg

    return skips_arg(net)


# ----------------------------------------------------------------------------- structured inverse
class ChainInverse:
    """``H_z⁻¹`` without any factorisation of H_z, from its telescoped structure (docs/theory/pc.rst §2, §4).

    With the output clamped (or nudged) and no decay, ``H_z = Cᵀ Λ C + d·uᵀu``: ``C`` (energy terms
    × free layers, both 1..T) is block *unit* lower triangular (``C_{l,l} = I``, ``C_{l,l−1} = −a_lW_l``,
    ``C_{l,src} = −τ_l I``), ``Λ = diag(λ_l)``, and the rank-d_out term is the output term
    (``u z = a_L W_L z_H + τ_L z_src``, d = λ_L) or the nudge (``u z = z_L``, d = β). Then
    (Woodbury)::

        K = C⁻¹ Λ⁻¹ C⁻ᵀ,   H_z⁻¹ b = K b − P Q⁻¹ u K b,   P = K uᵀ,   Q = I/d + u P   (d_out × d_out)

    ``C⁻¹`` is a forward sweep ``x_l = y_l + a_l W_l x_{l−1} + τ_l x_src`` and ``C⁻ᵀ`` a backward
    sweep, so one solve costs two passes over the weights, O(T N²) per right-hand side (BLAS-3 on
    blocks of right-hand sides), memory O(n d_out) beyond the weights — no O(T N²) factor, no
    O(T N³) factorisation. The capacitance ``Q`` is exactly the telescoped rescaling
    ``S = Σ_l λ_l⁻¹ G_l G_lᵀ (+ I/β)`` of :func:`limits.pc.rescaling` (``u C⁻¹`` = the Jacobians G_l).
    Unsupported (``ValueError``): activity decay, free input (unsupervised)."""

    def __init__(self, net: Net, lay: Layout):
        if lay.decay or lay.unsupervised:
            raise ValueError("ChainInverse needs a clamped input and no activity decay (use BlockCholesky)")
        self.net, self.lay = net, lay
        L = net.L
        self.T = L if lay.nudge is not None else L - 1            # free layers 1..T = terms 1..T
        if tuple(lay.layers) != tuple(range(1, self.T + 1)):
            raise ValueError("ChainInverse: unexpected free-layer layout")
        self.readers: dict = {}
        for m in range(1, self.T + 1):
            if net.tau[m - 1] != 0 and net.src[m - 1] >= 1:
                self.readers.setdefault(int(net.src[m - 1]), []).append(m)
        self.d = float(lay.nudge) if lay.nudge is not None else float(net.lam[L - 1])
        P = self._K(self._ut(np.eye(net.d_out)))
        Q = self._u(P)
        Q[np.diag_indices_from(Q)] += 1.0 / self.d
        self.P = P
        self.Qf = sla.cho_factor(0.5 * (Q + Q.T), lower=True, check_finite=False)

    def _blocks(self, V):
        off = self.lay.offsets
        return [V[off[p]:off[p + 1]] for p in range(len(self.lay.layers))]

    def _u(self, V):
        """``u V`` (d_out × k)."""
        net, L = self.net, self.net.L
        b = self._blocks(V)
        if self.lay.nudge is not None:
            return b[L - 1].copy()
        out = net.a[L - 1] * (net.W[L - 1] @ b[L - 2])
        if net.tau[L - 1] != 0 and net.src[L - 1] >= 1:
            out = out + net.tau[L - 1] * b[int(net.src[L - 1]) - 1]
        return out

    def _ut(self, Y):
        """``uᵀ Y`` (n × k)."""
        net, L = self.net, self.net.L
        out = np.zeros((self.lay.n, Y.shape[1]))
        b = self._blocks(out)
        if self.lay.nudge is not None:
            b[L - 1][:] = Y
            return out
        b[L - 2][:] = net.a[L - 1] * (net.W[L - 1].T @ Y)
        if net.tau[L - 1] != 0 and net.src[L - 1] >= 1:
            b[int(net.src[L - 1]) - 1] += net.tau[L - 1] * Y
        return out

    def _K(self, V):
        """``C⁻¹ Λ⁻¹ C⁻ᵀ V``: backward sweep, scale, forward sweep (in place on a copy)."""
        net, T = self.net, self.T
        X = np.array(V, dtype=float, copy=True)
        x = self._blocks(X)
        for k in range(T, 0, -1):                 # Cᵀ x = v: x_k = v_k + a_{k+1} W_{k+1}ᵀ x_{k+1} + Σ τ_m x_m
            if k + 1 <= T:
                x[k - 1] += net.a[k] * (net.W[k].T @ x[k])
            for m in self.readers.get(k, ()):
                x[k - 1] += net.tau[m - 1] * x[m - 1]
        for k in range(1, T + 1):
            x[k - 1] /= net.lam[k - 1]
        for l in range(1, T + 1):                 # C x = v: x_l = v_l + a_l W_l x_{l−1} + τ_l x_src
            if l >= 2:
                x[l - 1] += net.a[l - 1] * (net.W[l - 1] @ x[l - 2])
            if net.tau[l - 1] != 0 and net.src[l - 1] >= 1:
                x[l - 1] += net.tau[l - 1] * x[int(net.src[l - 1]) - 1]
        return X

    def solve(self, b):
        """``H_z⁻¹ b`` for a vector or an n × k block."""
        b = np.asarray(b, float)
        one = b.ndim == 1
        B = b.reshape(self.lay.n, -1)
        Kb = self._K(B)
        Kb -= self.P @ sla.cho_solve(self.Qf, self._u(Kb), check_finite=False)
        return Kb.ravel() if one else Kb
