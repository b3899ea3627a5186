"""Kernels of compositions as packed pairs of inputs — what :func:`limits.kernels.composed.kernel` does for inputs
with spatial axes (CNNs, attention over positions).

A composition's rules act on each pair of inputs separately: the block of (x, y) needs only the block of (x, y)
before it and what x and y have alone (their variances, attention's weights). So::

    1. self pass   every input with itself, in chunks of inputs: its self block through all layers, the per-input
                   quantities the rules ask for recorded in order (limits.layers.state.Sides), and the read-out's
                   diagonal K(x, x), Θ(x, x);
    2. pairs       the pairs x < y (symmetric kernel: the upper triangle, each pair once) or every pair of X1 × X2
                   (cross kernel), in chunks of about CHUNK_ENTRIES block entries stacked as (n, 1, *R); each chunk
                   through all layers, replaying its inputs' recorded quantities; entry (x, y) is written at (x, y)
                   and, symmetric, at (y, x).

Read-in: when the composition starts with linear layers (Dense, LayerNorm, Attention without a positional
embedding, Conv) and every pair of positions is kept after them, those layers act once on per-input features
and each chunk starts from one rank-m product per pair (:mod:`limits.kernels.lowrank`); otherwise from the
read-in K⁰ = ⟨x_i, y_j⟩/C.

Work: P(P + 1)/2 blocks for a symmetric kernel (tiles of b inputs: P²/2 + P·b/2, plus the self blocks of both
sides of every tile, 2/b more), P1·P2 + P1 + P2 for a cross kernel; every entry's arithmetic is that of the
tiled path (the factored read-in: to rounding), so an input paired with itself gives the bits of its self block (a correlation of exactly 1 stays 1).
Memory: the outputs, the recorded per-input quantities (P·S floats per activation or LayerNorm, P·S² per
attention layer) and one chunk per thread (about CHUNK_ENTRIES floats per array: the layers' passes run in
cache; the chunks are shared out over the threads of :mod:`limits.parallel`, each writing its own entries).
"""
from __future__ import annotations

import threading

import numpy as np

from .. import parallel

HEAP_WARM = 1 << 21            # floats (16 MiB) allocated and freed once per process before the first chunk

CHUNK_ENTRIES = 1 << 17         # block entries per chunk of pairs (1 MiB per array; with the rules' temporaries
                                # a few MiB: the passes of a layer stay in the L2/L3 cache)


_warm = False


def warm_heap():
    """Free one 16 MiB block once per process, so that glibc serves the chunks' arrays (a few MiB, allocated and
    freed layer after layer) from its heap instead of fresh pages from the kernel: freeing a block that was
    mapped raises glibc's dynamic mmap threshold to its size, and the heap's trim threshold to twice that
    (mallopt(3), M_MMAP_THRESHOLD). Fresh pages cost a page fault each — measured 0.6 s of 1.4–1.9 s for the
    CNN-GP + CNTK of 60 digits (8×8) on this project's 2-core virtual machine. Elsewhere (another allocator) a
    no-op."""
    global _warm
    if not _warm:
        block = np.empty(HEAP_WARM)
        del block
        _warm = True


