"""NNGP/NTK Grams for large P, tile by tile: ``kernel_blocked(model, X, block=…, get=…, dtype=…, out=…)``.

The recursion of :mod:`limits.kernels.cross` (seed 004 Eq. 29–30) is entrywise once the variance
vector is known: entry (α, β) of layer l needs K^{l−1}_αβ, q^{l−1}_α and q^{l−1}_β only. So the
variances are propagated first for all P inputs (O(L·P)),

    q^0_α = σ²_w,in |x_α|²/d + σ²_b,in,   q^l = [q^{l−1}] + ρ²(σ_w² E[φ(u)²]_{u~N(0,q^{l−1})} + σ_b²),

and then every tile X_I × X_J with I ≤ J (upper triangle only) is run through all L layers and
the read-out while it sits in cache; its read-out kernels are written into a preallocated P×P
output (a fresh array, a caller-given array, or an ``.npy`` file opened as ``np.memmap`` and moved
into place atomically when complete) together with the mirrored tile (X_J × X_I = tileᵀ). Time
O(L·P²/2) Gaussian expectations, memory: the output plus O(block²) scratch — never a (L+1)·P² stack,
never a P×P temporary.

erf, relu and linear use their closed forms fused on the tile (scale-free determinant form, the
formulas of :mod:`limits.activations`); any other activation, and any tile whose NTK leaves float64
range, goes through :func:`limits.kernels.kernel` on the tile pair (same numbers, same
``*_exploded_at`` diagnostics). ``dtype=np.float32`` stores the output in single precision (each tile
is computed in float64 and rounded once): the measured error vs float64 is a relative 5.96e-8 max
over all entries (= 2⁻²⁴, one rounding; 4e-8–6e-8 of max |K| in absolute terms) for the erf and relu
NNGP and NTK, MLP L = 10, P = 2000 (benchmarks/bench_bigp.py, row "float32 error"). Half the memory,
but a float32 Gram is no input for a Cholesky at large P (its rounding alone is κ·6e-8).

Measured (benchmarks/bench_bigp.py, one BLAS thread, 2-core shared machine): NNGP + NTK of an MLP,
L = 10, P = 20,000, float64: erf 96 s CPU, relu 97 s CPU, peak RSS 6.05 GiB (the 5.96 GiB output + 90 MB);
CPU ∝ P^1.98 ± 0.04 (erf) and P^2.03 ± 0.01 (relu) over P = 2500…20,000; at P = 5000 1.8× (erf) and
2.2× (relu) less CPU than the plain numpy full-matrix recursion, with 0.46 GiB instead of 1.6–1.8 GiB.
"""
from __future__ import annotations

import os
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np

from .. import parallel
from . import diagnostics as _diag
from ._args import row_ids, snap_identical, snap_variances
from .cross import KernelResult, flag_explosions, parse_get, check_inputs, model_record

__all__ = ["kernel_blocked", "kernel_diag", "compute_tile", "FUSED"]

FUSED = ("erf", "relu", "linear")       # activations with a fused closed-form tile path
_MODERATE = 1e150                       # variances below this: q_α q_β cannot overflow (fast formulas)
_INV_PI = 1.0 / np.pi
_FILLS = ("both", "upper", "lower")
PATCH_PAIRS = 64                        # delicate pairs per task of a tile's patch (limits.parallel)


def _variances(kw, X, act):
    """(L+1)×P variances q^l (read-in, then every hidden layer), the cross kernel's recursion; −1 or
    the first layer where they leave float64 range (> 1e100 or non-finite)."""
    from .. import gaussian

    L, d = kw["depth"], X.shape[1]
    r2 = kw["rho"] ** 2
    cw, cb = r2 * kw["sigma_w2"], r2 * kw["sigma_b2"]
    Q = np.empty((L + 1, X.shape[0]))
    Q[0] = kw["sigma_w2_in"] * np.einsum("ij,ij->i", X, X) / d + kw["sigma_b2_in"]
    with np.errstate(over="ignore", invalid="ignore"):
        for l in range(1, L + 1):
            q = Q[l - 1]
            e = cw * np.asarray(gaussian.kernel(act, q, q, q)) + cb
            Q[l] = q + e if kw["residual"] else e
            if not (np.all(np.isfinite(Q[l])) and Q[l].max() <= _diag.LARGE):
                Q[l:] = np.inf
                return Q, l
    return Q, -1


