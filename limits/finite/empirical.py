"""Empirical kernels of finite networks at initialisation, Monte Carlo over many inits, streamed.

Per init s and layer l the Gram ``K^l_s = h^l (h^l)ᵀ / N`` (P×P, samples are rows); callers average
over inits (``.mean``, ``.se``) or look at single-network fluctuations (``.K`` per init).

Two exact samplers of the finite-width forward pass at initialisation:

* ``method="dense"``: draw every N×N weight matrix and multiply (batched matmul). Memory-bound for
  small P and dominated by drawing N² normals per layer per init.
* ``method="conditional"``: each weight matrix is used exactly once in a forward pass at init, so
  given the layer input ``a`` (P × fan_in), ``u = m a Wᵀ`` has i.i.d. rows
  ``u_{·i} ~ N(0, m² σ² a aᵀ)`` (Gaussian conditioning). We draw ``u = m σ R Z`` with
  ``R Rᵀ = a aᵀ`` (Cholesky; eigen-factor when singular, e.g. P > N) and Z ~ N(0, I) of shape
  P × fan_out. Same joint law of all (h⁰,…,h^L, f) as the dense sampler, at O(P²N) per layer
  instead of O(PN²) and N·P instead of N² random numbers.

``method="auto"`` (the default) picks the cheaper of the two by an explicit cost model
(:func:`sampler_costs`): per init and weight layer (fan_in a, fan_out b, P inputs), in nanoseconds
on one core,

    conditional ≈ c_z P b + c_f (2P²a + 2P²b) + c_chol P³ + 1 µs   (+ c_eig P³ + 5 µs when P > a: the
                  Gram of rank ≤ a is singular and each init falls back to an eigendecomposition)
    dense       ≈ c_z a b + c_f 2P a b

with c_z = 14 ns per standard normal, c_f = 0.03 ns per BLAS flop (≈ 33 GFLOP/s), c_chol = 0.12 ns and
c_eig = 1.3 ns per P³ of a small batched factorisation (measured with one BLAS thread; the read-in of
shared inputs is factored once for all inits). Element-wise φ and the recorded Grams cost the same in
both and are left out. The two samplers draw the same joint law, so the choice changes the random
numbers of a seed, never the distribution; ``method="conditional"`` / ``"dense"`` overrides it.
benchmarks/bench_finite.py checks the choice over a grid of (width, P).

Both samplers give init s its own random stream, so chunking never changes the numbers.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import parallel
from ._blas import limit_blas, quiet_overflow
from ..checks import positive_float, positive_int
from ..results import Result
from .forward import Phi, check_inputs
from .weights import draw_layer, root_seed, streams_from_root


@dataclass(frozen=True)
class EmpiricalKernels(Result):
    """``K`` (S, B+1, P, P): stream Grams ``h^l h^lᵀ/N`` per init (None if ``keep_samples=False``);
    ``K_out`` (S, P, P): read-out Gram ``f fᵀ/d_out``; ``K_phi`` (S, B+1, P, P): ``φ(h^l)φ(h^l)ᵀ/N``
    (if requested); ``mean``/``se`` (B+1, P, P) and ``out_mean``/``out_se`` over inits. A standard
    error needs ≥ 2 inits: with ``n_inits = 1`` ``se`` and ``out_se`` are None (unavailable), never NaN."""

    mean: np.ndarray
    se: np.ndarray | None
    out_mean: np.ndarray
    out_se: np.ndarray | None
    K: np.ndarray | None
    K_out: np.ndarray | None
    K_phi: np.ndarray | None
    n_inits: int
    width: int
    method: str
    seconds: float
    flops: float
    chunk: int
    overflow: bool = False

    @property
    def gflops(self) -> float:
        return self.flops / max(self.seconds, 1e-12) / 1e9


def _sqrt_factor(G):
    """R with R Rᵀ = G for a batch of PSD matrices: Cholesky, per-matrix eigen fallback."""
    try:
        return np.linalg.cholesky(G)
    except np.linalg.LinAlgError:
        out = np.empty_like(G)
        for s in range(G.shape[0]):
            try:
                out[s] = np.linalg.cholesky(G[s])
            except np.linalg.LinAlgError:
                lam, V = np.linalg.eigh(0.5 * (G[s] + G[s].T))
                out[s] = V * np.sqrt(np.clip(lam, 0.0, None))
        return out


def _normals_per_init(net, P):
    """Layout of the normals one init consumes in the conditional sampler: [(P·fan_out, bias?)…]."""
    return [(P * d.fan_out, d.fan_out if d.bias else 0) for d in net.layers().values()]


def _draw_normals(streams, total):
    """One call per init from substream (init, 0), consumed in a fixed order → chunk invariance."""
    Z = np.empty((len(streams), total))
    for k in range(len(streams)):
        streams.gen(k, 0).standard_normal(total, out=Z[k])
    return Z


def _conditional_layer(dense, a, Z, bias, shared_input=False):
    """Exact draw of ``m a Wᵀ + b`` for fresh W ~ N(0, std²): (S, P, fan_out) and flop count.
    ``Z`` (S, P, fan_out) and ``bias`` (S, fan_out) are the standard normals to use."""
    S, P, fo = Z.shape
    if shared_input:
        G = a[0] @ a[0].T
        R = _sqrt_factor(G[None])[0]
        u = np.matmul(R, Z)
        flops = 2.0 * P * P * a.shape[-1] + P**3 / 3 + 2.0 * S * P * P * fo
    else:
        G = np.matmul(a, a.transpose(0, 2, 1))
        R = _sqrt_factor(G)
        u = np.matmul(R, Z)
        flops = S * (2.0 * P * P * a.shape[-1] + P**3 / 3 + 2.0 * P * P * fo)
    c = dense.mult * dense.std
    if c != 1.0:
        u *= c
    if bias is not None:
        u += dense.bias_mult * dense.bias_std * bias[:, None, :]
    return u, flops


def _dense_layer(dense, a, streams, j):
    W, b, _ = draw_layer(streams, j, dense)
    u = np.matmul(a, W.transpose(0, 2, 1))
    if dense.mult != 1.0:
        u *= dense.mult
    if b is not None:
        u += dense.bias_mult * b[:, None, :]
    flops = 2.0 * len(streams) * a.shape[-2] * dense.fan_in * dense.fan_out
    return u, flops


def _gram(h):
    return np.matmul(h, h.transpose(0, 2, 1)) / h.shape[-1]


def _chunk_forward(net, X, streams, method, want_phi):
    """Stream the forward pass of one chunk of inits; return Grams (S,B+1,P,P), (S,P,P), flops."""
    P_ = Phi(net)
    S, P = len(streams), X.shape[0]
    nB = net.n_blocks
    K = np.empty((S, nB + 1, P, P))
    Kphi = np.empty((S, nB + 1, P, P)) if want_phi else None
    flops = 0.0
    if method == "conditional":
        layout = _normals_per_init(net, P)
        Zall = _draw_normals(streams, sum(n + nb for n, nb in layout))
        offsets = iter(np.cumsum([0] + [n + nb for n, nb in layout])[:-1])

    jcount = iter(range(10**9))

    def layer(d, a, shared=False):
        nonlocal flops
        j = next(jcount)
        if method == "dense":
            u, fl = _dense_layer(d, a, streams, j)
        else:
            off = int(next(offsets))
            Z = Zall[:, off:off + P * d.fan_out].reshape(S, P, d.fan_out)
            bias = Zall[:, off + P * d.fan_out: off + P * d.fan_out + d.fan_out] if d.bias else None
            u, fl = _conditional_layer(d, a, Z, bias, shared_input=shared)
        flops += fl
        return u

    x = X[None]
    u = layer(net.readin, x, shared=True)
    if u.shape[0] != S:
        u = np.broadcast_to(u, (S,) + u.shape[1:]).copy()
    h = P_.phi(u) if net.readin_phi else u

    def record(l, h, a=None):
        nonlocal flops
        K[:, l] = _gram(h)
        flops += 2.0 * S * P * P * h.shape[-1]
        if Kphi is not None:
            a = P_.phi(h) if a is None else a
            Kphi[:, l] = _gram(a)

    phi_h = None if net.post_activation else P_.phi(h)
    record(0, h, phi_h)
    for i, blk in enumerate(net.blocks, 1):
        a = h if net.post_activation else phi_h
        nL = len(blk.layers)
        for k, d in enumerate(blk.layers, 1):
            u = layer(d, a)
            if k < nL:
                a = P_.phi(u)
        if blk.branch != 1.0:
            u *= blk.branch
        z = h + u if blk.residual else u
        h = P_.phi(z) if net.post_activation else z
        phi_h = None if net.post_activation else P_.phi(h)
        record(i, h, phi_h)
    a = (phi_h if phi_h is not None else P_.phi(h)) if net.readout_phi else h
    out = layer(net.readout, a) * net.out_scale
    Kout = np.matmul(out, out.transpose(0, 2, 1)) / out.shape[-1]
    return K, Kout, Kphi, flops


# cost-model constants (module docstring), ns: per standard normal, per BLAS flop, per P³ of a small batched
# Cholesky / eigendecomposition, fixed per-matrix overheads
_C_NORMAL, _C_FLOP, _C_CHOL, _C_EIG, _C_CHOL0, _C_EIG0 = 14.0, 0.03, 0.12, 1.3, 1e3, 5e3


def sampler_costs(net, P, n_inits=1) -> dict:
    """Estimated seconds of ``empirical_kernels(net, X, n_inits)`` per sampler, {"conditional": …, "dense": …},
    from the cost model of the module docstring (weight-layer work only: normals, BLAS flops, factorisations)."""
    P = float(P)
    S = float(max(int(n_inits), 1))
    cond = dense = 0.0
    for name, d in net.layers().items():
        a, b = float(d.fan_in), float(d.fan_out)
        fac = _C_CHOL * P**3 + _C_CHOL0 + ((_C_EIG * P**3 + _C_EIG0) if P > a else 0.0)
        shared = name == "in"                     # the read-in sees the same X in every init: one factorisation
        cond += S * (_C_NORMAL * P * b + _C_FLOP * 2 * P * P * b) + (1.0 if shared else S) * (
            _C_FLOP * 2 * P * P * a + fac)
        dense += S * (_C_NORMAL * a * b + _C_FLOP * 2 * P * a * b)
    return {"conditional": cond * 1e-9, "dense": dense * 1e-9}


def choose_method(net, P, n_inits=1) -> str:
    """The sampler ``method="auto"`` runs: the cheaper one under :func:`sampler_costs`."""
    c = sampler_costs(net, P, n_inits)
    return "conditional" if c["conditional"] <= c["dense"] else "dense"


def _auto_chunk(net, P, method, memory_mb):
    N = max([net.width] + [d.fan_out for b in net.blocks for d in b.layers])
    per_init = 8.0 * (8 * P * N + 2 * (net.n_blocks + 2) * P * P)
    if method == "dense":
        per_init += 8.0 * 2 * N * N
    else:
        per_init += 8.0 * sum(n + nb for n, nb in _normals_per_init(net, P))
    return max(1, int(memory_mb * 2**20 // per_init))


@limit_blas
@quiet_overflow
def empirical_kernels(net, X, n_inits, rng=None, seed=None, method="auto", chunk=None, memory_mb=512,
                      keep_samples=True, phi_kernels=False, progress_bar=False, workers=None, *,
                      n_jobs=None) -> EmpiricalKernels:
    """Monte Carlo of the per-layer empirical kernels of ``net`` over ``n_inits`` initialisations.

    ``method``: "auto" (the cheaper sampler by the cost model, :func:`choose_method`), "conditional" or
    "dense" (module docstring; ``.method`` of the result says which ran).
    ``chunk``: inits per batch (default from ``memory_mb``). ``keep_samples``: keep the per-init
    Grams (needed for single-network fluctuations); otherwise only mean and SE are kept.
    ``n_jobs``: threads processing chunks of inits concurrently (:mod:`limits.parallel`; None:
    ``$LIMITS_NUM_THREADS``, else every core; numpy releases the GIL for the random fills, φ and the products;
    the memory budget is shared). Every init has its own stream and the sums over inits are taken init by init
    in order, so the numbers are the same for any ``n_jobs`` and ``chunk``. ``workers``: the former name of
    ``n_jobs`` (used when ``n_jobs`` is not given).
    """
    if n_jobs is None and workers is not None:
        n_jobs = positive_int(workers, "workers")
    with parallel.using(n_jobs):
        return _empirical(net, X, n_inits, rng, seed, method, chunk, memory_mb, keep_samples, phi_kernels,
                          progress_bar)


def _empirical(net, X, n_inits, rng, seed, method, chunk, memory_mb, keep_samples, phi_kernels, progress_bar):
    """:func:`empirical_kernels`' body, in its thread context."""
    X = check_inputs(net, X)
    n_inits = positive_int(n_inits, "n_inits")
    if method == "auto":
        method = choose_method(net, X.shape[0], n_inits)
    if method not in ("conditional", "dense"):
        raise ValueError(f"method must be 'auto', 'conditional' or 'dense', got {method!r}")
    root = root_seed(rng, seed)
    P = X.shape[0]
    nB = net.n_blocks
    workers = parallel.threads()
    memory_mb = positive_float(memory_mb, "memory_mb")
    if chunk is None:
        chunk = _auto_chunk(net, P, method, memory_mb / workers)
        if workers > 1:                 # a few chunks per thread (the chunking changes no number)
            chunk = min(chunk, -(-n_inits // (2 * workers)))
    chunk = min(positive_int(chunk, "chunk"), n_inits)
    if keep_samples and 8.0 * n_inits * (nB + 2) * P * P * (2 if phi_kernels else 1) > 4 * 2**30:
        raise ValueError("keep_samples: per-init Grams would exceed 4 GB; pass keep_samples=False")
    Ks, Kouts, Kphis = [], [], []
    s1 = np.zeros((nB + 1, P, P)); s2 = np.zeros_like(s1)
    o1 = np.zeros((P, P)); o2 = np.zeros_like(o1)
    shift = shift_o = None
    flops = 0.0
    t0 = time.perf_counter()
    starts = range(0, n_inits, chunk)

    def work(st):                       # overflow is detected and flagged below (EmpiricalKernels.overflow)
        with np.errstate(over="ignore", invalid="ignore"):
            return _chunk_forward(net, X, streams_from_root(root, range(st, min(st + chunk, n_inits))), method,
                                  phi_kernels)

    results = parallel.imap_blocks(work, starts)
    if progress_bar:
        from ..progress import progress

        results = progress(results, total=len(starts), desc="kernels")
    for K, Kout, Kphi, fl in results:
        flops += fl
        if shift is None:
            shift, shift_o = K[0].copy(), Kout[0].copy()
        _accumulate(K, Kout, shift, shift_o, (s1, s2, o1, o2))
        if keep_samples:
            Ks.append(K); Kouts.append(Kout)
            if Kphi is not None:
                Kphis.append(Kphi)
    secs = time.perf_counter() - t0
    n = n_inits
    mean, se, fin = _mean_se(shift, s1, s2, n)
    mean_o, se_o, fin_o = _mean_se(shift_o[None], o1[None], o2[None], n)
    mean_o, se_o = mean_o[0], (None if se_o is None else se_o[0])
    overflow = not (fin and fin_o)
    if overflow:
        import warnings

        warnings.warn("empirical_kernels: activations overflowed (inf/NaN in the kernels) — the network "
                      "explodes at these parameters; see EmpiricalKernels.overflow", RuntimeWarning, stacklevel=4)
    return EmpiricalKernels(mean, se, mean_o, se_o,
                            np.concatenate(Ks) if keep_samples else None,
                            np.concatenate(Kouts) if keep_samples else None,
                            np.concatenate(Kphis) if (keep_samples and phi_kernels) else None,
                            n, net.width, method, secs, flops, chunk, overflow)


def _mean_se(shift, s1, s2, n):
    """(mean, standard error — None for one init —, all means finite) from the shifted sums (L, P, P), row block
    by row block on the threads (element-wise: the same numbers for any split)."""
    mean = np.empty_like(s1)
    se = np.empty_like(s1) if n > 1 else None       # one init: the SE is undefined → reported as unavailable
    P = s1.shape[1]
    step = max(1, -(-P // (4 * parallel.threads())))
    starts = list(range(0, P, step))

    def part(group):
        ok = True
        for a in (starts[g] for g in group):
            r = slice(a, a + step)
            mean[:, r] = shift[:, r] + s1[:, r] / n
            ok = ok and bool(np.all(np.isfinite(mean[:, r])))
            if se is not None:
                var = np.clip((s2[:, r] - s1[:, r] * s1[:, r] / n) / (n - 1), 0, None)
                se[:, r] = np.sqrt(var / n)
        return ok
    sizes = [min(step, P - a) * s1.shape[0] * s1.shape[2] for a in starts]
    fin = parallel.map_blocks(part, parallel.split(sizes, parallel.threads(), parallel.MIN_COPIES))
    return mean, se, all(fin)


def _accumulate(K, Kout, shift, shift_o, sums):
    """s1 += Σ_k (K_k − shift), s2 += Σ_k (K_k − shift)² (and the read-out's), init by init in order — so the sums
    do not depend on the chunks — with the rows of the Grams shared out over the threads (:mod:`limits.parallel`)."""
    s1, s2, o1, o2 = sums
    P = shift.shape[-1]
    step = max(1, -(-P // (4 * parallel.threads())))
    starts = list(range(0, P, step))

    def part(group):
        for a in (starts[g] for g in group):
            r = slice(a, a + step)
            for k in range(K.shape[0]):
                d = K[k, :, r] - shift[:, r]
                s1[:, r] += d
                d *= d
                s2[:, r] += d
                do = Kout[k, r] - shift_o[r]
                o1[r] += do
                do *= do
                o2[r] += do
    sizes = [min(step, P - a) * P * (K.shape[1] + 1) * K.shape[0] for a in starts]
    parallel.map_blocks(part, parallel.split(sizes, parallel.threads(), parallel.MIN_COPIES))


def kernels_of(fwd) -> np.ndarray:
    """Per-init stream Grams (S, B+1, P, P) of an explicit :class:`Forward` (e.g. after training)."""
    return np.stack([_gram(h) for h in fwd.h], axis=1)
