"""The linear parts of layers as operators on matrices over (input, position), and the stage (mean, correction,
N·Cov) that the finite-width rules of compositions carry (docs/theory/finite_width.rst §8): shared by
:mod:`limits.kernels.finite_width_serial` and :mod:`limits.kernels.finite_width_residual`."""
from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .fluctuations import pair_index


class Stage:
    """(mean, correction, N·Cov) of C or Ĝ over the index set (module docstring), pair coordinates."""

    def __init__(self, kind, M, M1, V, P, spatial):
        self.kind, self.M, self.M1, self.V, self.P, self.spatial = kind, M, M1, V, P, tuple(spatial)

    @property
    def n(self):
        return self.M.shape[0]

    @property
    def pairs(self):
        return pair_index(self.n)


# ------------------------------------------------------------------ linear operators from the layers' rules
def position_operator(layer, spatial, where):
    """(L, spatial') : the linear part of ``layer``'s kernel rule on one (S × S) block of positions, as a matrix
    (S'² × S²), applied by the rule itself to the S² unit matrices (stacked as inputs)."""
    from ..layers.state import Kernel, positions_from_full

    S = int(np.prod(spatial)) if spatial else 1
    E = np.eye(S * S).reshape(S * S, S, S)[:, None]                    # (S², 1, S, S)
    if spatial:
        from ..layers.state import full_from_positions

        blk = full_from_positions(E, spatial)
        k = Kernel(blk, None, blk, None, tuple(spatial), True)
    else:
        blk = E[:, :, 0, 0]
        k = Kernel(blk, None, blk, None, (), False)
    zero = k.replace(nngp=np.zeros_like(blk), cov1=np.zeros_like(blk))
    out = layer.kernel(k, True, where)
    off = layer.kernel(zero, True, where).nngp
    sp = tuple(out.spatial)
    res = out.nngp - off
    if sp:
        if not out.full:
            raise ModelError(f"{where}: the rule keeps only equal positions here; finite-width corrections need "
                             "every pair")
        res = positions_from_full(res, sp)[:, 0]                          # (S², S', S')
    else:
        res = res.reshape(S * S, 1, 1)
    Sp = res.shape[-1]
    return res.reshape(S * S, Sp * Sp).T, sp, float(off.ravel()[0])


def pair_operator(Lpos, P, S, Sp):
    """The operator on symmetric matrices over (input, position), pair coordinates (m' × m), from the
    per-block position operator (S'² × S²): out[(p,i'),(q,j')] = Σ_{i,j} L[(i',j'),(i,j)] in[(p,i),(q,j)]."""
    n, n2 = P * S, P * Sp
    pos = np.full((n, n), -1, dtype=np.int64)
    for t, (a, b) in enumerate(pair_index(n)):
        pos[a, b] = pos[b, a] = t
    out = np.zeros((n2 * (n2 + 1) // 2, n * (n + 1) // 2))
    L4 = Lpos.reshape(Sp, Sp, S, S)
    for t, (a2, b2) in enumerate(pair_index(n2)):
        p, i2 = divmod(a2, Sp)
        q, j2 = divmod(b2, Sp)
        w = L4[i2, j2]                                                   # (S, S) over (i, j)
        nz = np.nonzero(w)
        np.add.at(out[t], pos[p * S + nz[0], q * S + nz[1]], w[nz])
    return out


def pair_vector(A, pairs):
    """The entries of the symmetric matrix A at ``pairs`` (pair coordinates)."""
    a, b = np.asarray(pairs).T
    return A[a, b]