class _Tile:
    """Scratch for one tile (n×m ≤ block²) and the fused erf/relu/linear recursion on it. The same
    elementwise code runs on the variance vector (:meth:`variances`), so that a diagonal entry of a
    tile equals its variance bit for bit (relu's E[φ'φ'] has an infinite slope at correlation 1: a
    one-ulp mismatch there would cost 1e-8)."""

    def __init__(self, name, kw, block, want_ntk):
        self.name, self.kw, self.want_ntk = name, kw, want_ntk
        r2 = kw["rho"] ** 2
        self.cw, self.cb = r2 * kw["sigma_w2"], r2 * kw["sigma_b2"]
        self.buf = np.empty((7 if want_ntk else 5, block * block))
        self.ids = None                                              # (ids of X rows, ids of X2 rows): row_ids
        self.delicate = None                                         # (K⁰ tile, q1, q2, ids) of the last run

    def _views(self, shape):
        n = int(np.prod(shape))
        return [b[:n].reshape(shape) for b in self.buf]

    def _expect(self, K, A, B, E, G, w1, w2, w3):
        """E ← E[φφ], G ← E[φ'φ'] (G None: skipped) for covariances [[A, K], [K, B]] (A, B broadcast
        against K: row/column variances of a tile, or the variance vector itself). Scale-free forms of
        limits.activations: det = (g − |k|)(g + |k|), g = √(AB), k clipped to |k| ≤ g."""
        name = self.name
        if name == "linear":
            np.copyto(E, K)
            if G is not None:
                G.fill(1.0)
            return
        g = np.multiply(A, B, out=w1)
        np.sqrt(g, out=g)                                            # g = √(AB)
        ak = np.abs(K, out=w2)
        np.subtract(g, ak, out=E)                                    # E used as scratch
        np.minimum(ak, g, out=w3)
        np.copysign(w3, K, out=w3)                                   # k clipped to |k| ≤ g
        np.add(g, ak, out=w2)
        np.multiply(E, w2, out=w2)
        np.maximum(w2, 0.0, out=w2)                                  # det = AB − k² ≥ 0
        k = w3
        if name == "erf":
            w2 *= 4.0
            w2 += 1.0 + 2.0 * A
            w2 += 2.0 * B
            np.sqrt(w2, out=w2)                                      # √((1+2A)(1+2B) − 4k²)
            k *= 2.0
            np.divide(k, w2, out=E)
            np.arctan(E, out=E)
            E *= 2.0 * _INV_PI                                       # (2/π) atan2(2k, ·) = (2/π) atan(2k/·), · > 0
            if G is not None:
                np.divide(4.0 * _INV_PI, w2, out=G)                  # (4/π)/√(·)
        else:                                                        # relu
            np.sqrt(w2, out=w2)                                      # root = √det
            # π − θ by the half-angle formula (as limits.kernels._fused): t = root/(g + |k|) = tan(θ/2)
            # for k ≥ 0 and tan((π − θ)/2) for k < 0, t ∈ [0, 1]; g + |k| = 0 only for g = 0 (θ = 0)
            np.abs(k, out=E)
            E += g
            at = np.divide(w2, E, out=w1, where=E > 0.0)             # (w1 held g, no longer needed)
            np.copyto(at, 0.0, where=E <= 0.0)
            np.arctan(at, out=at)
            at *= 2.0
            np.subtract(np.pi, at, out=E)
            np.copyto(at, E, where=k >= 0.0)                          # π − θ
            np.multiply(at, k, out=E)
            E += w2
            E *= 0.5 * _INV_PI                                       # (root + (π − θ)k)/(2π)
            if G is not None:
                np.multiply(at, 0.5 * _INV_PI, out=G)                # (π − θ)/(2π)

    def _layers(self, K, A_of, B_of, views, watch=None):
        """All L layers and the read-out on K (overwritten); A_of(l)/B_of(l) the variances at layer l; ``watch``
        (:class:`limits.kernels.halfangle.Watch`) sees K^l for l = 0..L."""
        kw, cw, cb = self.kw, self.cw, self.cb
        E, w1, w2, w3 = views[:4]
        G = views[5] if self.want_ntk else None
        T = views[6] if self.want_ntk else None
        if T is not None:
            np.copyto(T, K)
        res = kw["residual"]
        if watch is not None:
            watch(0, 0, K)
        for l in range(1, kw["depth"] + 1):
            self._expect(K, A_of(l - 1), B_of(l - 1), E, G, w1, w2, w3)
            E *= cw
            E += cb                                                  # C = ρ²(σ_w² E + σ_b²)
            if T is not None:                                        # Θ ← [Θ] + C + ρ²σ_w² G∘Θ
                if res:
                    np.multiply(G, T, out=G)
                    G *= cw
                    T += G
                else:
                    T *= G
                    T *= cw
                T += E
            if res:
                K += E
            else:
                np.copyto(K, E)
            if watch is not None:
                watch(l, 0, K)
        L = kw["depth"]
        self._expect(K, A_of(L), B_of(L), E, G, w1, w2, w3)
        E *= kw["sigma_w2_out"]
        E += kw["sigma_b2_out"]                                      # K_out
        if T is not None:
            T *= G
            T *= kw["sigma_w2_out"]
            T += E                                                   # Θ_out = K_out + σ²_w,out G∘Θ^L
        return E, T

    def gram0(self, XI, XJ, c_in, b_in, out):
        np.matmul(XI, XJ.T, out=out)
        out *= c_in
        out += b_in                                                  # K⁰ = σ²_w,in X_I X_Jᵀ/d + σ²_b,in
        return out

    def variances(self, X, starts, block, c_in, b_in, snap=None):
        """(L+1)×P variances by this class's own arithmetic: q⁰ from the diagonal tiles' products (``snap``,
        if given, then makes identical rows' q⁰ equal, in place), then q^l = [q^{l−1}] + C(q^{l−1}, q^{l−1},
        q^{l−1}) on the vector."""
        P, L = X.shape[0], self.kw["depth"]
        Q = np.empty((L + 1, P))
        for i in starts:
            I = slice(i, min(i + block, P))
            n = I.stop - I.start
            Q[0, I] = np.diag(self.gram0(X[I], X[I], c_in, b_in, self._views((n, n))[4]))
        if snap is not None:
            snap(Q[0])
        views = [np.empty(P) for _ in range(7 if self.want_ntk else 5)]
        E, w1, w2, w3 = views[:4]
        for l in range(1, L + 1):
            q = Q[l - 1]
            self._expect(q, q, q, E, None, w1, w2, w3)
            E *= self.cw
            E += self.cb
            np.add(q, E, out=Q[l]) if self.kw["residual"] else np.copyto(Q[l], E)
        return Q

    def run(self, QI, QJ, XI, XJ, I, J, c_in, b_in):
        """Read-out (K_out, Θ_out) of the tile X_I × X_J (views of the scratch, valid until the next call)."""
        views = self._views((XI.shape[0], XJ.shape[0]))
        K = self.gram0(XI, XJ, c_in, b_in, views[4])
        if self.ids is not None:                                     # identical inputs: correlation exactly 1
            snap_identical(K, self.ids[0][I], self.ids[1][J], QI[0, I])
        self.delicate = None
        watch = None
        if self.name in ("relu", "erf"):                            # delicate entries at any layer (halfangle)
            from .halfangle import Watch

            watch = Watch(self.name, QI[:, I], QJ[:, J])
            self.delicate = (watch, K.copy(), QI[0, I].copy(), QJ[0, J].copy(),
                             None if self.ids is None else (self.ids[0][I], self.ids[1][J]))
        n = parallel.threads()
        if n <= 1 or K.size * (self.kw["depth"] + 1) < 2 * parallel.MIN_ENTRIES:
            return self._layers(K, lambda l: QI[l, I][:, None], lambda l: QJ[l, J][None, :], views, watch)
        return self._rows_on_threads(K, QI[:, I], QJ[:, J], views, watch, n)

    def _rows_on_threads(self, K, QI, QJ, views, watch, n):
        """:meth:`_layers` on row pieces of the tile, on the threads (:mod:`limits.parallel`): each piece uses its
        rows of the scratch views and of K; the recursion is entrywise, so the bits are those of one piece."""
        step = -(-K.shape[0] // (2 * n))
        starts = list(range(0, K.shape[0], step))
        watches = watch.forks(len(starts)) if watch is not None else [None] * len(starts)

        def piece(k):
            r, w = slice(starts[k], starts[k] + step), watches[k]
            seen = None if w is None else (lambda l, a, blk: w(l, a + starts[k], blk))
            self._layers(K[r], lambda l: QI[l, r][:, None], lambda l: QJ[l][None, :], [v[r] for v in views], seen)
        parallel.map_blocks(piece, range(len(starts)))
        if watch is not None:
            watch.join(watches[1:])
        return views[0], (views[6] if self.want_ntk else None)


def _outputs(out, get, shape, dtype):
    """{name: (array, tmp_path_or_None, final_path_or_None)} for every requested kernel."""
    if out is None:
        spec = {g: None for g in get}
    elif isinstance(out, dict):
        bad = set(out) - set(get)
        if bad or set(get) - set(out):
            raise ValueError(f"out: a dict needs exactly the keys {sorted(get)}, got {sorted(out)}")
        spec = dict(out)
    else:
        if len(get) != 1:
            raise ValueError(f"out: pass a dict {{name: array or path}} for the {len(get)} kernels {get}")
        spec = {get[0]: out}
    res = {}
    try:
        for g, o in spec.items():
            if o is None:
                res[g] = (np.empty(shape, dtype=dtype), None, None)
            elif isinstance(o, np.ndarray):
                if o.shape != shape or o.dtype != dtype or not o.flags.writeable:
                    raise ValueError(f"out[{g!r}] must be a writeable {shape} array of dtype {np.dtype(dtype)}, "
                                     f"got shape {o.shape}, dtype {o.dtype}")
                res[g] = (o, None, None)
            elif isinstance(o, (str, os.PathLike)):
                path = Path(o)
                if path.suffix != ".npy":
                    raise ValueError(f"out[{g!r}]: a file output must end in .npy (written as an np.memmap), got {path}")
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
                os.close(fd)
                res[g] = (np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape), tmp, path)
            else:
                raise ValueError(f"out[{g!r}] must be None, a numpy array or a .npy path, got {type(o).__name__}")
    except BaseException:
        _discard(res)
        raise
    return res


