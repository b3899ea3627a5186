"""The state one kernel rule hands to the next: :class:`Kernel` (NNGP, NTK and the inputs' own covariances).

Inputs are (P, d) for dense layers and ``(P, *spatial, C)`` for convolution / attention (as neural-tangents).
A block between two input sets is stored as

* ``nngp``, ``ntk``: ``(P1, P2, *R)`` — R = (s1, s1', s2, s2', …) (``full``: every pair of positions,
  the pairs of one spatial axis side by side) or R = (s1, s2, …) (``diagonal``: only equal positions,
  enough when no later layer mixes positions — no pooling / attention ahead);
* ``cov1`` ``(P1, 1, *R)`` and ``cov2`` ``(P2, 1, *R)``: each input with itself (the variances that a nonlinearity,
  LayerNorm or attention needs); ``cov2`` is None when X2 is X1 (the symmetric kernel).

Initial state (read-in, as neural-tangents): K⁰(x, y)[i, j] = ⟨x_i, y_j⟩ / C, Θ⁰ = 0, with ``wide`` False (the
input's C channels are finite: a rule that needs averages over infinitely many channels, such as attention's
positional embeddings, refuses such an input).

Packed pairs (``pairs``, a :class:`Sides`): ``nngp``/``ntk`` are ``(n, 1, *R)`` — the blocks of n pairs of inputs
(left[k], right[k]) stacked, e.g. the upper triangle of a symmetric kernel — and ``cov1``/``cov2`` are not carried.
What a rule needs of each input alone (its variances, attention's weights) is computed once per input in a *self
pass* (every input paired with itself, where ``cov1`` is ``nngp``) and replayed, in the order the rules ask for
it, for every chunk of pairs (:mod:`limits.kernels.packed`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Kernel:
    """NNGP/NTK blocks and self-covariances flowing through a composition (module docstring)."""

    nngp: np.ndarray
    ntk: np.ndarray | None
    cov1: np.ndarray
    cov2: np.ndarray | None
    spatial: tuple
    full: bool
    is_gaussian: bool = True
    wide: bool = False          # the channels are a width N → ∞ (after Dense / Conv / Attention), not the input's C
    pairs: "Sides | None" = None    # packed pairs of inputs (module docstring)
    probe: object = None        # called as probe(layer, kernel) by each Activation rule (limits.kernels.composed)

    def replace(self, **kw) -> "Kernel":
        """A copy with the fields ``kw`` changed (as ``dataclasses.replace``, without re-running ``__init__``: the
        rules call it a few times per layer and chunk)."""
        new = object.__new__(Kernel)
        d = new.__dict__
        d.update(self.__dict__)
        bad = set(kw) - set(d)
        if bad:
            raise TypeError(f"Kernel has no field(s) {sorted(bad)}")
        d.update(kw)
        return new

    @property
    def nsp(self) -> int:
        return len(self.spatial)

    @property
    def representation(self) -> str:
        return "none" if not self.spatial else ("full" if self.full else "diagonal")

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.nngp, self.ntk, self.cov1, self.cov2) if a is not None)

    # -------------------------------------------------------------- per-block maps
    def map_linear(self, fn, spatial=None, full=None) -> "Kernel":
        """Apply one linear map of the spatial axes to every block (conv, pooling, flatten)."""
        own = self.pairs is None               # packed pairs carry no self blocks (module docstring)
        return self.replace(nngp=fn(self.nngp), ntk=None if self.ntk is None else fn(self.ntk),
                       cov1=fn(self.cov1) if own else None, cov2=None if self.cov2 is None or not own else fn(self.cov2),
                       spatial=self.spatial if spatial is None else tuple(spatial),
                       full=self.full if full is None else full)

    def variances(self, transform=None):
        """(q1, q2): per-position variances ``(P, 1, *spatial)`` of X1 and X2 (q2 = q1 when symmetric); for packed
        pairs ``(n, 1, *spatial)`` of each pair's left and right input. ``transform``: a function of the variances
        applied per input (before the per-pair gather of packed pairs)."""
        t = (lambda q: q) if transform is None else transform
        if self.pairs is not None:
            return self.per_input(lambda cov: t(spatial_diagonal(cov, self.full, self.nsp)),
                                  getattr(transform, "__name__", "variances"))
        q1 = t(spatial_diagonal(self.cov1, self.full, self.nsp))
        q2 = q1 if self.cov2 is None else t(spatial_diagonal(self.cov2, self.full, self.nsp))
        return q1, q2

    def per_input(self, compute, tag):
        """Packed pairs: ``compute(self blocks (P, 1, *R))`` → a per-input array (P, …), taken for each pair's
        left and right input: (left values, right values), each (n, …) (:class:`Sides`; ``tag`` names it)."""
        return self.pairs.get(compute, self.cov1, tag)

    def map_pairs(self, fn, ntk_fn=None, gaussian_out=None, self_fn=None, pair_fn=None, transform=None) -> "Kernel":
        """Pointwise rules: ``fn(K, ql, qr)`` on every block with its left/right variances broadcast to
        the block's layout; ``ntk_fn(K, T, ql, qr)`` gives the new NTK of the cross block; ``self_fn``
        (default ``fn``) maps the self blocks ``cov1``/``cov2``; ``pair_fn(K, T, ql, qr)`` → (K', T') does the
        cross block's NNGP and NTK in one go (when both are wanted); ``transform``: the rules receive
        ``transform(variances)`` (computed per input) instead of the variances."""
        sf = fn if self_fn is None else self_fn
        q1, q2 = self.variances(transform)
        f = self.full
        l1, r1 = expand(q1, f, True), expand(q1, f, False)
        r12 = expand(q2 if self.pairs is not None else np.swapaxes(q2, 0, 1), f, False)
        if pair_fn is not None and self.ntk is not None:
            nngp, ntk = pair_fn(self.nngp, l1, r12, self.ntk)
        else:
            nngp = fn(self.nngp, l1, r12)
            ntk = None if self.ntk is None or ntk_fn is None else ntk_fn(self.nngp, self.ntk, l1, r12)
        if self.pairs is not None:
            return self.replace(nngp=nngp, ntk=ntk, cov1=None,
                           is_gaussian=self.is_gaussian if gaussian_out is None else gaussian_out)
        cov1 = sf(self.cov1, l1, r1)
        cov2 = None
        if self.cov2 is not None:
            cov2 = sf(self.cov2, expand(q2, f, True), expand(q2, f, False))
        return self.replace(nngp=nngp, ntk=ntk, cov1=cov1, cov2=cov2,
                       is_gaussian=self.is_gaussian if gaussian_out is None else gaussian_out)

    def synced(self) -> "Kernel":
        """Symmetric kernels: ``cov1`` := the batch diagonal of ``nngp``, so that an input's variance and its
        kernel with itself are the same float (a correlation of exactly 1 — what ReLU-type derivative
        kernels need to be exact there). Packed pairs: in the self pass ``cov1`` := ``nngp`` (every pair is an
        input with itself), otherwise unchanged."""
        if self.pairs is not None:
            return self.replace(cov1=self.nngp) if self.pairs.selves else self
        if self.cov2 is not None:
            return self
        d = np.moveaxis(np.diagonal(self.nngp, axis1=0, axis2=1), -1, 0)[:, None]
        return self.replace(cov1=np.ascontiguousarray(d))

    def to_diagonal(self) -> "Kernel":
        """Keep only equal-position entries (valid when no later layer mixes positions)."""
        if not self.full or not self.spatial:
            return self
        return self.map_linear(lambda K: spatial_diagonal(K, True, self.nsp), full=False)


class Sides:
    """Per-input quantities of packed pairs (:class:`Kernel` ``pairs``; module docstring). In the self pass
    (``tapes`` None: pair k is input k with itself) :meth:`get` computes each quantity from the self blocks and
    records it; a chunk of pairs (``left``, ``right``: indices into the inputs of the two self passes, ``tapes``
    their records) replays the records in the order the rules ask for them — the same order for every chunk, since
    the rules are the same calls on the same shapes."""

    def __init__(self, left=None, right=None, tapes=None):
        self.left, self.right, self.tapes = left, right, tapes
        self.selves = tapes is None
        self.recorded = []
        self.pos = 0

    def get(self, compute, cov, tag):
        """(left values, right values) of ``compute(self blocks)`` — computed and recorded (with ``tag``) in the
        self pass, replayed otherwise (RuntimeError if the rules ask in another order than they recorded)."""
        if self.selves:
            v = compute(cov)
            self.recorded.append((tag, v))
            return v, v
        tl, tr = self.tapes
        i = self.pos
        if i >= len(tl) or tl[i][0] != tag:
            raise RuntimeError(f"packed pairs: a rule asked for {tag!r} (request {i}), which the self pass recorded "
                               f"as {tl[i][0] if i < len(tl) else 'nothing'!r}")
        self.pos += 1
        return tl[i][1][self.left], tr[i][1][self.right]


def spatial_diagonal(K, full, nsp):
    """Equal-position entries (A, B, s1, s2, …) of a block ``(A, B, *R)``."""
    if not full or nsp == 0:
        return K
    for _ in range(nsp):                         # (A,B,s1,s1',s2,s2') → (A,B,s2,s2',s1) → (A,B,s1,s2)
        K = np.diagonal(K, axis1=2, axis2=3)
    return np.ascontiguousarray(K)


def expand(q, full, left):
    """Variances (A, B, s1, s2, …) broadcast against a full block (A, B, s1, s1', …): left factor
    varies with the first position of each pair, right with the second."""
    if not full or q.ndim == 2:
        return q
    shape = list(q.shape[:2])
    for s in q.shape[2:]:
        shape += [s, 1] if left else [1, s]
    return q.reshape(shape)


def full_from_positions(G, spatial):
    """Reorder a Gram over flattened positions (A, B, S, S') into the full layout (A, B, s1, s1', …)."""
    A, B = G.shape[:2]
    n = len(spatial)
    G = G.reshape((A, B) + tuple(spatial) + tuple(spatial))
    order = [0, 1] + [a for d in range(n) for a in (2 + d, 2 + n + d)]
    return np.ascontiguousarray(G.transpose(order))


def positions_from_full(K, spatial):
    """Inverse of :func:`full_from_positions`: (A, B, s1, s1', …) → (A, B, S, S')."""
    n = len(spatial)
    order = [0, 1] + [2 + 2 * d for d in range(n)] + [3 + 2 * d for d in range(n)]
    S = int(np.prod(spatial))
    return K.transpose(order).reshape(K.shape[0], K.shape[1], S, S)


EXACT_C = 16       # inputs with at most this many channels: the read-in Gram by elementwise sums (below)
MATMUL_C = 2       # packed pairs with more channels: the read-in Gram of each pair by one matrix product


def _products(a, b, full, self_block):
    """Σ_c a[p, i, c] b[q, j, c] (full) or Σ_c a[p, i, c] b[q, i, c] (diagonal); ``self_block``: only p = q,
    shape (P, 1, …), of a with itself, or of the aligned rows of a and b when ``self_block == "aligned"``. For few
    channels the sum runs over c in order with one rounding per operation, the
    same for every entry whatever the block — so equal inputs in X1 and X2 give the bits of the self
    block, and a correlation of exactly 1 stays 1 in cross kernels (tiles) too."""
    C = a.shape[-1]
    if self_block and self_block != "aligned":
        b = a
    if C <= EXACT_C:
        if full:
            left = a[:, None, :, None, :]
            right = (b[:, None, None, :, :] if self_block else b[None, :, None, :, :])
        else:
            left = a[:, None, :, :]
            right = b[:, None, :, :] if self_block else b[None, :, :, :]
        G = left[..., 0] * right[..., 0]
        for c in range(1, C):
            G += left[..., c] * right[..., c]
        return G
    if self_block:
        G = np.matmul(a, np.swapaxes(b, 1, 2)) if full else np.einsum("pic,pic->pi", a, b)
        return G[:, None]
    return (np.einsum("pic,qjc->pqij", a, b, optimize=True) if full
            else np.einsum("pic,qic->pqi", a, b, optimize=True))


def initial(X1, X2, full, want_ntk) -> Kernel:
    """K⁰(x, y)[i, j] = ⟨x_i, y_j⟩/C (every position pair when ``full``), Θ⁰ = 0."""
    spatial = tuple(X1.shape[1:-1])
    C = X1.shape[-1]

    def block(A, B, self_block=False):
        a = A.reshape(A.shape[0], -1, C)
        b = B.reshape(B.shape[0], -1, C)
        if not spatial:
            G = (A @ B.T / C) if not self_block else np.einsum("pc,pc->p", A, A)[:, None] / C
            return G
        G = _products(a, b, full, self_block) / C
        if full:
            return full_from_positions(G, spatial)
        return G.reshape(G.shape[:2] + spatial)

    nngp = block(X1, X1 if X2 is None else X2)
    cov1 = block(X1, X1, True)
    cov2 = None if X2 is None else block(X2, X2, True)
    return Kernel(nngp, np.zeros_like(nngp) if want_ntk else None, cov1, cov2, spatial, bool(full and spatial)).synced()


def initial_pairs(A, B, full, want_ntk, sides) -> Kernel:
    """K⁰ of the packed pairs (A[k], B[k]), ``(n, 1, *R)`` (module docstring; the arithmetic of :func:`initial`'s
    self blocks, so an input paired with itself gives their bits), Θ⁰ = 0; ``sides`` the pairs' :class:`Sides`."""
    spatial = tuple(A.shape[1:-1])
    C = A.shape[-1]
    full = bool(full and spatial)
    a, b = A.reshape(A.shape[0], -1, C), B.reshape(B.shape[0], -1, C)
    if full and C > MATMUL_C:                    # one small product per pair (the same for an input with itself)
        G = np.matmul(a, np.swapaxes(b, 1, 2))[:, None] / C
    else:
        G = _products(a, b, full, "aligned") / C
    G = full_from_positions(G, spatial) if full else G.reshape(G.shape[:2] + spatial)
    return Kernel(G, np.zeros_like(G) if want_ntk else None, G if sides.selves else None, None, spatial, full,
                  pairs=sides)
