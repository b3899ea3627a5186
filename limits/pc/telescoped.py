"""Energy-only equilibrium of linear predictive coding at the minimum cost of the closed form.

The equilibrated energy of a linear PC network is (seed 001 Eq. 31; docs/theory/pc.rst §2)::

    F* = (1/B) Σ_i ½ r_iᵀ S⁻¹ r_i,   r_i = y_i − G_0 x_i − Σ_l G_l c_l,   S = Σ_l λ_l^{-1} G_l G_lᵀ (+ I/β)

with ``G_l = ∂z_L/∂ε_l`` (d_out × N_l, ``G_L = I``, ``G_0`` the end-to-end map). Only the product
chain ``G_l`` is needed: one backward sweep ``G_l = a_{l+1} G_{l+1} W_{l+1} + Σ_{src_m = l} τ_m G_m``,
each ``G_l`` consumed as it is made (``S`` accumulated from d_out × d_out products), the residuals of the
whole batch from ``X G_0ᵀ`` (one GEMM, no forward pass through the hidden layers), a Cholesky of the
d_out × d_out ``S`` and one triangular solve for all samples: cost O(L N² d_out + B d_in d_out + B d_out²),
independent of the batch size apart from the last two terms. No activities, errors or per-sample loops.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from .network import Net, check_data, make_net


def sweep(net: Net, nudge=None, check_weights=False):
    """One backward sweep of the output Jacobians ``G_l`` (d_out × N_l, ``G_L = I``),
    ``G_l = a_{l+1} G_{l+1} W_{l+1} + Σ_{src_m = l} τ_m G_m`` (O(L N² d_out); the row-major ``G @ W``
    product is the fastest BLAS form of the skinny chain), each ``G_l`` consumed as it is made. Returns
    ``(G_0, S, Gb)``: the end-to-end map ``G_0``, ``S = Σ_{l=1}^{L} λ_l^{-1} G_l G_lᵀ (+ I/β)`` and
    ``Gb = Σ_{l=1}^{L} G_l b_l`` (None without biases).

    The products are written into two reused buffers and only the ``G_m`` a skip reads later are kept:
    storing the whole chain (fresh memory for every product) and stacking it for ``S`` made the sweep
    ~10 % slower than the bare product chain at N = 1024, L = 64 (benchmarks/bench_pc.py --energy).

    ``check_weights``: each product carries one extra row of ones, so it also yields the column sums
    ``1ᵀW_l``; their total is non-finite iff some W_l holds a NaN/inf (a one is never skipped as a
    zero multiplier; inf − inf = NaN) or a finite sum overflows; only then are the weights scanned,
    and the first non-finite ``weights[l]`` is named in a ``ValueError``. The NaN/inf check of the
    weights thus costs no extra pass over memory."""
    L = net.L
    d = net.d_out
    readers: dict = {}
    for m in range(1, L + 1):
        if net.tau[m - 1] != 0:
            readers.setdefault(int(net.src[m - 1]), []).append(m)
    keep = {m for ms in readers.values() for m in ms}
    rows = -(-(d + 1) // 4) * 4 if check_weights else d   # ones rows, padded to a multiple of 4 (GEMM kernel)
    width = max(w.shape[1] for w in net.W)
    bufs = (np.empty(rows * width), np.empty(rows * width))
    Gp = np.ones((rows, d))
    Gp[:d] = np.eye(d)
    kept = {L: np.eye(d)} if L in keep else {}
    S = np.eye(d) / net.lam[L - 1]                        # G_L G_Lᵀ = I
    Gb = None if net.bias is None else net.bias[L - 1].copy()
    total = 0.0                                  # Σ_l 1ᵀW_l1: non-finite iff some weight is (or it overflows)
    for l in range(L - 1, -1, -1):
        w = net.W[l]
        g = bufs[l % 2][:rows * w.shape[1]].reshape(rows, w.shape[1])
        np.matmul(Gp, w, out=g)
        if check_weights:
            total += g[d].sum()
            g[d:] = 1.0
        gl = g[:d]
        if net.a[l] != 1.0:
            gl *= net.a[l]
        for m in readers.get(l, ()):
            gl += net.tau[m - 1] * kept[m]
        if l in keep:
            kept[l] = gl.copy()
        if l > 0:
            gg = gl @ gl.T
            S += gg if net.lam[l - 1] == 1.0 else gg / net.lam[l - 1]
            if Gb is not None:
                Gb += gl @ net.bias[l - 1]
        Gp = g
    if check_weights and not np.isfinite(total):
        for l, w in enumerate(net.W):
            if not np.isfinite(w).all():
                raise ValueError(f"weights[{l}] contains NaN or inf")
    if nudge is not None:
        S[np.diag_indices_from(S)] += 1.0 / nudge
    return gl.copy(), 0.5 * (S + S.T), Gb


def equilibrium_energy(weights, X, Y, multipliers=None, skips=None, layer_weights=None, biases=None,
                       nudge=None, decay=0.0, per_sample=False):
    """Equilibrated energy ``F* = (1/B) Σ_i ½ r_iᵀ S⁻¹ r_i`` only (seed 001 Eq. 31), at cost
    O(L N² d_out + B d_in d_out): equal to ``equilibrium(...).energy`` without computing activities,
    errors or the forward pass. ``per_sample=True`` returns the B energies ``½ r_iᵀ S⁻¹ r_i``.
    Arguments as for :func:`limits.pc.equilibrium`; with ``decay`` α > 0 there is no telescoped form
    and the block Cholesky route of :func:`~limits.pc.equilibrium` is used."""
    from ._threads import blas_threads
    from .equilibrium import check_finite_result, cholesky_or_raise, check_nudge_decay, equilibrium

    net = make_net(weights, multipliers, skips, layer_weights, biases, check_finite=False)
    X, Y = check_data(net, X, Y)
    nudge, decay = check_nudge_decay(nudge, decay)
    if decay > 0:
        e = equilibrium(net.W, X, Y, multipliers, skips, layer_weights, biases, nudge=nudge, decay=decay)
        return e.energies.copy() if per_sample else e.energy
    with blas_threads(), np.errstate(over="ignore", invalid="ignore"):
        G0, S, Gb = sweep(net, nudge, check_weights=True)
        R = Y - X @ G0.T                          # r_i = y_i − G_0 x_i − Σ_l G_l b_l, the whole batch in one GEMM
        if Gb is not None:
            R -= Gb
        check_finite_result(S, R)
        c, _ = cholesky_or_raise(S)
        V = sla.solve_triangular(c, R.T, lower=True, check_finite=False)
        e_i = 0.5 * np.einsum("ij,ij->j", V, V)
        check_finite_result(e_i)
    return e_i if per_sample else float(e_i.mean())