def _discard(res):
    for _, tmp, _ in res.values():
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def _finish(res):
    """Move completed memmap files into place (flush, mode 0o666 & ~umask, fsync, rename)."""
    from ..results import current_umask

    arrays = {}
    for g, (a, tmp, path) in res.items():
        if tmp is None:
            arrays[g] = a
            continue
        a.flush()
        del a
        os.chmod(tmp, 0o666 & ~current_umask())
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        arrays[g] = np.load(path, mmap_mode="r+", allow_pickle=False)
    return arrays


def kernel_blocked(model, X, block=256, get=("nngp", "ntk"), *, X2=None, dtype=np.float64, out=None,
                   fill="both", progress=None, backend="serial", scheduler=None, n_workers=None,
                   memory_limit="2GiB", n_jobs=None):
    """Read-out NNGP/NTK of ``model`` on ``X`` (P×d_in), computed tile by tile (module docstring):
    equal to ``limits.kernels.kernel(model, X)`` / ``nngp(X, model=model)`` to 1e-12 in float64, with
    memory = the output + O(``block``²). With ``X2`` (P2×d_in) the P×P2 block between X and X2
    (= ``kernel(model, X, X2)``), every tile, no mirroring.

    ``block``: tile edge (any size ≥ 1; the last tile row/column is smaller when it does not divide P).
    ``get`` ⊆ {"nngp", "ntk"}. ``dtype`` float64 (default) or float32 (measured max relative error
    5.96e-8 = 2⁻²⁴ vs float64: each tile is computed in float64 and rounded once). ``out``: None (new
    arrays), an array or a ``.npy`` path (one kernel requested), or a dict {name: array | path}; a
    path is filled as an ``np.memmap`` in a temporary file of the same directory and renamed onto the
    path only when complete (readers never see a partial file); the result then holds the memmaps.
    ``fill`` (symmetric case): "both" (full matrix; each upper tile's transpose is mirrored as it is
    written), "upper" or "lower" (one triangle, diagonal tiles in full, the other triangle left
    untouched — the upper triangle of a C-ordered array is the lower one of its F-ordered transpose,
    what ``scipy.linalg.cho_factor(A.T, lower=True, overwrite_a=True)`` factors in place).
    ``progress``: None (a bar on a terminal, a periodic line otherwise — :mod:`limits.progress`),
    True, False. Returns :class:`limits.kernels.KernelResult` (``diagnostics`` also hold ``block``,
    ``tiles``, ``path`` = "fused"|"cross", ``dtype``, ``fill``).

    ``model`` may be a composition (``limits.serial``; X of shape (P, d), (P, T, C) or (P, H, W, C)): then
    each tile is the cross kernel of its two row blocks by the packed path (``limits.kernels.kernel``'s numbers; a
    diagonal tile its symmetric kernel), memory and time are estimated first
    (:func:`limits.kernels.composed.check_cost`), the result is a :class:`limits.kernels.composed.SerialKernelResult`
    and a tile store keeps ``block`` (default 256) as given.

    ``backend="dask"`` (kernels that do not fit in memory): ``out`` is then a directory (an existing one,
    or a new path without a suffix or ending in ``.tiles``), filled with one
    ``.npy`` file per upper-triangle tile by dask.distributed tasks (``scheduler`` None → a LocalCluster of
    ``n_workers`` workers with ``memory_limit`` each; or ``tcp://host:8786``), atomically per tile and
    resumable, and the return value is a :class:`limits.largep.TileStore` (no P×P array anywhere);
    see :mod:`limits.kernels.tilestore`. ``backend="serial"`` with a directory ``out`` does the same
    in this process.

    ``n_jobs`` (in this process): threads over the tiles, one task per tile, when there are at least four tiles per
    thread, else over the row pieces of each tile (a composition: its pairs of inputs) — :mod:`limits.parallel`;
    None: ``$LIMITS_NUM_THREADS``, else every core; the numbers are the same for any value.
    """
    with parallel.using(n_jobs):
        return _kernel_blocked(model, X, block, get, X2, dtype, out, fill, progress, backend, scheduler, n_workers,
                               memory_limit)


