"""Fused, upper-triangle Gram-layer kernels for the closed-form activations (erf, relu, gelu, linear).

One layer of the NNGP/NTK recursion (seed 004 Eq. 29–30, NTK parameterisation)

    C = ρ²σ_w² E_{N(0,K)}[φφ] + ρ²σ_b²,   K' = [K] + C,   Θ̃' = [Θ̃] + e^{−s} C + ρ²σ_w² E[φ'φ'] ∘ Θ̃

is evaluated on the upper triangle only — every entry depends on K_αβ, K_αα, K_ββ and Θ_αβ alone, so the
lower triangle is never needed until a layer is handed out. The triangle is stored as row blocks
(:class:`Packed`: rows [a, b) × columns [a, P) as one contiguous rectangle of about ``BLOCK`` entries, so the
row and column variances enter as broadcast views, with no per-entry gathers), and each block runs through
E[φφ] and E[φ'φ'] in one pass that shares their sub-expressions (the arcsin argument for erf, the angle for
relu, √det(I + K) and the orthant term for gelu), every intermediate in block-sized scratch buffers that stay
in cache, the layer's scale factors folded into the closed forms' constants.

The closed forms are those of :mod:`limits.activations` / :func:`limits.kernels.expectations.moments`; relu's
angle is computed by the half-angle arctangent (φ = π − θ to full relative accuracy at both ends, one libm
arctan instead of atan2) and gelu's orthant term by atan(k12/√D) (√D ≥ 1), so the packed path agrees with the
full-matrix path to a few ulps (tests/kernels/test_kernels_fused.py: ≤ 1e-14, linear bit for bit).

Only moderate variances take this path (``usable``: every K_αα in [0, 1e150) — [1e-145, 1e150) for gelu —
so √(k11k22) and k11k22 − k12² are plain products); anything else goes through the general engine
unchanged. Cost per layer: ~P²/2 entries, one libm transcendental (arcsin / arctan) each — the floor that
``benchmarks/bench_kernels.py`` reports next to the timings.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import parallel

_TWO_OVER_PI = 2.0 / np.pi
_FOUR_OVER_PI = 4.0 / np.pi
_TWO_PI = 2.0 * np.pi
_HALF_PI = 0.5 * np.pi
_INV_TWO_PI = 1.0 / _TWO_PI
KINDS = ("erf", "relu", "gelu", "linear")
BLOCK = 16384                 # entries per segment: the ~10 segment-sized float64 buffers stay in L2
_LO, _HI = 1e-145, 1e150
_TAIL = 64                    # the last ≤ 64 rows form one block (see Packed)


def kind(act) -> str | None:
    """The fused kernel for a *registered* activation, or None (user functions, tanh, sigmoid)."""
    from ..activations import BUILTIN

    name = getattr(act, "name", None)
    if name in KINDS and BUILTIN.get(name) is act:
        return name
    return None


def usable(kind_, d) -> bool:
    """Moderate variances only (the closed forms' fast branch; see the module docstring)."""
    if kind_ is None:
        return False
    if d.size == 0:
        return True
    lo, hi = float(d.min()), float(d.max())
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi >= _HI or lo < 0.0:
        return False
    return kind_ != "gelu" or lo >= _LO


class Packed:
    """Upper triangle of a symmetric P×P matrix stored as row blocks: block k holds rows [a, b) and columns
    [a, P) as one C-ordered (b − a)×(P − a) rectangle, the rectangles one after the other in one vector. Each
    entry's row and column factors are then broadcast views (``d[a:b, None]``, ``d[None, a:]``) — no per-entry
    gathers. The few entries below the diagonal inside a block's leading square are computed too (valid
    symmetric entries; ``unpack`` takes the upper triangle only): at most 1/8 of a block (height ≤ width/4),
    and the last rows form one square of side ≤ ``_TAIL`` — fewer, larger blocks than a tighter bound would
    give, because each block costs ~30 numpy calls of ~1.5 µs fixed overhead.
    ``segments``: (first row, end row, first entry, end entry) of every block."""

    def __init__(self, P: int, block: int = BLOCK):
        self.P = P
        self.segments = []
        a = s = 0
        while a < P:
            w = P - a
            h = w if w <= _TAIL else max(1, min(block // w, w // 4))
            self.segments.append((a, a + h, s, s + h * w))
            a, s = a + h, s + h * w
        self.n = s
        self.seglen = max((e - s for _, _, s, e in self.segments), default=0)
        self.dpos = np.empty(P, dtype=np.intp)          # storage positions of the diagonal
        for a, b, s, _ in self.segments:
            r = np.arange(b - a)
            self.dpos[a:b] = s + r * (P - a) + r

    def rect(self, v, seg):
        """The (b − a)×(P − a) block ``seg`` of the storage vector ``v`` (a view)."""
        a, b, s, e = seg
        return v[s:e].reshape(b - a, self.P - a)

    def pack(self, A, out=None):
        out = np.empty(self.n) if out is None else out

        def part(group):
            for k in group:
                seg = self.segments[k]
                self.rect(out, seg)[...] = A[seg[0]:seg[1], seg[0]:]
        self.over_segments(part, min_size=parallel.MIN_COPIES)
        return out

    def unpack(self, v, out=None):
        """Full symmetric P×P matrix from the storage vector (the blocks copied, then the upper triangle
        mirrored onto the lower one)."""
        out = np.empty((self.P, self.P)) if out is None else out

        def part(group):
            for k in group:
                seg = self.segments[k]
                out[seg[0]:seg[1], seg[0]:] = self.rect(v, seg)
        self.over_segments(part, min_size=parallel.MIN_COPIES)
        return mirror(out)

    def over_segments(self, body, sc=None, min_size=None):
        """``body(group)`` — or ``body(group, scratch)`` with ``sc`` — for contiguous groups of segment indices
        of about equal size (at least ``min_size`` entries), one group per thread (:mod:`limits.parallel`); the
        groups' results in order. Each group writes its own segments: the numbers do not depend on the threads."""
        groups = parallel.split([e - s for _, _, s, e in self.segments], parallel.threads(),
                                parallel.MIN_ENTRIES if min_size is None else min_size)
        if sc is None:
            return parallel.map_blocks(body, groups)
        scs = [sc.part(k) for k in range(len(groups))]
        return parallel.map_blocks(lambda k: body(groups[k], scs[k]), range(len(groups)))

    def diag(self, v):
        return v[self.dpos]


@functools.lru_cache(maxsize=2)
def packed(P: int) -> Packed:
    """The (read-only) packed layout for size P, cached."""
    pk = Packed(P)
    pk.dpos.flags.writeable = False
    return pk


class Scratch:
    """Segment-sized work buffers, allocated once per recursion."""

    def __init__(self, pk: Packed | None, n: int = 10, size: int | None = None):
        size = pk.seglen if size is None else size
        self.buf = [np.empty(max(size, 1)) for _ in range(n)]

    def views(self, shape, k: int):
        m = shape[0] * shape[1]
        return [b[:m].reshape(shape) for b in self.buf[:k]]

    def part(self, k: int):
        """The scratch of the k-th concurrent group of segments (k = 0: this one), made on first use."""
        if k == 0:
            return self
        extra = self.__dict__.setdefault("extra", {})
        if k not in extra:
            extra[k] = Scratch(None, len(self.buf), size=self.buf[0].size)
        return extra[k]


def prepare(kind_, d):
    """Per-layer vectors shared by every segment (from the diagonal d = diag K)."""
    if kind_ == "erf":
        inv = 1.0 / np.sqrt(1.0 + 2.0 * d)
        r = np.sqrt(1.0 + 4.0 * d)
        # the diagonal (c = 1) without the cancellation in 1 − s²: E[erf(u)²] = (2/π) atan2(2k, √(1 + 4k)),
        # E[erf'(u)²] = (4/π)/√(1 + 4k)   (as limits.kernels.expectations.moments)
        return {"inv": inv, "inv2": 2.0 * inv, "dE": _TWO_OVER_PI * np.arctan2(2.0 * d, r), "dG": _FOUR_OVER_PI / r}
    if kind_ == "gelu":
        d1 = 1.0 + d
        return {"d": d, "d1": d1, "inv1": 1.0 / d1, "r1": d / d1}
    if kind_ == "relu":
        return {"d": d, "zero": bool(d.size) and float(d.min()) == 0.0}
    return {"d": d}


def seg_moments(kind_, pre, pk, seg, kv, sc, derivative=True, e_scale=1.0, g_scale=1.0):
    """(e_scale·E, g_scale·G) on one packed segment ``seg`` = (a, b, lo, hi) of the Gram whose packed segment
    is ``kv``, written into scratch views; G is None when ``derivative`` is False. The scales are folded into
    the constants of the closed forms (one pass fewer each)."""
    a, b, lo, hi = seg
    m = (b - a, pk.P - a)                             # the block's rectangle: rows a..b−1, columns a..P−1
    kv = kv.reshape(m)
    E, G = rect(kind_, rows(pre, a, b), cols(pre, a, None), kv, sc, derivative, e_scale, g_scale)
    if kind_ == "erf":                                # the diagonal entries of these rows (module docstring)
        r = np.arange(b - a)
        E[r, r] = pre["dE"][a:b] * e_scale
        if derivative:
            G[r, r] = pre["dG"][a:b] * g_scale
    return E.reshape(-1), (None if G is None else G.reshape(-1))


def rows(pre, a, b):
    """Row factors [a, b) of :func:`prepare`'s vectors, as (b − a)×1 broadcast views."""
    return {k: (v[a:b, None] if isinstance(v, np.ndarray) else v) for k, v in pre.items()}


def cols(pre, a, b):
    """Column factors [a, b) of :func:`prepare`'s vectors, as 1×(b − a) broadcast views."""
    return {k: (v[None, a:b] if isinstance(v, np.ndarray) else v) for k, v in pre.items()}


def rect(kind_, pr, pc, kv, sc, derivative=True, e_scale=1.0, g_scale=1.0):
    """(e_scale·E, g_scale·G) (G None without ``derivative``) of the covariances [[k11, k12], [k12, k22]] on a
    rectangle: ``kv`` (n×m) holds k12, ``pr``/``pc`` the :func:`prepare` vectors of its rows (n×1 views, k11)
    and columns (1×m views, k22) — :func:`rows`/:func:`cols`. Off-diagonal formulas only (the symmetric
    caller overwrites erf's diagonal). Results live in the scratch ``sc``."""
    m = kv.shape
    if kind_ == "erf":
        # s = 2k12/√((1+2k11)(1+2k22)):  E = (2/π) arcsin s,  G = (4/π) inv_α inv_β / √((1 − s)(1 + s))
        # (the factored 1 − s² keeps G accurate as |s| → 1; as limits.kernels.expectations.moments)
        W, S, G, t = sc.views(m, 4)
        np.multiply(pr["inv2"], pc["inv"], out=W)     # W = 2 inv_α·inv_β
        np.multiply(kv, W, out=S)
        np.clip(S, -1.0, 1.0, out=S)
        if derivative:
            np.subtract(1.0, S, out=G)
            np.add(1.0, S, out=t)
            G *= t
            np.sqrt(G, out=G)
            np.divide(W, G, out=G)
            G *= _TWO_OVER_PI * g_scale
        E = np.arcsin(S, out=S)
        E *= _TWO_OVER_PI * e_scale
        return E, (G if derivative else None)
    if kind_ == "relu":
        # φ = π − θ, θ = arccos(k12/g), g = √(k11k22), by the half-angle formula
        # tan(θ/2) = √((g − k12)/(g + k12)):  φ = π − 2 atan t for k12 ≥ 0, φ = 2 atan t for k12 < 0 with
        # t = √((g − |k12|)/(g + |k12|)) ∈ [0, 1] (full relative accuracy of φ at both ends, no atan2);
        # E = (√det + φ k12)/(2π), det = (g − |k12|)(g + |k12|);  G = φ/(2π)
        g, t1, t2, t3, G = sc.views(m, 5)
        np.multiply(pr["d"], pc["d"], out=g)
        np.sqrt(g, out=g)                             # g = √(k11 k22)
        nonneg = bool(float(kv.min()) >= 0.0)         # every k12 ≥ 0 (relu layers ≥ 1): no sign bookkeeping
        if nonneg:
            np.minimum(kv, g, out=t1)
        else:
            np.abs(kv, out=t1)
            np.minimum(t1, g, out=t1)                 # |k12| clipped to g
        np.subtract(g, t1, out=t2)                    # g − |k12|
        np.add(g, t1, out=t3)                         # g + |k12|
        t2 *= t3
        np.sqrt(t2, out=t2)                           # root = √det
        if pr["zero"] or pc["zero"]:                  # a zero variance: 0/0 entries are t = 0 (θ = 0)
            np.divide(t2, t3, out=t3, where=t3 > 0.0)
        else:
            np.divide(t2, t3, out=t3)                 # t = root/(g + |k12|) = √((g − |k12|)/(g + |k12|))
        np.arctan(t3, out=t3)
        t3 *= 2.0                                     # 2 atan t = θ (k12 ≥ 0) or π − θ (k12 < 0)
        if nonneg:
            np.subtract(np.pi, t3, out=g)             # φ = π − θ (the same rounding as below: π/2 + π/2 = π)
        else:
            # φ = π − θ = h − sign(k12)·2 atan t with h = π (k12 ≥ 0) or 0 (k12 < 0): h = π/2 + copysign(π/2, k12)
            # is exact, so φ is 2 atan t exactly for k12 < 0 and π − 2 atan t rounded once for k12 ≥ 0
            np.copysign(_HALF_PI, kv, out=g)
            g += _HALF_PI
            np.copysign(t3, kv, out=t3)
            g -= t3                                   # φ
            np.copysign(t1, kv, out=t1)               # k12 clipped to [−g, g]
        if derivative:
            np.multiply(g, g_scale / _TWO_PI, out=G)
        t1 *= g
        t1 += t2
        t1 *= e_scale / _TWO_PI
        return t1, (G if derivative else None)
    if kind_ == "gelu":
        # E[gelu gelu] = B4 ((k22 + det) k11/(1 + k11) + k12²/(1 + k22)) + k12 B1,
        # E[gelu' gelu'] = B1 + k12 B4 (1/(1 + k11) + 1/(1 + k22) + 1/D), D = det(I + K) = 1 + k11 + k22 + det,
        # B1 = 1/4 + atan(k12/√D)/(2π), B4 = 1/(2π √D)          (limits.activations.gelu_kernel; √D ≥ 1, so
        # atan of the ratio equals the atan2 of the closed form). det = k11k22 − k12² ≥ 0 (moderate variances:
        # no overflow; its rounding, ε·k11k22, is that of the factored form with √(k11k22) rounded); the
        # row/column factors k11/(1 + k11), 1/(1 + k22) are vectors with the scale folded in
        g, c, t, sD, B4, E, G = sc.views(m, 7)
        k22 = pc["d"]
        np.multiply(pr["d"], k22, out=g)             # k11 k22
        np.multiply(kv, kv, out=c)                    # k12²
        np.subtract(g, c, out=t)
        np.maximum(t, 0.0, out=t)                     # det
        np.add(pr["d1"], k22, out=sD)
        sD += t                                       # D
        if derivative:
            np.divide(1.0, sD, out=G)                 # 1/D (G's buffer, overwritten below)
        np.sqrt(sD, out=sD)
        np.divide(_INV_TWO_PI, sD, out=B4)            # B4
        np.divide(kv, sD, out=sD)
        np.arctan(sD, out=sD)
        sD *= _INV_TWO_PI
        sD += 0.25                                    # B1
        t += k22
        t *= pr["r1"] * e_scale                       # e·(k22 + det) k11/(1 + k11)
        c *= pc["inv1"] * e_scale                     # e·k12²/(1 + k22)
        t += c
        t *= B4
        np.multiply(kv, sD, out=E)
        if e_scale != 1.0:
            E *= e_scale
        E += t
        if derivative:
            np.add(pr["inv1"], pc["inv1"], out=g)
            g += G
            np.multiply(kv, B4, out=G)
            G *= g
            G += sD
            if g_scale != 1.0:
                G *= g_scale
        return E, (G if derivative else None)
    if kind_ == "linear":
        E, G = sc.views(m, 2)
        np.multiply(kv, e_scale, out=E)
        if derivative:
            G.fill(g_scale)
            return E, G
        return E, None
    raise AssertionError(kind_)


def layer(kind_, pk, Kp, Thp, Kn, Cn, Tn, c_w, c_b, residual, sc, t_scale=None):
    """One recursion step on packed upper triangles (module docstring): writes C (``Cn``), K' (``Kn``) and,
    when ``Thp`` is given, Θ̃' (``Tn``; C enters as ``t_scale``·C when the running log-scale is nonzero).
    Returns the sum of Θ̃' (0 without the NTK): non-finite iff some Θ̃' entry is (or the sum overflowed: the
    caller then checks exactly). K' is PSD, so its extremes are on its diagonal (the caller reads them)."""
    pre = prepare(kind_, pk.diag(Kp).copy())
    ntk = Thp is not None

    def part(group, sc):
        sums = []
        for k in group:
            seg = pk.segments[k]
            s0, s1 = seg[2], seg[3]
            kp = Kp[s0:s1]
            E, G = seg_moments(kind_, pre, pk, seg, kp, sc, derivative=ntk, e_scale=c_w, g_scale=c_w)
            C = Cn[s0:s1]
            np.add(E, c_b, out=C)                     # C = c_w E[φφ] + c_b
            K = Kn[s0:s1]
            if residual:
                np.add(kp, C, out=K)
            else:
                K[...] = C
            if ntk:
                thp = Thp[s0:s1]
                T = Tn[s0:s1]
                np.multiply(G, thp, out=T)            # c_w E[φ'φ'] ∘ Θ̃
                if t_scale is None:
                    T += C
                else:
                    np.multiply(C, t_scale, out=E)
                    T += E
                if residual:
                    T += thp
                sums.append(float(T.sum()))
        return sums

    tsum = 0.0
    for sums in pk.over_segments(part, sc):           # the segments' sums in segment order, any thread count
        for x in sums:
            tsum += x
    return tsum


def moments_packed(kind_, pk, Kv, sc, derivative=True, e_scale=1.0, g_scale=1.0):
    """Packed e_scale·E[φφ] and g_scale·E[φ'φ'] (None when ``derivative`` is False) of the packed Gram
    ``Kv``."""
    pre = prepare(kind_, pk.diag(Kv).copy())
    Ev = np.empty(pk.n)
    Gv = np.empty(pk.n) if derivative else None

    def part(group, sc):
        for k in group:
            seg = pk.segments[k]
            s0, s1 = seg[2], seg[3]
            E, G = seg_moments(kind_, pre, pk, seg, Kv[s0:s1], sc, derivative=derivative, e_scale=e_scale,
                               g_scale=g_scale)
            Ev[s0:s1] = E
            if derivative:
                Gv[s0:s1] = G
    pk.over_segments(part, sc)
    return Ev, Gv


def mirror(A, block: int = 128):
    """Copy the upper triangle of the square array A onto its lower triangle, in place (blocks of
    ``block`` columns: each transposed copy stays in cache)."""
    P = A.shape[0]
    low = np.tri(min(block, P), k=-1, dtype=bool)
    starts = list(range(0, P, block))

    def part(group):                                  # column strips: each writes its own lower strip and
        for a in (starts[k] for k in group):          # reads the upper triangle only (thread-safe)
            b = min(P, a + block)
            D = A[a:b, a:b]
            np.copyto(D, D.T, where=low[:b - a, :b - a])
            if b < P:
                A[b:, a:b] = A[a:b, b:].T
    parallel.map_blocks(part, parallel.split([(P - a) * block for a in starts], parallel.threads(),
                                             parallel.MIN_COPIES))
    return A


# ------------------------------------------------------------------ cross kernels (two input sets)
CROSS_BLOCK = BLOCK           # entries per row block of a P1×P2 cross kernel (the block's layers stay in cache)


def diag_layer(kind_, pre, d, sc, derivative, e_scale, g_scale):
    """(e_scale·E, g_scale·G) at correlation one, k11 = k12 = k22 = d elementwise, by the arithmetic the
    packed path applies to a diagonal entry (erf: its cancellation-free diagonal; the others: the rectangle
    formulas with row = column) — so a variance propagated here equals that entry of the joint Gram."""
    if kind_ == "erf":
        return pre["dE"] * e_scale, (pre["dG"] * g_scale if derivative else None)
    n = d.shape[0]
    E, G = rect(kind_, cols(pre, None, None), cols(pre, None, None), d[None, :], sc, derivative, e_scale, g_scale)
    return E.reshape(n).copy(), (None if G is None else G.reshape(n).copy())


def variance_path(kind_, q0, depth, c_w, c_b, residual, w_out, b_out, ntk, large):
    """Variances q^l (l = 0..L) of a set of inputs and, with ``ntk``, the NTK's diagonal θ^l, and the read-out
    diagonals, by :func:`diag_layer` (seed 004 Eq. 29–30 at α = β): a dict with ``Q``, ``Th`` ((L+1)×n, None
    without ``ntk``), ``k_out``, ``t_out`` (n) and ``pres`` (the :func:`prepare` vectors of every layer). None
    when some variance is not :func:`usable` or beyond ``large``, or the NTK diagonal exceeds ``large``/4 (the
    caller then takes the general path, which reports the overflow): |Θ_αβ| ≤ √(Θ_αα Θ_ββ) (Θ is PSD), so
    within the bound no cross entry of Θ can leave [−large, large]."""
    n = q0.shape[0]
    sc = Scratch(None, 7, size=n)
    Q = np.empty((depth + 1, n))
    Th = np.empty((depth + 1, n)) if ntk else None
    Q[0] = q0
    if ntk:
        Th[0] = q0
    pres = []
    k_out = t_out = None
    for l in range(depth + 1):
        d = Q[l]
        if not usable(kind_, d) or (n and float(d.max()) > large):
            return None
        pre = prepare(kind_, d)
        pres.append(pre)
        e_s, b_s = (c_w, c_b) if l < depth else (w_out, b_out)
        E, G = diag_layer(kind_, pre, d, sc, ntk, e_s, e_s)
        C = E + b_s
        if l < depth:
            Q[l + 1] = d + C if residual else C
        else:
            k_out = C
        if ntk:
            T = G * Th[l]
            T += C
            if residual and l < depth:
                T += Th[l]
            if n and not (np.all(np.isfinite(T)) and float(np.max(np.abs(T))) <= 0.25 * large):
                return None
            if l < depth:
                Th[l + 1] = T
            else:
                t_out = T
    return {"Q": Q, "Th": Th, "k_out": k_out, "t_out": t_out, "pres": pres}


def cross(kind_, K, pres1, pres2, depth, c_w, c_b, residual, w_out, b_out, ntk, Ks=None, Ts=None,
          block=None, same=None, watch=None):
    """Read-out (K_out, Θ_out) of the cross recursion on the P1×P2 read-in block ``K`` (overwritten), row
    block by row block through every layer while the block sits in cache (each entry needs only its own
    K_αβ, Θ_αβ and the row/column variances, whose :func:`prepare` vectors are ``pres1[l]``/``pres2[l]``);
    both moments of a layer from one pass (:func:`rect`: one arcsin/arctan per entry for E and E[φ'φ']).
    ``Ks``/``Ts`` ((L+1)×P1×P2, optional) receive every layer. Θ_out None without ``ntk``. ``same`` = (rows,
    columns, diagonal path of the rows' inputs — :func:`variance_path`): entries between identical inputs
    (correlation exactly one) take the diagonal values, computed without the cancellation of the
    off-diagonal formulas at c = 1. ``watch(l, a, block)``, if given, sees rows a.. of every layer l = 0..L
    (:class:`limits.kernels.halfangle.Watch`: it collects the pairs to recompute)."""
    P1, P2 = K.shape
    h = max(1, (CROSS_BLOCK if block is None else block) // max(P2, 1))
    K_out = np.empty((P1, P2))
    T_out = np.empty((P1, P2)) if ntk else None
    colv = [cols(p, None, None) for p in pres2]
    if Ks is not None:
        Ks[0] = K
        if Ts is not None:
            Ts[0] = K
    starts = list(range(0, P1, h))
    groups = parallel.split([(min(P1, a + h) - a) * P2 * (depth + 1) for a in starts], parallel.threads(),
                            parallel.MIN_ENTRIES)
    if watch is not None and len(groups) > 1:         # one collector per group, merged in row order
        watch = watch.forks(len(groups))
    else:
        watch = [watch] * len(groups)
    blocks = functools.partial(_cross_rows, kind_, K, pres1, colv, depth, c_w, c_b, residual, w_out, b_out, ntk,
                               Ks, Ts, K_out, T_out, h)
    parallel.map_blocks(lambda k: blocks([starts[i] for i in groups[k]], watch[k]), range(len(groups)))
    if len(groups) > 1 and watch[0] is not None:
        watch[0].join(watch[1:])
    if same is not None and same[0].size:
        i, j, v = same
        K_out[i, j] = v["k_out"][i]
        if ntk:
            T_out[i, j] = v["t_out"][i]
        if Ks is not None:
            Ks[:, i, j] = v["Q"][:, i]
            if Ts is not None:
                Ts[:, i, j] = v["Th"][:, i]
    return K_out, T_out


def _cross_rows(kind_, K, pres1, colv, depth, c_w, c_b, residual, w_out, b_out, ntk, Ks, Ts, K_out, T_out, h,
                starts, watch):
    """:func:`cross` on the row blocks starting at ``starts`` (h rows each), with scratch of their own."""
    P1, P2 = K.shape
    size = min(h, P1) * P2
    sc = Scratch(None, 7, size=size)
    Cb, Ta, Tb = (np.empty(max(size, 1)) for _ in range(3))
    for a in starts:
        b = min(P1, a + h)
        m = (b - a, P2)
        kb = K[a:b]
        C = Cb[:m[0] * P2].reshape(m)
        T = Tn = None
        if ntk:
            T = Ta[:m[0] * P2].reshape(m)
            Tn = Tb[:m[0] * P2].reshape(m)
            T[...] = kb
        if watch is not None:
            watch(0, a, kb)
        for l in range(1, depth + 1):
            E, G = rect(kind_, rows(pres1[l - 1], a, b), colv[l - 1], kb, sc, ntk, c_w, c_w)
            Cl = C if residual else kb                # feed-forward: K^l = C^l, written in place
            np.add(E, c_b, out=Cl)                    # C = c_w E[φφ] + c_b
            if ntk:
                np.multiply(G, T, out=Tn)             # c_w E[φ'φ'] ∘ Θ
                Tn += Cl
                if residual:
                    Tn += T
                T, Tn = Tn, T
            if residual:
                kb += C
            if watch is not None:
                watch(l, a, kb)
            if Ks is not None:
                Ks[l, a:b] = kb
                if Ts is not None:
                    Ts[l, a:b] = T
        E, G = rect(kind_, rows(pres1[depth], a, b), colv[depth], kb, sc, ntk, w_out, w_out)
        ko = K_out[a:b]
        np.add(E, b_out, out=ko)
        if ntk:
            to = T_out[a:b]
            np.multiply(G, T, out=to)
            to += ko
