"""Does a compiled loop earn its place for the closed-form layers? (issue 27 item 3)

Adoption rule (the issue's): numba becomes a core dependency only if a compiled loop makes *every*
closed-form kernel ≥ 3× faster than the plain numpy recursion and keeps the results within 1e-14 of the
current ones. Measured here, in ONE run, for relu (arccos kernel), erf (arcsin kernel) and gelu (closed form
with one arctan, limits.activations.gelu_kernel), MLP depth L = 10, NNGP + NTK, P = 1000 and P = 3000
(``--quick``: 300, 600), from the same read-in Gram K⁰:

(a) ``limits.kernels.nngp(..., keep="last")`` — the current code (packed, fused numpy strips,
    limits/kernels/_fused.py);
(b) the plain vectorised numpy recursion of ``benchmarks/_plain_kernels.py`` (full P×P matrices; it returns
    K_out, Θ_out and layer L's K, Θ, and so do (c) and (d));
(c) a numba ``@njit`` loop over the packed upper triangle (row-major, every layer in place, the read-out and
    the unpacking to full P×P matrices inside the compiled function): ``parallel=False`` (one thread),
    ``fastmath=False`` (no reassociation, no approximate libm: the 1e-14 rule), ``error_model="numpy"``
    (no ZeroDivisionError branch). Per entry it evaluates exactly the expressions of limits/kernels/_fused.py
    (erf: arcsin of s = 2k12/√((1+2k11)(1+2k22)); relu: φ = π − θ from the half-angle arctangent; gelu:
    atan(k12/√D)), each transcendental by the scalar libm call LLVM emits (``math.asin``/``math.atan``).
    One freshly compiled dispatcher per row, so its first call includes the compilation;
(d) the same numba loop split around the transcendental: per block of ≤ 16384 packed entries a compiled
    pass writes the arguments, numpy's ufunc (``np.arcsin``/``np.arctan`` — SIMD on CPUs numpy dispatches
    SIMD loops for) evaluates them, a second compiled pass finishes the moments and the layer update.

Times: CPU (``time.process_time``), the four calls interleaved (a, b, c, d, a, b, …), best of 5 steady state,
and the first call (for (c)/(d): the compilation included). One BLAS thread (``limits.blas``); numba runs one
thread (``parallel=False``; ``NUMBA_NUM_THREADS`` is not used). Accuracy: max |Δ| / max |ref| of K_out,
Θ_out, K^L and Θ^L against (a) (as benchmarks/bench_kernels.py), and the largest entrywise |Δ|/|ref| too.
Floors: the one transcendental per packed entry alone, at the first layer's arguments, for the L + 1
evaluations — numpy's ufunc in 16384-entry segments (the floor of (a), (b), (d)) and the scalar libm call in
a compiled loop (the floor of (c)).

Cold start (:func:`cold_start`, the P = 1000 rows): (d) in two fresh interpreters sharing a new, empty
numba on-disk cache (``cache=True``) — CPU of ``import numba`` and of the first call, compiling (cache empty)
and loading (cache warm).

Runs in any interpreter: without numba, the rows say "skipped" for (c) and (d) and the script exits 0.
numba is not a dependency of ``limits``; to measure with it, use a separate environment::

    python -m venv --system-site-packages /path/to/venv-numba && /path/to/venv-numba/bin/pip install numba
    PYTHONPATH=. /path/to/venv-numba/bin/python benchmarks/run.py numba --json benchmarks/results/numba.json
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _plain_kernels import plain_nngp  # noqa: E402
from _timing import cpu_wall, cpu_wall_interleaved  # noqa: E402

try:                                   # optional: never a dependency of limits
    import numba
    from numba import njit
except ImportError:                    # pragma: no cover - depends on the interpreter
    numba = njit = None

SEG = 16384                             # entries per segment for the numpy ufunc (as limits.kernels._fused.BLOCK)
ADOPT = 3.0                             # the bar: ≥ 3× the plain numpy recursion on every kernel
AGREE = 1e-14                           # … and within 1e-14 of the current results
KINDS = {"erf": 0, "relu": 1, "gelu": 2}
_TWO_OVER_PI = 2.0 / math.pi
_FOUR_OVER_PI = 4.0 / math.pi
_TWO_PI = 2.0 * math.pi
_HALF_PI = 0.5 * math.pi


# --------------------------------------------------------------------------- the compiled loops
def _entry_source():
    """Per-entry closed forms, transcribed from limits/kernels/_fused.py (same operations, same order), as a
    function of (kind, k12, k11, k22, the per-row/column helpers, scale); returns (scale·E, scale·G).
    Built inside a factory so that each row compiles its own dispatcher (first call = compile)."""

    def build(kind):
        @njit(fastmath=False, error_model="numpy", cache=False, inline="always")
        def entry(k, a, b, ia, ib, diag, dEi, dGi, cw):
            if kind == 0:
                # erf: W = 2 inv_α inv_β, S = clip(k W), E = (2/π) asin S, G = (2/π) W / √((1 − S)(1 + S))
                if diag:
                    return dEi * cw, dGi * cw
                W = 2.0 * ia * ib
                S = k * W
                if S > 1.0:
                    S = 1.0
                elif S < -1.0:
                    S = -1.0
                G = W / math.sqrt((1.0 - S) * (1.0 + S)) * (_TWO_OVER_PI * cw)
                E = math.asin(S) * (_TWO_OVER_PI * cw)
                return E, G
            if kind == 1:
                # relu: half-angle t = √det/(g + |k12|), φ = π/2 + copysign(π/2, k) − copysign(2 atan t, k)
                g = math.sqrt(a * b)
                t1 = min(abs(k), g)
                t3 = g + t1
                t2 = math.sqrt((g - t1) * t3)
                t = t2 / t3 if t3 > 0.0 else 0.0
                th = 2.0 * math.atan(t)
                phi = (math.copysign(_HALF_PI, k) + _HALF_PI) - math.copysign(th, k)
                E = (math.copysign(t1, k) * phi + t2) * (cw / _TWO_PI)
                G = phi * (cw / _TWO_PI)
                return E, G
            # gelu: D = 1 + k11 + k22 + det, B4 = 1/(2π√D), B1 = 1/4 + atan(k12/√D)/(2π)
            g = math.sqrt(a * b)
            c = min(abs(k), g)
            det = (g - c) * (c + g)
            D = ((1.0 + a) + b) + det
            invD = 1.0 / D
            sD = math.sqrt(D)
            B4 = 1.0 / (sD * _TWO_PI)
            E = a * B4 * (b + det) / (1.0 + a)
            B1 = math.atan(k / sD) / _TWO_PI + 0.25
            E += k * B1
            E += k * k * B4 / (1.0 + b)
            G = k * B4 * ((ia + ib) + invD) + B1
            return E * cw, G * cw

        return entry

    return build


def _row_helpers(kind, d):
    """Per-row vectors (as limits.kernels._fused.prepare): erf inv = 1/√(1+2k), diagonal E and G;
    gelu 1/(1 + k); relu none."""
    P = d.shape[0]
    ia = np.zeros(P)
    dE = np.zeros(P)
    dG = np.zeros(P)
    if kind == 0:
        for i in range(P):
            ia[i] = 1.0 / math.sqrt(1.0 + 2.0 * d[i])
            r = math.sqrt(1.0 + 4.0 * d[i])
            dE[i] = _TWO_OVER_PI * math.atan2(2.0 * d[i], r)
            dG[i] = _FOUR_OVER_PI / r
    elif kind == 2:
        for i in range(P):
            ia[i] = 1.0 / (1.0 + d[i])
    return ia, dE, dG


def make_numba(act):
    """(c): the whole recursion (pack, L layers, read-out, unpack) as one compiled function
    f(K0, depth, c_w, c_b, residual, σ²_w,out, σ²_b,out) -> (K_out, Θ_out, K^L, Θ^L), full P×P matrices (what the
    plain recursion returns); a new dispatcher per call."""
    kind = KINDS[act]
    entry = _entry_source()(kind)
    helpers = njit(fastmath=False, error_model="numpy", cache=False)(_row_helpers)
    unpack2 = njit(cache=False)(_unpack2)

    @njit(fastmath=False, error_model="numpy", cache=False)
    def recursion(K0, depth, c_w, c_b, residual, sw_out, sb_out):
        P = K0.shape[0]
        n = P * (P + 1) // 2
        K = np.empty(n)
        T = np.empty(n)
        d = np.empty(P)
        p = 0
        for i in range(P):                       # pack the upper triangle row by row
            for j in range(i, P):
                K[p] = K0[i, j]
                T[p] = K0[i, j]
                p += 1
        KL = np.empty((P, P))
        TL = np.empty((P, P))
        for l in range(depth + 1):
            last = l == depth
            cw = sw_out if last else c_w
            cb = sb_out if last else c_b
            if last:                             # layer L in full (as the plain recursion returns it)
                unpack2(K, T, KL, TL)
            p = 0
            for i in range(P):                   # the diagonal before the layer overwrites it
                d[i] = K[p]
                p += P - i
            ia, dE, dG = helpers(kind, d)
            p = 0
            for i in range(P):
                a = d[i]
                for j in range(i, P):
                    k = K[p]
                    E, G = entry(k, a, d[j], ia[i], ia[j], j == i, dE[i], dG[i], cw)
                    C = E + cb
                    t = T[p]
                    if last:                     # read-out: K_out = σ²E + σ_b², Θ_out = σ²G Θ^L + K_out
                        K[p] = C
                        T[p] = G * t + C
                    elif residual:
                        K[p] = k + C
                        T[p] = G * t + C + t
                    else:
                        K[p] = C
                        T[p] = G * t + C
                    p += 1
        Ko = np.empty((P, P))
        To = np.empty((P, P))
        unpack2(K, T, Ko, To)
        return Ko, To, KL, TL

    return recursion


def _unpack2(K, T, Ko, To):
    """Both packed triangles K, T into the full symmetric matrices Ko, To (compiled by the factories)."""
    P = Ko.shape[0]
    p = 0
    for i in range(P):
        for j in range(i, P):
            Ko[i, j] = K[p]
            Ko[j, i] = K[p]
            To[i, j] = T[p]
            To[j, i] = T[p]
            p += 1


def make_split(act, cache=False):
    """(d): the compiled loop with numpy's ufunc for the transcendental, per block of rows
    (≤ SEG packed entries, or one row): pass 1 writes the arguments, the ufunc evaluates them, pass 2 finishes
    E, G and the layer update (same expressions as (c)). ``cache``: numba's on-disk cache (:func:`cold_start`)."""
    kind = KINDS[act]
    ufunc = np.arcsin if kind == 0 else np.arctan
    helpers = njit(fastmath=False, error_model="numpy", cache=cache)(_row_helpers)

    @njit(fastmath=False, error_model="numpy", cache=cache)
    def args(K, d, ia, P, a0, a1, p0, buf):
        p = p0
        q = 0
        for i in range(a0, a1):
            for j in range(i, P):
                k = K[p]
                if kind == 0:
                    S = k * (2.0 * ia[i] * ia[j])
                    buf[q] = 1.0 if S > 1.0 else (-1.0 if S < -1.0 else S)
                elif kind == 1:
                    g = math.sqrt(d[i] * d[j])
                    t1 = min(abs(k), g)
                    t3 = g + t1
                    buf[q] = math.sqrt((g - t1) * t3) / t3 if t3 > 0.0 else 0.0
                else:
                    g = math.sqrt(d[i] * d[j])
                    c = min(abs(k), g)
                    buf[q] = k / math.sqrt(((1.0 + d[i]) + d[j]) + (g - c) * (c + g))
                p += 1
                q += 1

    @njit(fastmath=False, error_model="numpy", cache=cache)
    def finish(K, T, d, ia, dE, dG, P, a0, a1, p0, tr, cw, cb, last, residual):
        p = p0
        q = 0
        for i in range(a0, a1):
            a = d[i]
            for j in range(i, P):
                k = K[p]
                b = d[j]
                f = tr[q]                        # asin S (erf) or atan of the argument (relu, gelu)
                if kind == 0:
                    if j == i:
                        E = dE[i] * cw
                        G = dG[i] * cw
                    else:
                        W = 2.0 * ia[i] * ia[j]
                        S = k * W
                        S = 1.0 if S > 1.0 else (-1.0 if S < -1.0 else S)
                        G = W / math.sqrt((1.0 - S) * (1.0 + S)) * (_TWO_OVER_PI * cw)
                        E = f * (_TWO_OVER_PI * cw)
                elif kind == 1:
                    g = math.sqrt(a * b)
                    t1 = min(abs(k), g)
                    t3 = g + t1
                    t2 = math.sqrt((g - t1) * t3)
                    phi = (math.copysign(_HALF_PI, k) + _HALF_PI) - math.copysign(2.0 * f, k)
                    E = (math.copysign(t1, k) * phi + t2) * (cw / _TWO_PI)
                    G = phi * (cw / _TWO_PI)
                else:
                    g = math.sqrt(a * b)
                    c = min(abs(k), g)
                    det = (g - c) * (c + g)
                    D = ((1.0 + a) + b) + det
                    sD = math.sqrt(D)
                    B4 = 1.0 / (sD * _TWO_PI)
                    E = a * B4 * (b + det) / (1.0 + a)
                    B1 = f / _TWO_PI + 0.25
                    E += k * B1
                    E += k * k * B4 / (1.0 + b)
                    G = k * B4 * ((ia[i] + ia[j]) + 1.0 / D) + B1
                    E *= cw
                    G *= cw
                C = E + cb
                t = T[p]
                if last:
                    K[p] = C
                    T[p] = G * t + C
                elif residual:
                    K[p] = k + C
                    T[p] = G * t + C + t
                else:
                    K[p] = C
                    T[p] = G * t + C
                p += 1
                q += 1

    @njit(cache=cache)
    def pack(K0):
        P = K0.shape[0]
        out = np.empty(P * (P + 1) // 2)
        p = 0
        for i in range(P):
            for j in range(i, P):
                out[p] = K0[i, j]
                p += 1
        return out

    unpack2 = njit(cache=cache)(_unpack2)

    def recursion(K0, depth, c_w, c_b, residual, sw_out, sb_out):
        P = K0.shape[0]
        K = pack(K0)
        T = K.copy()
        off = np.concatenate(([0], np.cumsum(np.arange(P, 0, -1))))   # first packed entry of each row
        blocks, a = [], 0
        while a < P:                             # rows [a, b) with ≤ SEG entries (at least one row)
            b = a + 1
            while b < P and off[b + 1] - off[a] <= SEG:
                b += 1
            blocks.append((a, b, int(off[a]), int(off[b] - off[a])))
            a = b
        buf = np.empty(max(m for *_, m in blocks))
        KL, TL = np.empty((P, P)), np.empty((P, P))
        for l in range(depth + 1):
            last = l == depth
            cw, cb = (sw_out, sb_out) if last else (c_w, c_b)
            if last:
                unpack2(K, T, KL, TL)            # layer L in full (as the plain recursion returns it)
            d = K[off[:-1]]
            ia, dE, dG = helpers(kind, d)
            for a, b, p0, m in blocks:
                args(K, d, ia, P, a, b, p0, buf)
                ufunc(buf[:m], out=buf[:m])
                finish(K, T, d, ia, dE, dG, P, a, b, p0, buf, cw, cb, last, residual)
        Ko, To = np.empty((P, P)), np.empty((P, P))
        unpack2(K, T, Ko, To)
        return Ko, To, KL, TL

    return recursion


# --------------------------------------------------------------------------- floors
def _arguments(act, K):
    """The one transcendental each packed entry of layer 1 needs and its arguments (upper triangle): the
    kernels benchmark's floor (bench_kernels._arguments)."""
    from bench_kernels import _arguments as args

    return args(act, K)


def floors(act, K0, depth):
    """CPU seconds of the transcendental alone for the L + 1 evaluations on every packed entry: (numpy ufunc in
    SEG-entry segments, scalar libm in a compiled loop or None without numba) — best of 3."""
    f, x = _arguments(act, K0)
    out = np.empty(SEG)

    def numpy_floor():
        for _ in range(depth + 1):
            for lo in range(0, x.size, SEG):
                seg = x[lo:lo + SEG]
                f(seg, out=out[:seg.size])

    t_np = cpu_wall(numpy_floor, repeat=3)[0]["cpu"]
    if njit is None:
        return t_np, None
    is_asin = f is np.arcsin

    @njit(fastmath=False, error_model="numpy", cache=False)
    def libm_floor(x, reps, out):
        s = 0.0
        for _ in range(reps):
            for i in range(x.size):
                out[i] = math.asin(x[i]) if is_asin else math.atan(x[i])
            s += out[0]
        return s

    full = np.empty(x.size)
    libm_floor(x, 1, full)                     # compile outside the timing
    t_libm = cpu_wall(lambda: libm_floor(x, depth + 1, full), repeat=3)[0]["cpu"]
    return t_np, t_libm


# --------------------------------------------------------------------------- the workloads
def _inputs(P, d=20, seed=0):
    X = np.random.default_rng(seed).standard_normal((P, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * np.sqrt(d)


def _reldiff(a, b):
    """max |a − b| / max |b| (benchmarks/bench_kernels.py's measure)."""
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _entrywise(a, b):
    """max over entries of |a − b| / |b| (entries with b = 0: |a − b|)."""
    a, b = np.asarray(a), np.asarray(b)
    den = np.where(b == 0.0, 1.0, np.abs(b))
    return float(np.max(np.abs(a - b) / den))


def cases(quick):
    Ps = (300, 600) if quick else (1000, 3000)
    return [{"name": f"{act} MLP NNGP+NTK, P={P}, L=10", "act": act, "P": P, "depth": 10, "sw2": sw2, "sb2": 0.05}
            for P in Ps for act, sw2 in (("relu", 2.0), ("erf", 1.5), ("gelu", 2.0))]


def _row(c, quick):
    from limits.kernels import nngp

    X = _inputs(c["P"])
    kw = dict(depth=c["depth"], activation=c["act"], sigma_w2=c["sw2"], sigma_b2=c["sb2"], keep="last",
              on_explode="ignore")
    K0 = nngp(X, **{**kw, "depth": 1}).K[0]
    args = (K0, c["depth"], c["sw2"], c["sb2"], False, c["sw2"], c["sb2"])
    fns = {"limits": lambda: nngp(X, **kw),
           "numpy": lambda: plain_nngp(K0, c["depth"], c["act"], c["sw2"], c["sb2"])}
    if njit is not None:
        fns["numba"] = lambda f=make_numba(c["act"]): f(*args)
        fns["split"] = lambda f=make_split(c["act"]): f(*args)
    res = cpu_wall_interleaved(fns, repeat=5)
    (tl, r), (tp, p) = res["limits"], res["numpy"]
    ref_K, ref_T = r.K_out, r.Theta_out
    refs = (ref_K, ref_T, r.K[-1], r.Theta[-1])     # read-out and layer L, as (b), (c), (d) return them
    fl_np, fl_libm = floors(c["act"], K0, c["depth"])
    row = {"name": c["name"] + ": numba loop vs plain numpy",
           "seconds": None, "cpu_seconds": None, "first_cpu": None,
           "baseline_seconds": tp["wall"], "baseline_cpu_seconds": tp["cpu"], "ratio": None,
           "target": f">= {ADOPT:g}x plain numpy on every closed-form kernel and <= {AGREE:g} from limits (adopt)",
           "limits_cpu": tl["cpu"], "limits_first_cpu": tl["first_cpu"], "limits_ratio": tp["cpu"] / tl["cpu"],
           "numpy_agree": max(_reldiff(x, y) for x, y in zip((p[2], p[3], p[0], p[1]), refs)),
           "split_cpu": None, "split_first_cpu": None, "split_ratio": None,
           "agree": None, "agree_entrywise": None, "split_agree": None,
           "floor_numpy_cpu": fl_np, "floor_libm_cpu": fl_libm,
           "numba_version": None if numba is None else numba.__version__, "numpy_version": np.__version__}
    note = (f"limits CPU {tl['cpu']:.3f} s (first {tl['first_cpu']:.3f}), {row['limits_ratio']:.2f}x numpy; "
            f"numpy CPU {tp['cpu']:.3f} s")
    if njit is None:
        note = "numba skipped (not installed in this interpreter); " + note
    else:
        (tn, n), (ts, s) = res["numba"], res["split"]
        row.update(seconds=tn["wall"], cpu_seconds=tn["cpu"], first_cpu=tn["first_cpu"], first_wall=tn["first_wall"],
                   ratio=tp["cpu"] / tn["cpu"], agree=max(_reldiff(x, y) for x, y in zip(n, refs)),
                   agree_entrywise=max(_entrywise(x, y) for x, y in zip(n, refs)),
                   split_cpu=ts["cpu"], split_first_cpu=ts["first_cpu"], split_ratio=tp["cpu"] / ts["cpu"],
                   split_agree=max(_reldiff(x, y) for x, y in zip(s, refs)))
        note += (f"; numba {numba.__version__} loop (libm) CPU {tn['cpu']:.3f} s (first incl. compile "
                 f"{tn['first_cpu']:.2f} s), {row['ratio']:.2f}x numpy, {tl['cpu'] / tn['cpu']:.2f}x limits, "
                 f"max rel. diff to limits {row['agree']:.1e} (entrywise {row['agree_entrywise']:.1e}); "
                 f"numba + numpy ufunc CPU {ts['cpu']:.3f} s (first {ts['first_cpu']:.2f} s), "
                 f"{row['split_ratio']:.2f}x numpy, {tl['cpu'] / ts['cpu']:.2f}x limits, diff {row['split_agree']:.1e}")
    note += (f"; floor: numpy ufunc {fl_np:.3f} s" + ("" if fl_libm is None else f", scalar libm {fl_libm:.3f} s")
             + f"; max rel. diff numpy vs limits {row['numpy_agree']:.1e}" + (" (quick sizes)" if quick else ""))
    row["note"] = note
    return row


_COLD = r"""
import json, sys, time
c = time.process_time()
import numba
t_import = time.process_time() - c
import numpy as np
sys.path.insert(0, sys.argv[1])
import bench_numba as B
K0 = np.load(sys.argv[2], allow_pickle=False)
cfg = json.loads(sys.argv[3])
f = B.make_split(cfg["act"], cache=True)
args = (K0, cfg["depth"], cfg["sw2"], cfg["sb2"], False, cfg["sw2"], cfg["sb2"])
c = time.process_time()
f(*args)
first = time.process_time() - c
c = time.process_time()
f(*args)
print(json.dumps({"import": t_import, "first": first, "second": time.process_time() - c}))
"""


def cold_start(c, K0, steady_limits_first):
    """(d) in a fresh interpreter, twice, with numba's on-disk cache (``cache=True``) in a new empty folder:
    CPU of ``import numba``, of the first call (1st process: compile + write the cache; 2nd: load it) and of
    the second call. Returns a row, or None without numba."""
    import os
    import subprocess
    import tempfile

    if njit is None:
        return None
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k0.npy"
        np.save(path, K0, allow_pickle=False)
        env = {**os.environ, "NUMBA_CACHE_DIR": str(Path(tmp) / "cache"), "OPENBLAS_NUM_THREADS": "1",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        cfg = json.dumps({k: c[k] for k in ("act", "depth", "sw2", "sb2")})
        for _ in range(2):
            r = subprocess.run([sys.executable, "-c", _COLD, str(HERE), str(path), cfg], capture_output=True,
                               text=True, env=env, timeout=600)
            if r.returncode != 0:
                raise RuntimeError(f"cold-start subprocess failed: {r.stderr.strip()[-400:]}")
            runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    (a, b) = runs
    return {"name": f"{c['name']}: numba + ufunc cold start (import numba, first call; on-disk cache empty / warm)",
            "seconds": None, "cpu_seconds": b["import"] + b["first"], "first_cpu": a["import"] + a["first"],
            "baseline_seconds": None, "baseline_cpu_seconds": None, "ratio": None,
            "target": "(information: what adoption adds to a cold first call)",
            "import_cpu": b["import"], "compile_first_cpu": a["first"], "cached_first_cpu": b["first"],
            "steady_cpu": min(a["second"], b["second"]), "limits_first_cpu": steady_limits_first,
            "note": (f"import numba CPU {a['import']:.2f} / {b['import']:.2f} s; first call {a['first']:.2f} s "
                     f"(compile, cache empty), {b['first']:.2f} s (cache warm), "
                     f"then {min(a['second'], b['second']):.3f} s; "
                     f"limits' first call in the main run {steady_limits_first:.3f} s (after import limits)")}


def decision(rows):
    """The adoption verdict from the timing rows (not the cold-start ones): (adopt?, one-line reason). Either
    compiled variant, (c) or (d), is adopted if it alone meets both bars on every row."""
    rows = [r for r in rows if "cold start" not in r["name"]]
    if not rows or any(r["ratio"] is None for r in rows):
        return False, "numba not installed in this interpreter, nothing measured"
    parts, adopt = [], False
    for key, agree, label in (("ratio", "agree", "numba loop (libm)"),
                              ("split_ratio", "split_agree", "numba loop + numpy ufunc")):
        worst = min(rows, key=lambda r: r[key])
        slow = [r for r in rows if r[key] < ADOPT]
        off = [r for r in rows if r[agree] > AGREE]
        ok = not slow and not off
        adopt = adopt or ok
        parts.append(f"{label}: {len(slow)} of {len(rows)} rows below {ADOPT:g}x numpy (worst "
                     f"{worst[key]:.2f}x, {worst['name'].split(':')[0]}), max diff to limits "
                     f"{max(r[agree] for r in rows):.1e}" + (" -> meets the bar" if ok else ""))
    return adopt, "; ".join(parts)


def run(quick: bool = False) -> list[dict]:
    from limits.blas import blas_threads

    with blas_threads(1):
        rows = [_row(c, quick) for c in cases(quick)]
    adopt, why = decision(rows)
    P0 = cases(quick)[0]["P"]
    for c, r in zip(cases(quick), list(rows)):
        if c["P"] == P0 and njit is not None:
            from limits.kernels import nngp

            K0 = nngp(_inputs(c["P"]), depth=1, activation=c["act"], sigma_w2=c["sw2"], sigma_b2=c["sb2"],
                      keep="last").K[0]
            rows.append(cold_start(c, K0, r["limits_first_cpu"]))
    verdict = "undecided" if numba is None else ("adopt" if adopt else "do not adopt")
    for r in rows:
        r["decision"] = f"{verdict}: {why}"
    return rows


def table(rows) -> str:
    """Steady-state CPU seconds (first call in brackets), ratios to plain numpy, agreement, floors."""
    def f(v, fmt="{:.3f}"):
        return "skipped" if v is None else fmt.format(v)

    head = (f"{'workload':34s} {'numpy':>7s} {'limits (first)':>15s} {'×np':>5s} {'numba (first)':>15s} {'×np':>5s} "
            f"{'Δ vs limits':>11s} {'numba+ufunc':>11s} {'×np':>5s} {'Δ vs limits':>11s} {'floor np':>8s} "
            f"{'floor libm':>10s}")
    lines = [head, "-" * len(head)]
    cold = [r for r in rows if "cold start" in r["name"]]
    for r in rows:
        if r in cold:
            continue
        nb = "skipped" if r["cpu_seconds"] is None else f"{r['cpu_seconds']:.3f} ({r['first_cpu']:.2f})"
        lim = f"{r['limits_cpu']:.3f} ({r['limits_first_cpu']:.2f})"
        lines.append(f"{r['name'].split(':')[0][:34]:34s} {r['baseline_cpu_seconds']:7.3f} "
                     f"{lim:>15s} {r['limits_ratio']:5.2f} "
                     f"{nb:>15s} {f(r['ratio'], '{:.2f}'):>5s} {f(r['agree'], '{:.1e}'):>11s} "
                     f"{f(r['split_cpu']):>11s} {f(r['split_ratio'], '{:.2f}'):>5s} "
                     f"{f(r['split_agree'], '{:.1e}'):>11s} "
                     f"{r['floor_numpy_cpu']:8.3f} "
                     f"{f(r['floor_libm_cpu']):>10s}")
    for r in cold:
        lines.append(f"{r['name'].split(':')[0][:34]:34s} cold start of numba + ufunc: {r['note']}")
    if rows:
        lines.append("decision: " + rows[0]["decision"])
    return "\n".join(lines)


def markdown(rows) -> str:
    """The table of benchmarks/README.md ("Compiled loops (numba): decision") from saved rows:
    ``python benchmarks/bench_numba.py --markdown benchmarks/results/numba.json``."""
    main = [r for r in rows if "cold start" not in r["name"]]
    cold = [r for r in rows if "cold start" in r["name"]]
    v = next((r["numba_version"] for r in main if r.get("numba_version")), None)
    out = [f"| workload (NNGP + NTK, MLP) | plain numpy | limits (×numpy) | numba loop, libm (×numpy) | "
           f"numba + numpy ufunc (×numpy) | max rel. diff to limits (libm / ufunc) | floor: ufunc / libm |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for r in main:
        name = r["name"].split(":")[0].replace(" MLP NNGP+NTK", "")
        if r["cpu_seconds"] is None:
            nb = sp = dif = "skipped"
        else:
            nb = f"{r['cpu_seconds']:.3f} ({r['ratio']:.2f}×)"
            sp = f"{r['split_cpu']:.3f} ({r['split_ratio']:.2f}×)"
            dif = f"{r['agree']:.1e} / {r['split_agree']:.1e}"
        fl = f"{r['floor_numpy_cpu']:.3f} / " + ("—" if r["floor_libm_cpu"] is None else f"{r['floor_libm_cpu']:.3f}")
        out.append(f"| {name} | {r['baseline_cpu_seconds']:.3f} | {r['limits_cpu']:.3f} ({r['limits_ratio']:.2f}×) | "
                   f"{nb} | {sp} | {dif} | {fl} |")
    if cold:
        out += ["", "| cold start, numba + ufunc (fresh interpreter) | import numba | first call, cache empty "
                "(compile) | first call, cache warm | steady | limits' first call |", "|---|---:|---:|---:|---:|---:|"]
        for r in cold:
            out.append(f"| {r['name'].split(':')[0].replace(' MLP NNGP+NTK', '')} | {r['import_cpu']:.2f} | "
                       f"{r['compile_first_cpu']:.2f} | {r['cached_first_cpu']:.2f} | {r['steady_cpu']:.3f} | "
                       f"{r['limits_first_cpu']:.3f} |")
    if main:
        out += ["", f"CPU seconds (steady state best of 5, calls interleaved; numba {v}, numpy "
                f"{main[0]['numpy_version']}). Verdict of the rule: {main[0]['decision']}."]
    return "\n".join(out)


if __name__ == "__main__":
    if "--markdown" in sys.argv:
        src = Path(sys.argv[sys.argv.index("--markdown") + 1])
        print(markdown(json.loads(src.read_text())))
        sys.exit(0)
    out = run("--quick" in sys.argv)
    for r in out:
        print(json.dumps(r, default=str))
    print(table(out))