def _kernel_blocked(model, X, block, get, X2, dtype, out, fill, progress, backend, scheduler, n_workers,
                    memory_limit):
    """:func:`kernel_blocked`'s body, in its thread context."""
    from ..layers import as_serial

    if backend not in ("serial", "dask"):
        raise ValueError(f"backend must be 'serial' or 'dask', got {backend!r}")
    comp = as_serial(model)
    tiles_out = isinstance(out, (str, os.PathLike)) and (Path(out).is_dir() or Path(out).suffix in ("", ".tiles"))
    if backend == "dask" or tiles_out:
        from .tilestore import fill_tiles

        if X2 is not None or fill != "both" or np.dtype(dtype) != np.float64:
            raise ValueError("backend='dask' / a directory out stores the symmetric float64 kernel of X only "
                             "(no X2, fill or dtype)")
        if out is None or not tiles_out:
            raise ValueError("backend='dask' needs out=DIRECTORY (the tile store)")
        if block == 256 and comp is None:
            block = 2048                        # a model's tile task is cheap per entry: fewer, larger tiles
        return fill_tiles(model if comp is None else comp, X, out, compute_tile, block=block, get=get,
                          backend=backend, scheduler=scheduler, n_workers=n_workers, memory_limit=memory_limit,
                          progress=progress)
    if scheduler is not None:
        raise ValueError("scheduler: only meaningful with backend='dask'")
    if comp is not None:
        return _composition_blocked(comp, X, block, get, X2, dtype, out, fill, progress)
    what = "limits.kernels.kernel_blocked"
    m, get = _model(model, get, what)
    X = check_inputs(X, "X", m.d_in)
    sym = X2 is None
    X2 = X if sym else check_inputs(X2, "X2", m.d_in)
    block, dtype = _options(block, dtype, fill, sym, progress)

    want_ntk = "ntk" in get
    P, P2 = X.shape[0], X2.shape[0]
    block = min(block, max(P, P2))
    eng = _Engine(m, get, block)
    ids1, ids2 = eng.identical_rows(X, X2, sym)       # identical inputs share q⁰ bit for bit
    Q, Q2, q_bad = eng.variances(X, lambda q0: snap_variances(q0, ids1)), None, -1
    if not sym:
        Q2 = eng.variances(X2, lambda q0: snap_variances(q0, ids2, Q[0], ids1))
    q_bad = eng.q_bad
    res = _outputs(out, get, (P, P2), dtype)
    tiles = _tile_list(P, P2, block, sym)
    bad = [-1]
    lock = threading.Lock()

    def one(I, J, diagonal):
        blk, at = eng.tile(X[I], X2[J], Q, I, Q if sym else Q2, J)
        if at >= 0:
            with lock:
                bad[0] = at if bad[0] < 0 else min(bad[0], at)
        _put(res, I, J, blk, sym, diagonal, fill, symmetrise=True)

    if q_bad >= 0:                                       # the NNGP variances overflow: every entry is +inf
        for a, _, _ in res.values():
            a[...] = np.inf
    arrays = _run_tiles(res, [] if q_bad >= 0 else tiles, block, P, P2, progress, one)
    ntk_bad = bad[0]
    if q_bad >= 0:
        ntk_bad = q_bad
    diag = {"nngp_exploded_at": int(q_bad), "ntk_exploded_at": int(ntk_bad) if want_ntk else -1, "warnings": [],
            "source": what, "block": int(block), "tiles": len(tiles), "path": "fused" if eng.fused else "cross",
            "dtype": str(dtype), "fill": fill}
    flag_explosions(diag, want_ntk)
    return KernelResult(arrays.get("nngp"), arrays.get("ntk"), None, None, model_record(m), diag, sym, X,
                        None if sym else X2)


