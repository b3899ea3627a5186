"""O(1/N) corrections through a residual section of a composition (docs/theory/finite_width.rst §8, "Residual").

A residual section is a run of ``Residual`` blocks on a stream of N channels h_c (vectors over the index set
I = (input, position)) that starts as a Gaussian stage (after Dense/Conv), followed by the *reader*: the layers up to
the next Dense/Conv. Every parametric layer met on the way is a **block** with a conditional covariance

    C_l = L_l(g_l) + b_l,   g_l = (1/N) Σ_c φ_lφ_lᵀ(input channel c),   input covariance K_in,l = Σ_{k ∈ reads(l)} C_k,

L_l the layer's linear patch operator (with σ_w², pooling/Flatten before it, and ρ² for the last layer of a
branch), φ_l the Activation in front of it (linear when the input is read directly). A block reads either the
stream (the first layer of a branch, and the reader: reads = the stream's start C_0 and every branch output before
it) or the fresh Gaussian channels of the block before it (the inner layers of a branch). Each stream channel keeps
its identity through the skips, so (C_1, …) is a Z-estimator over the N channel indices, exactly as for the fully
connected ResNets of :mod:`limits.kernels.finite_width` (§2), with the scalar scales s ⊙ replaced by the operators
L_l:

    M = I − J,  J_lk = L_l D_l (k ∈ reads(l)),   V = N·Cov(C) = M⁻¹ Σ M⁻ᵀ,
    N(E[C] − C*) = M⁻¹ v,  v_l = ½ L_l ∂²F_l : V_in,l + L_l Σ_{j, r_j < r_l} R(l, j) : (Σ_{r_j ≤ r < r_l} (M⁻¹)_{o_r j}) L_j

(D_l, ∂²F_l the exact Price derivatives of E[φ_lφ_l] at K_in,l; Σ the per-channel covariance of the L g's — four-point
functions of one stream channel at two stream depths, Cov(h^(a), h^(b)) = K^(min(a, b)); fresh blocks only with
themselves; the stream's start C_0 enters as an exogenous block with its own K1 and N·Cov from the layers before;
R(l, j) the self-interaction tensor :func:`limits.kernels.selfinteraction.self_tensor` of stream readers l, j; o_r the
last block of branch r). Every stream reader of one section must use the same φ (the self-interaction of two
different read functions is not derived). Refused by name: nested Residual, LayerNorm or Attention in a branch, a
linear layer before a branch's Activation.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

from ..errors import ModelError
from ..progress import progress
from .selfinteraction import phiphi_cov, self_tensor
from .layer_operators import Stage, pair_operator, pair_vector, position_operator
from .fluctuations import pair_index, to_matrix
from .price import hessian_contract, jacobian, pair_derivatives

WHAT = "limits.kernels.finite_width"


@dataclass(frozen=True)
class Block:
    """One parametric layer of a residual section (module docstring)."""

    reads: tuple            # earlier blocks whose C sum to this block's input covariance
    act: object             # φ of the read (linear: read directly)
    L: np.ndarray           # pair operator m_out × m_in (σ_w², pooling, ρ² included)
    bias: float
    n_in: int
    n_out: int
    stream: int | None      # residual index whose stream this block reads (the reader: len(residuals)); None: fresh
    spatial: tuple          # its output's spatial shape


def _refuse(where, why):
    raise ModelError(f"{WHAT} cannot treat this composition: {where}: {why}")


def _size(spatial):
    return int(np.prod(spatial)) if spatial else 1


def split_chains(layers, where):
    """The layers cut after each Dense/Conv: [[Activation?, pooling/Flatten…, Dense/Conv], …] (Identity dropped)."""
    from ..layers import Identity

    chains, cur = [], []
    for layer in layers:
        if isinstance(layer, Identity):
            continue
        cur.append(layer)
        if type(layer).__name__ in ("Dense", "Conv"):
            chains.append(cur)
            cur = []
    if cur:
        _refuse(where, f"{', '.join(type(x).__name__ for x in cur)} after the last Dense/Conv of a residual branch or "
                       "reader")
    return chains


def chain_block(chain, spatial, P, where, scale, reads, stream):
    """The :class:`Block` of one chain [Activation?, pooling/Flatten…, Dense/Conv] on inputs over (P, spatial)."""
    from ..activations import BUILTIN
    from ..layers import Activation, AvgPool, Flatten, GlobalAvgPool

    rest = list(chain)
    act = rest.pop(0).act if isinstance(rest[0], Activation) else BUILTIN["linear"]
    op, sp = None, tuple(spatial)
    for layer in rest[:-1]:
        if not isinstance(layer, (AvgPool, GlobalAvgPool, Flatten)):
            name = type(layer).__name__
            why = ("a second nonlinearity before the next Dense/Conv" if isinstance(layer, Activation) else
                   "no O(1/N) rule inside a residual section (nested Residual, LayerNorm or Attention: the stream's "
                   "self-interaction through them is not derived)")
            _refuse(where, f"{name}: {why}")
        Lpos, sp2, _ = position_operator(layer, sp, where)
        A = pair_operator(Lpos, P, _size(sp), _size(sp2))
        op, sp = (A if op is None else A @ op), tuple(sp2)
    Lpos, sp2, bias = position_operator(rest[-1], sp, where)
    A = pair_operator(Lpos, P, _size(sp), _size(sp2))
    op = A if op is None else A @ op
    return Block(tuple(reads), act, scale * op, scale * bias, P * _size(spatial), P * _size(sp2), stream, tuple(sp2))


def section_blocks(st, residuals, reader, where):
    """Blocks 1… of a section (block 0 is the stream's start ``st``) and the indices o_r of each branch's last block."""
    P, blocks, outputs = st.P, [None], [0]
    for r, res in enumerate(residuals):
        sp, at = st.spatial, f"{where} Residual {r} branch"
        chains = split_chains(res.branch.layers, at)
        for c, chain in enumerate(chains):
            first = c == 0
            b = chain_block(chain, sp, P, at, res.rho ** 2 if c == len(chains) - 1 else 1.0,
                            tuple(outputs) if first else (len(blocks) - 1,), r if first else None)
            blocks.append(b)
            sp = b.spatial
        if sp != tuple(st.spatial):
            _refuse(where, f"Residual {r}: its branch maps the positions {st.spatial} to {sp}")
        outputs.append(len(blocks) - 1)
    chains = split_chains(reader, f"{where} reader")
    if len(chains) != 1:
        _refuse(where, "after a residual section the composition must reach its next Dense/Conv through at most one "
                       "Activation and pooling/Flatten")
    blocks.append(chain_block(chains[0], st.spatial, P, f"{where} reader", 1.0, tuple(outputs), len(residuals)))
    acts = {id(b.act) for b in blocks[1:] if b.stream is not None}
    if len(acts) > 1:
        _refuse(where, "the branches and the reader of a residual section read the stream through different "
                       "functions (activations, or one reads it directly): the self-interaction of two read functions "
                       "is not derived")
    return blocks, outputs


def _limits(st, blocks):
    """Per block: its input covariance K_in, the limit C* and the exact Price derivatives of E[φφ] at K_in."""
    from .expectations import gram

    C, Kin, pds = [st.M], [None], [None]
    for b in blocks[1:]:
        K = sum(C[k] for k in b.reads)
        G = gram(b.act, K)
        C.append(to_matrix(b.L @ pair_vector(G, pair_index(b.n_in)), pair_index(b.n_out), b.n_out) + b.bias)
        Kin.append(K)
        pds.append(pair_derivatives(b.act, K, 0))
    return C, Kin, pds


def _noise(st, blocks, Kin, sl, tot):
    """Σ: the per-channel covariance of the blocks' L g (module docstring); the stream's start is exogenous."""
    Sig = np.zeros((tot, tot))
    Sig[sl(0), sl(0)] = st.V
    stream = [l for l in range(1, len(blocks)) if blocks[l].stream is not None]
    for ia, j in enumerate(stream):
        pairs = pair_index(blocks[j].n_in)
        for l in stream[ia:]:
            c = blocks[j].L @ phiphi_cov(blocks[j].act, Kin[j], Kin[l], Kin[j], pairs, j == l) @ blocks[l].L.T
            Sig[sl(j), sl(l)] = c
            Sig[sl(l), sl(j)] = c.T
    for l in range(1, len(blocks)):
        b = blocks[l]
        if b.stream is None:
            Sig[sl(l), sl(l)] = b.L @ phiphi_cov(b.act, Kin[l], Kin[l], Kin[l], pair_index(b.n_in), True) @ b.L.T
    return Sig


def _earlier_readers(blocks, l):
    """The stream readers j of branches before block l's stream (the j of the self-interaction of l)."""
    b = blocks[l]
    if b.stream is None:
        return []
    return [j for j in range(1, l) if blocks[j].stream is not None and blocks[j].stream < b.stream]


def _self_interaction(blocks, outputs, Kin, Minv, sl, l, bar=None):
    """L_l Σ_j R(l, j) : (Σ_{r_j ≤ r < r_l} (M⁻¹)_{o_r j}) L_j over the stream readers j of earlier branches (one
    ``bar`` step per j: each R is |pairs|² four-point functions per moment)."""
    b = blocks[l]
    out = np.zeros(b.L.shape[0])
    pairs = pair_index(b.n_in)
    for j in _earlier_readers(blocks, l):
        bj = blocks[j]
        A = sum(Minv[sl(outputs[r + 1]), sl(j)] for r in range(bj.stream, b.stream))
        R = self_tensor(b.act, Kin[l], Kin[j], Kin[j], pairs)
        out += b.L @ np.einsum("pqr,qr->p", R, A @ bj.L)
        if bar is not None:
            bar.update(1)
    return out


def propagate_section(st, blocks, outputs):
    """The reader's Gaussian stage (C*, K1, N·Cov) after a residual section (module docstring)."""
    C, Kin, pds = _limits(st, blocks)
    sizes = [st.n * (st.n + 1) // 2] + [b.n_out * (b.n_out + 1) // 2 for b in blocks[1:]]
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    tot = int(off[-1])
    sl = lambda l: slice(off[l], off[l + 1])          # noqa: E731
    M = np.eye(tot)
    for l in range(1, len(blocks)):
        J = blocks[l].L @ jacobian(pds[l], pair_index(blocks[l].n_in))
        for k in blocks[l].reads:
            M[sl(l), sl(k)] -= J
    Sig = _noise(st, blocks, Kin, sl, tot)
    Minv = solve_triangular(M, np.eye(tot), lower=True, unit_diagonal=True)
    V = Minv @ Sig @ Minv.T
    V = 0.5 * (V + V.T)
    v = np.zeros(tot)
    v[sl(0)] = pair_vector(st.M1, pair_index(st.n))
    todo = sum(len(_earlier_readers(blocks, l)) for l in range(1, len(blocks)))
    with progress(total=todo, desc=f"{WHAT}: self-interaction (branch pairs)") as bar:
        for l in range(1, len(blocks)):
            b = blocks[l]
            W = sum(V[sl(k), sl(kk)] for k in b.reads for kk in b.reads)
            v[sl(l)] = 0.5 * b.L @ hessian_contract(pds[l], 0.5 * (W + W.T), pair_index(b.n_in))
            if b.stream is not None:
                v[sl(l)] += _self_interaction(blocks, outputs, Kin, Minv, sl, l, bar)
    K1 = solve_triangular(M, v, lower=True, unit_diagonal=True)
    last = len(blocks) - 1
    n = blocks[last].n_out
    return Stage("gaussian", C[last], to_matrix(K1[sl(last)], pair_index(n), n), V[sl(last), sl(last)], st.P,
                 blocks[last].spatial)


def residual_section(st, residuals, reader, where):
    """Stage after ``residuals`` (Residual layers on the Gaussian stream ``st``) and ``reader`` (up to a Dense/Conv)."""
    blocks, outputs = section_blocks(st, residuals, reader, where)
    return propagate_section(st, blocks, outputs)