def pairs_per_chunk(model, input_shape) -> int:
    """Pairs of inputs per chunk: ``CHUNK_ENTRIES`` over the entries of one pair's largest block (S² with every
    pair of positions, S with equal positions only; at least 1)."""
    spatial = tuple(input_shape[:-1])
    S = int(np.prod(spatial)) if spatial else 1
    per = S * S if (spatial and model.needs_full(False)) else S
    return max(1, CHUNK_ENTRIES // per)


def pair_chunks(P1, P2, symmetric, n):
    """(left, right) index arrays of at most ``n`` pairs each: x < y row by row (``symmetric``), else every
    (x, y) of P1 × P2."""
    left, right, size = [], [], 0
    for i in range(P1):
        j = i + 1 if symmetric else 0
        while j < P2:
            take = min(P2 - j, n - size)
            left.append(np.full(take, i))
            right.append(np.arange(j, j + take))
            size += take
            j += take
            if size == n:
                yield np.concatenate(left), np.concatenate(right)
                left, right, size = [], [], 0
    if size:
        yield np.concatenate(left), np.concatenate(right)


def _run(m, k0, trace=None):
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        k = m.kernel(k0, False, "", trace)
    if k.spatial:
        raise ValueError(f"the composition ends with spatial axes {k.spatial}; end it with Flatten() or "
                         "GlobalAvgPool() (and a Dense read-out) for P1×P2 kernels")
    return k


def self_pass(m, start, P, n):
    """Every one of the ``P`` inputs with itself, ``n`` inputs per chunk (``start(left, right, sides)``: the
    chunk's first block, :func:`reader`): (tape, diagonal read-outs {name: (P,)}, trace of the first chunk). The
    tape lists the recorded per-input quantities, each (P, …), in the order of the rules."""
    from ..layers.state import Sides

    parts, diag, trace = [], {g: np.empty(P) for g in ("nngp", "ntk")}, None
    for s in range(0, P, n):
        idx = np.arange(s, min(s + n, P))
        sides = Sides()
        k0 = start(idx, idx, sides)
        t = [] if trace is None else None
        k = _run(m, k0, t)
        if trace is None:
            trace = _input_row(k0) + t
        parts.append(sides.recorded)
        diag["nngp"][s:s + n] = k.nngp[:, 0]
        if k.ntk is not None:
            diag["ntk"][s:s + n] = k.ntk[:, 0]
    tape = [(parts[0][i][0], np.concatenate([p[i][1] for p in parts])) for i in range(len(parts[0]))]
    return tape, diag, trace


def reader(m, X1, X2, get):
    """(the composition after its factored read-in, start(left, right, sides) → the first block of the pairs
    (X1[left], X2[right]) — through the factored leading layers (:mod:`limits.kernels.lowrank`) when there are
    any, else the read-in K⁰ —, the same for X1 with X1 and X2 with X2 (the self passes), structure rows of the
    factored layers)."""
    from ..layers.serial import Serial
    from ..layers.state import Kernel, initial_pairs
    from . import lowrank

    full = m.needs_full(False)
    head = lowrank.prefix(m.layers, X1.shape[1:])
    if head and not Serial(m.layers[head:]).needs_full(False):
        head = 0                                 # equal positions only: the rules' passes cost about the product
    if not head:
        def plain(A, B):
            return lambda left, right, sides: initial_pairs(A[left], B[right], full, "ntk" in get, sides)
        Y = X1 if X2 is None else X2
        return m, plain(X1, Y), plain(X1, X1), plain(Y, Y), []
    rest = Serial(m.layers[head:])
    f1 = lowrank.factor(m.layers[:head], X1, "ntk" in get)
    f2 = f1 if X2 is None else lowrank.factor(m.layers[:head], X2, "ntk" in get)

    def start(a, b):
        def read(left, right, sides):
            K, T = lowrank.pairs_block(a, b, left, right)
            return Kernel(K, T, K if sides.selves else None, None, a.spatial, True, True, a.wide, sides)
        return read
    rows, shape = [], X1.shape[1:]
    for i, l in enumerate(m.layers[:head]):
        shape = l.out_shape(shape, 1)
        rows.append({"layer": i, "name": l.name, "representation": "factored", "spatial": list(shape[:-1]),
                     "bytes": int(f1.F.nbytes + f2.F.nbytes * (X2 is not None))})
    return _Shifted(rest, head), start(f1, f2), start(f1, f1), start(f2, f2), rows


class _Shifted:
    """The composition after ``head`` factored layers, its trace rows numbered as layers of the whole."""

    def __init__(self, rest, head):
        self.rest, self.head = rest, head

    def kernel(self, k0, need_full_after, where, trace=None):
        t = None if trace is None else []
        k = self.rest.kernel(k0, need_full_after, where, t)
        if trace is not None:
            trace.extend({**r, "layer": r["layer"] + self.head} for r in t)
        return k


def _input_row(k0):
    return [{"layer": -1, "name": "input", "representation": k0.representation, "spatial": list(k0.spatial),
             "bytes": int(k0.nbytes)}]


def _groups(n_chunks, n):
    """Contiguous groups of chunk indices, several per thread (chunks cost alike; the last ones may be short)."""
    if n <= 1 or n_chunks <= 1:
        return [range(n_chunks)]
    return parallel.split([1] * n_chunks, min(n_chunks, 4 * n))


def kernel(m, X1, X2, get, progress=None):
    """(outputs {name: P1×P2}, diagnostics) of the composition ``m`` (module docstring): the symmetric kernel of
    X1 when ``X2`` is None, else the cross kernel X1 × X2."""
    from ..layers.state import Sides
    from ..progress import progress as _progress

    sym = X2 is None
    warm_heap()
    n = pairs_per_chunk(m, X1.shape[1:])
    m, start, start1, start2, head_rows = reader(m, X1, X2, get)
    P1, P2 = X1.shape[0], (X1 if sym else X2).shape[0]
    tape1, d1, trace = self_pass(m, start1, P1, n)
    trace = trace[:1] + head_rows + trace[1:]
    tape2, d2 = (tape1, d1) if sym else self_pass(m, start2, P2, n)[:2]
    out = {g: np.empty((P1, P2)) for g in get}
    if sym:
        for g in get:
            np.fill_diagonal(out[g], d1[g])
    npairs = P1 * (P1 - 1) // 2 if sym else P1 * P2
    chunks = -(-npairs // n)
    bar = _progress(total=chunks, desc=f"kernel pairs {P1}×{P2}", disable=None if chunks >= 64 else True) \
        if progress is None else _progress(total=chunks, desc=f"kernel pairs {P1}×{P2}", disable=not progress)
    chunks = list(pair_chunks(P1, P2, sym, n))
    lock = threading.Lock()

    def part(group):                     # the chunks of one thread; each writes its own entries
        first = None
        for c in group:
            left, right = chunks[c]
            k0 = start(left, right, Sides(left, right, (tape1, tape2)))
            t = [] if c == 0 else None
            k = _run(m, k0, t)
            if c == 0:
                first = _input_row(k0) + head_rows + t
            for g in get:
                v = getattr(k, g)[:, 0]
                out[g][left, right] = v
                if sym:
                    out[g][right, left] = v
            with lock:
                bar.update(1)
        return first
    try:
        firsts = parallel.map_blocks(part, _groups(len(chunks), parallel.threads()))
    finally:
        bar.close()
    structure = (firsts[0] if firsts else None) or trace
    peak = max(r["bytes"] for r in structure)
    for name, a in out.items():
        if not np.all(np.isfinite(a)):
            raise ValueError(f"the {name.upper()} of this composition overflowed (inf/NaN); use smaller variances")
    diag = {"structure": structure, "input_representation": structure[0]["representation"],
            "peak_bytes": int(peak), "source": "limits.kernels.composed", "engine": "packed pairs",
            "pairs_per_chunk": int(n), "pairs": int(npairs + P1 + (0 if sym else P2)),
            "tape_bytes": int(sum(a.nbytes for _, a in tape1) + (0 if sym else sum(a.nbytes for _, a in tape2)))}
    return out, diag