def _options(block, dtype, fill, sym, progress):
    """(block, dtype) checked, with fill and progress."""
    from ..checks import positive_int

    block = positive_int(block, "block")
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float64), np.dtype(np.float32)):
        raise ValueError(f"dtype must be float64 or float32, got {dtype}")
    if fill not in _FILLS:
        raise ValueError(f"fill must be one of {_FILLS}, got {fill!r}")
    if not sym and fill != "both":
        raise ValueError("fill: only the symmetric kernel (X2=None) can be stored as one triangle")
    if progress not in (None, True, False):
        raise ValueError(f"progress must be None, True or False, got {progress!r}")
    return block, dtype


def _tile_list(P, P2, block, sym):
    """Tile origins (i, j): the upper triangle (i ≤ j) of the symmetric kernel, else every tile of P × P2."""
    s1, s2 = list(range(0, P, block)), list(range(0, P2, block))
    return [(i, j) for a, i in enumerate(s1) for j in s1[a:]] if sym else [(i, j) for i in s1 for j in s2]


def _run_tiles(res, tiles, block, P, P2, progress, one):
    """``one(I, J, diagonal)`` for every tile (a progress bar, or a periodic line when not on a terminal); then the
    outputs moved into place (:func:`_finish`), or discarded on any error or interrupt."""
    from ..progress import progress as _progress

    lock = threading.Lock()
    try:
        bar = _progress(total=len(tiles), desc=f"kernel_blocked {P}×{P2}",
                        disable=True if not tiles else (None if progress is None else not progress))

        def tile(ij):                    # tiles write disjoint blocks: one task per tile (limits.parallel)
            i, j = ij
            one(slice(i, min(i + block, P)), slice(j, min(j + block, P2)), i == j)
            with lock:
                bar.update(1)
        if len(tiles) >= 4 * parallel.threads():
            parallel.map_blocks(tile, tiles)
        else:                            # few tiles: one at a time, each on the threads (rows, pairs)
            for ij in tiles:
                tile(ij)
        bar.close()
        return _finish(res)
    except BaseException:
        _discard(res)
        raise


def _put(res, I, J, blk, sym, diagonal, fill, symmetrise=False):
    """Write tile (I, J) of every kernel into its output (and its mirror, as ``fill`` asks)."""
    for g, (a, _, _) in res.items():
        v = blk[g]
        if symmetrise and sym and diagonal:
            v = 0.5 * (v + v.T)
        if fill != "lower":                               # (on the threads when tiles run one at a time)
            parallel.copyto(a[I, J], v)
        if sym and (fill == "lower" or (fill == "both" and not diagonal)):
            parallel.copyto(a[J, I], v.T)


def _aligned(a, align=64):
    """A C-contiguous copy of ``a`` starting on an ``align``-byte boundary: a tile's inputs then have the same
    alignment in this process and on a dask worker (whose deserialised arrays start anywhere), so BLAS's SIMD
    sums — and so the tile's bits — do not depend on where the tile was computed."""
    a = np.asarray(a)
    buf = np.empty(a.nbytes + align, dtype=np.uint8)
    off = (-buf.ctypes.data) % align
    out = buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def composition_tile(s, XI, XJ, get):
    """{name: tile} of the composition ``s`` on the inputs XI × XJ (XJ None: the symmetric kernel of XI, by the
    packed symmetric path), as :func:`limits.kernels.kernel` computes it (cost checked first), one BLAS thread,
    no progress bar of its own."""
    from ..blas import blas_threads
    from .composed import check_cost, kernel_once

    XI = _aligned(XI)
    XJ = None if XJ is None else _aligned(XJ)
    check_cost(s, XI.shape[1:], XI.shape[0], (XI if XJ is None else XJ).shape[0], get, XJ is None)
    with blas_threads(1):
        if XI.ndim > 2:
            from .packed import kernel as packed_kernel

            out, _ = packed_kernel(s, XI, XJ, get, progress=False)
            return out
        r = kernel_once(s, XI, XJ, get)
        return {g: getattr(r, g) for g in get}


def _composition_blocked(s, X, block, get, X2, dtype, out, fill, progress):
    """:func:`kernel_blocked` of a composition in this process: every tile (I, J), I ≤ J when symmetric, the
    cross kernel of the row blocks X_I × X_J (:func:`composition_tile`; diagonal tiles the symmetric kernel of
    X_I), written into the outputs; memory and time estimated first (:func:`limits.kernels.composed.check_cost`)."""
    from .composed import SerialKernelResult, check_cost, composition_inputs

    what = "limits.kernels.kernel_blocked"
    get = parse_get(get)
    X = composition_inputs(X, "X")
    sym = X2 is None
    X2 = X if sym else composition_inputs(X2, "X2")
    if X2.shape[1:] != X.shape[1:]:
        raise ValueError(f"X2 has shape {X2.shape[1:]} per input but X has {X.shape[1:]}")
    block, dtype = _options(block, dtype, fill, sym, progress)
    P, P2 = X.shape[0], X2.shape[0]
    block = min(block, max(P, P2))
    check_cost(s, X.shape[1:], P, P2, get, sym)
    res = _outputs(out, get, (P, P2), dtype)
    tiles = _tile_list(P, P2, block, sym)

    def one(I, J, diagonal):
        _put(res, I, J, composition_tile(s, X[I], None if sym and diagonal else X2[J], get), sym, diagonal, fill)

    arrays = _run_tiles(res, tiles, block, P, P2, progress, one)
    diag = {"source": what, "block": int(block), "tiles": len(tiles), "path": "packed" if X.ndim > 2 else "composed",
            "dtype": str(dtype), "fill": fill}
    return SerialKernelResult(arrays.get("nngp"), arrays.get("ntk"), s.to_dict(), diag, sym, X, None if sym else X2)


def compute_tile(model, X, a, b, block, kernels, targets):
    """One tile task of the tile store: tile (a, b) of every requested kernel (the symmetric tile when
    a = b, the cross tile otherwise), written atomically to its ``(path, header)`` targets with its digests
    (:func:`limits.kernels.tilestore.write_tiles`); returns the CPU seconds of the computing thread
    (``time.thread_time``: a dask worker's own event-loop threads are not the task's; the task runs in that one
    thread)."""
    with parallel.using(1):             # a task of a pool of workers: one thread (the pool is the parallel loop)
        return _compute_tile(model, X, a, b, block, kernels, targets)


def _compute_tile(model, X, a, b, block, kernels, targets):
    import time

    from ..blas import blas_threads
    from .tilestore import is_composition, write_tiles

    t0 = time.thread_time()
    P = X.shape[0]
    I = slice(a * block, min((a + 1) * block, P))
    J = slice(b * block, min((b + 1) * block, P))
    if is_composition(model):
        r = composition_tile(model, X[I], None if a == b else X[J], kernels)
        write_tiles(targets, [r[k] for k in kernels])
        return time.thread_time() - t0
    with blas_threads(1):
        r = kernel_blocked(model, X[I], get=kernels, progress=False, X2=None if a == b else X[J])
    write_tiles(targets, [getattr(r, k) for k in kernels])
    return time.thread_time() - t0


def kernel_diag(model, X, get=("nngp", "ntk")) -> dict:
    """Diagonal of the read-out kernels, {name: (P,) array}: K_out(x, x) and Θ_out(x, x) for every row of
    ``X`` in O(L·P) (the variance recursion and its read-out; the diagonal of :func:`kernel_blocked`
    to rounding). Non-finite entries (an overflowing kernel) raise ValueError."""
    what = "limits.kernels.kernel_diag"
    from ..layers import as_serial

    comp = as_serial(model)
    if comp is not None:
        return _composition_diag(comp, X, parse_get(get))
    m, get = _model(model, get, what)
    X = check_inputs(X, "X", m.d_in)
    eng = _Engine(m, get, 1)
    out = eng.diagonal(X)
    for g in get:
        if not np.all(np.isfinite(out[g])):
            raise ValueError(f"X: the {g.upper()} of this model overflows on these inputs (chaotic/deep regime)")
    return {g: out[g] for g in get}


def _composition_diag(s, X, get):
    """K(x, x), Θ(x, x) of a composition for every input: the packed path's self pass (each input with itself,
    the bits of a diagonal tile's diagonal)."""
    from ..blas import blas_threads
    from .composed import composition_inputs
    from .packed import pairs_per_chunk, reader, self_pass

    X = _aligned(composition_inputs(X, "X"))
    with blas_threads(1), np.errstate(over="ignore", invalid="ignore"):
        rest, _, start1, _, _ = reader(s, X, None, get)
        _, diag, _ = self_pass(rest, start1, X.shape[0], pairs_per_chunk(s, X.shape[1:]))
    for g in get:
        if not np.all(np.isfinite(diag[g])):
            raise ValueError(f"X: the {g.upper()} of this composition overflows on these inputs")
    return {g: diag[g] for g in get}


def _model(model, get, what):
    from ..model import ModelError, as_model

    m = as_model(model)
    get = parse_get(get)
    m.require(what, kernel_regime=True, block_layers_one=True, pre_activation=True)
    if "ntk" in get and m.param_name == "SP":
        raise ModelError(f"{what}: the NTK of a standard-parameterised (SP) network grows ∝ N at a fixed "
                         "learning rate; use parameterisation='NTK' or get=('nngp',)")
    return m, get


class _Engine:
    """Fused tiles when the activation has one and the variances are moderate, else the cross kernel."""

    def __init__(self, m, get, block):
        from .expectations import is_builtin_activation, activation_name

        self.m, self.get, self.block = m, get, block
        from .modelview import kernel_arguments

        self.kw = kw = kernel_arguments(m, "limits.kernels.kernel_blocked")
        self.act = kw["activation"]
        self.want_ntk = "ntk" in get
        self.name = activation_name(self.act)
        self.fusable = self.name in FUSED and is_builtin_activation(self.act)
        self.fused = self.fusable
        self.q_bad = -1
        self.c_in, self.b_in = kw["sigma_w2_in"] / m.d_in, kw["sigma_b2_in"]
        self._tile = _Tile(self.name, kw, block, self.want_ntk) if self.fusable else None
        self._owner, self._local = threading.current_thread(), threading.local()

    def variances(self, X, snap=None):
        Q, bad = _variances(self.kw, X, self.act)
        if bad >= 0:
            self.q_bad = bad if self.q_bad < 0 else min(self.q_bad, bad)
        if bad >= 0 or float(Q.max()) >= _MODERATE:
            self.fused = False
        if self.fusable and bad < 0:           # the fused path's own arithmetic (bitwise-consistent diagonal)
            Q = self._tile.variances(X, list(range(0, X.shape[0], self.block)), self.block, self.c_in, self.b_in,
                                     snap=snap)
        return Q

    def identical_rows(self, X, X2, sym):
        """Ids of identical inputs (:func:`limits.kernels._args.row_ids`; X2's ids are X's when ``sym``), also
        handed to the fused tiles, which snap their cross entries with them."""
        ids1, ids2 = row_ids(X, None if sym else X2)
        ids2 = ids1 if sym else ids2
        if self._tile is not None:
            self._tile.ids = (ids1, ids2)
        return ids1, ids2

    def _scratch(self):
        """The fused tile scratch of this thread (:mod:`limits.parallel` runs tiles concurrently)."""
        if threading.current_thread() is self._owner:
            return self._tile
        t = getattr(self._local, "tile", None)
        if t is None:
            t = self._local.tile = _Tile(self.name, self.kw, self.block, self.want_ntk)
            t.ids = self._tile.ids
        return t

    def tile(self, XI, XJ, QI, I, QJ, J):
        """({name: tile}, first layer where the tile's NTK overflowed or −1)."""
        if self.fused:
            tl = self._scratch()
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                Ko, To = tl.run(QI, QJ, XI, XJ, I, J, self.c_in, self.b_in)
            if tl.delicate is not None:                   # nearly collinear inputs, large norms: from the rows
                from . import halfangle

                watch, K0, q1, q2, ids = tl.delicate
                i, j = watch.pairs()
                arch = halfangle.arch_of(self.kw, self.kw["depth"])
                step = max(PATCH_PAIRS, -(-i.size // parallel.threads()))      # pairs are independent:
                parallel.map_blocks(lambda a: halfangle.patch_block(             # pieces on the threads
                    self.name, arch, XI, XJ, K0, q1, q2, Ko, To, ids=ids, pairs=(i[a:a + step], j[a:a + step])),
                    range(0, i.size, step))
            if To is None or (np.all(np.isfinite(To)) and np.max(np.abs(To)) <= _diag.LARGE):
                return {"nngp": Ko, "ntk": To}, -1
        with warnings.catch_warnings():        # NTK overflow (or no fused form): the cross kernel reports it
            warnings.simplefilter("ignore", _diag.KernelWarning)
            r = _cross(self.m, XI, XJ, self.get)
        at = r.diagnostics["ntk_exploded_at"] if self.want_ntk else -1
        return {"nngp": r.nngp, "ntk": r.ntk}, at

    def diagonal(self, X):
        from .. import gaussian

        Q = self.variances(X)
        kw = self.kw
        if self.q_bad >= 0:                    # the variances overflow: so does every read-out entry
            return {"nngp": np.full(X.shape[0], np.inf), "ntk": np.full(X.shape[0], np.inf)}
        if self.fused:
            tile = _Tile(self.name, kw, 1, self.want_ntk)
            views = [np.empty(X.shape[0]) for _ in range(7 if self.want_ntk else 5)]
            K = np.copy(Q[0])
            Ko, To = tile._layers(K, lambda l: Q[l], lambda l: Q[l], views)
            return {"nngp": Ko.copy(), "ntk": None if To is None else To.copy()}
        cw = kw["rho"] ** 2 * kw["sigma_w2"]
        T = Q[0].copy()                        # Θ^l_αα = [Θ^{l−1}_αα] + C^l_αα + ρ²σ_w² E[φ'²] Θ^{l−1}_αα
        with np.errstate(over="ignore", invalid="ignore"):
            for l in range(1, kw["depth"] + 1):
                q = Q[l - 1]
                G = np.asarray(gaussian.dkernel(self.act, q, q, q)) if self.want_ntk else None
                if G is not None:
                    T = (T if kw["residual"] else 0.0) + (Q[l] - (q if kw["residual"] else 0.0)) + cw * G * T
            q = Q[-1]
            Ko = kw["sigma_w2_out"] * np.asarray(gaussian.kernel(self.act, q, q, q)) + kw["sigma_b2_out"]
            To = Ko + kw["sigma_w2_out"] * np.asarray(gaussian.dkernel(self.act, q, q, q)) * T if self.want_ntk else None
        return {"nngp": Ko, "ntk": To}


def _cross(m, X1, X2, get):
    from .cross import kernel

    return kernel(m, X1, X2, get)
