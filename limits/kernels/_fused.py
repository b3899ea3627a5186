"""Fused, upper-triangle Gram-layer kernels for the closed-form activations (erf, relu, gelu, linear).

One layer of the NNGP/NTK recursion (seed 004 Eq. 29–30, NTK parameterisation)

    C = ρ²σ_w² E_{N(0,K)}[φφ] + ρ²σ_b²,   K' = [K] + C,   Θ̃' = [Θ̃] + e^{−s} C + ρ²σ_w² E[φ'φ'] ∘ Θ̃

is evaluated on the upper triangle only, held *packed* (rows α = 0..P−1, entries β ≥ α, one contiguous
vector of P(P+1)/2 numbers — every entry depends on K_αβ, K_αα, K_ββ and Θ_αβ alone, so the lower
triangle is never needed until a layer is handed out, and contiguous segments run several times faster
than strided row strips of a P×P array), in segments of about ``BLOCK`` entries, with
E[φφ] and E[φ'φ'] computed in one pass sharing their sub-expressions (the arcsin argument for erf, the
angle θ = atan2(√det, k12) for relu, √det(I + K) and the orthant term for gelu) and every intermediate
held in strip-sized scratch buffers that stay in cache. Per entry the arithmetic is that of the
closed forms in :mod:`limits.activations` / :func:`limits.kernels.expectations.moments` (bit-identical
for erf, relu and linear; gelu skips the final ½(E + Eᵀ) symmetrisation, a change of a few ulps).

Only moderate variances take this path (``usable``: every K_αα in [0, 1e150) — [1e-145, 1e150) for gelu —
so √(k11k22) and k11k22 − k12² are plain products); anything else goes through the general engine
unchanged.
Cost per layer: P(P+1)/2 entries, one transcendental (arcsin / atan2) each.
"""
from __future__ import annotations

import functools

import numpy as np

_TWO_OVER_PI = 2.0 / np.pi
_FOUR_OVER_PI = 4.0 / np.pi
_TWO_PI = 2.0 * np.pi
KINDS = ("erf", "relu", "gelu", "linear")
BLOCK = 16384                 # entries per segment: the ~10 segment-sized float64 buffers stay in L2
_LO, _HI = 1e-145, 1e150


def kind(act) -> str | None:
    """The fused kernel for a *registered* activation, or None (user functions, tanh, sigmoid)."""
    from ..activations import _BUILTIN

    name = getattr(act, "name", None)
    if name in KINDS and _BUILTIN.get(name) is act:
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
    """Row-major packed upper triangle of a symmetric P×P matrix: entry (α, β ≥ α) at
    ``off[α] + β − α``; ``ri``/``ci`` give the row/column of every packed entry."""

    def __init__(self, P: int, block: int = BLOCK):
        self.P = P
        lens = P - np.arange(P)
        self.off = np.concatenate([[0], np.cumsum(lens)]).astype(np.intp)
        self.n = int(self.off[-1])
        iu = np.triu_indices(P)
        self.ri = iu[0].astype(np.intp)
        self.ci = iu[1].astype(np.intp)
        self.dpos = self.off[:-1]                         # packed positions of the diagonal
        self.segments = []                                # (first row, end row, first entry, end entry)
        a = 0
        while a < P:
            b = int(np.searchsorted(self.off, self.off[a] + block, side="left"))
            b = min(P, max(a + 1, b))
            self.segments.append((a, b, int(self.off[a]), int(self.off[b])))
            a = b
        self.seglen = max((e - s for _, _, s, e in self.segments), default=0)

    def pack(self, A, out=None):
        out = np.empty(self.n) if out is None else out
        for a in range(self.P):
            out[self.off[a]:self.off[a + 1]] = A[a, a:]
        return out

    def unpack(self, v, out=None):
        """Full symmetric P×P matrix from the packed vector (upper rows copied, then mirrored)."""
        out = np.empty((self.P, self.P)) if out is None else out
        for a in range(self.P):
            out[a, a:] = v[self.off[a]:self.off[a + 1]]
        return mirror(out)

    def diag(self, v):
        return v[self.dpos]


@functools.lru_cache(maxsize=2)
def packed(P: int) -> Packed:
    """The (read-only) packed layout for size P, cached: its index vectors cost ~2.5 ms at P = 1000, a tenth of
    a shallow recursion."""
    pk = Packed(P)
    for a in (pk.off, pk.ri, pk.ci, pk.dpos):
        a.flags.writeable = False
    return pk


class Scratch:
    """Segment-sized work buffers, allocated once per recursion."""

    def __init__(self, pk: Packed, n: int = 10):
        self.buf = [np.empty(max(pk.seglen, 1)) for _ in range(n)]

    def views(self, m: int, k: int):
        return [b[:m] for b in self.buf[:k]]


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
        return {"d": d, "d1": d1, "inv1": 1.0 / d1}
    if kind_ == "relu":
        return {"d": d, "zero": bool(d.size) and float(d.min()) == 0.0}
    return {"d": d}


def seg_moments(kind_, pre, pk, seg, kv, sc, derivative=True, e_scale=1.0, g_scale=1.0):
    """(e_scale·E, g_scale·G) on one packed segment ``seg`` = (a, b, lo, hi) of the Gram whose packed segment
    is ``kv``, written into scratch views; G is None when ``derivative`` is False. The scales are folded into
    the constants of the closed forms (one pass fewer each)."""
    a, b, lo, hi = seg
    m = hi - lo
    ri, ci = pk.ri[lo:hi], pk.ci[lo:hi]
    if kind_ == "erf":
        # s = 2k12/√((1+2k11)(1+2k22)):  E = (2/π) arcsin s,  G = (4/π) inv_α inv_β / √((1 − s)(1 + s))
        # (the factored 1 − s² keeps G accurate as |s| → 1; as limits.kernels.expectations.moments)
        W, S, G, t = sc.views(m, 4)
        np.take(pre["inv2"], ri, out=W)
        np.take(pre["inv"], ci, out=t)
        W *= t                                        # W = 2/√((1 + 2k11)(1 + 2k22)) = 2 inv_α·inv_β
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
        dp = pk.dpos[a:b] - lo                        # the diagonal entries of these rows
        E[dp] = pre["dE"][a:b] * e_scale
        if derivative:
            G[dp] = pre["dG"][a:b] * g_scale
            return E, G
        return E, None
    if kind_ == "relu":
        # φ = π − θ, θ = arccos(k12/g), g = √(k11k22), by the half-angle formula
        # tan(θ/2) = √((g − k12)/(g + k12)):  φ = π − 2 atan t for k12 ≥ 0, φ = 2 atan t for k12 < 0 with
        # t = √((g − |k12|)/(g + |k12|)) ∈ [0, 1] (full relative accuracy of φ at both ends, no atan2);
        # E = (√det + φ k12)/(2π), det = (g − |k12|)(g + |k12|);  G = φ/(2π)
        g, t1, t2, t3, G = sc.views(m, 5)
        d = pre["d"]
        np.take(d, ri, out=g)
        np.take(d, ci, out=t1)
        g *= t1
        np.sqrt(g, out=g)                             # g = √(k11 k22)
        np.abs(kv, out=t1)
        np.minimum(t1, g, out=t1)                     # |k12| clipped to g
        np.subtract(g, t1, out=t2)                    # g − |k12|
        np.add(g, t1, out=t3)                         # g + |k12|
        t2 *= t3
        np.sqrt(t2, out=t2)                           # root = √det
        if pre["zero"]:                               # a zero variance: 0/0 entries are t = 0 (θ = 0)
            np.divide(t2, t3, out=t3, where=t3 > 0.0)
        else:
            np.divide(t2, t3, out=t3)                 # t = root/(g + |k12|) = √((g − |k12|)/(g + |k12|))
        np.arctan(t3, out=t3)
        t3 *= 2.0                                     # 2 atan t = θ (k12 ≥ 0) or π − θ (k12 < 0)
        np.subtract(np.pi, t3, out=g)
        np.copyto(g, t3, where=kv < 0.0)              # φ = π − θ
        np.copysign(t1, kv, out=t1)                   # k12 clipped to [−g, g]
        if derivative:
            np.multiply(g, g_scale / _TWO_PI, out=G)
        t1 *= g
        t1 += t2
        t1 *= e_scale / _TWO_PI
        return t1, (G if derivative else None)
    if kind_ == "gelu":
        d1 = 1.0 + d
        return {"d": d, "d1": d1, "inv1": 1.0 / d1}
    if kind_ == "relu":
        return {"d": d, "zero": bool(d.size) and float(d.min()) == 0.0}
    return {"d": d}


def seg_moments(kind_, pre, pk, seg, kv, sc, derivative=True, e_scale=1.0, g_scale=1.0):
    """(e_scale·E, g_scale·G) on one packed segment ``seg`` = (a, b, lo, hi) of the Gram whose packed segment
    is ``kv``, written into scratch views; G is None when ``derivative`` is False. The scales are folded into
    the constants of the closed forms (one pass fewer each)."""
    a, b, lo, hi = seg
    m = hi - lo
    ri, ci = pk.ri[lo:hi], pk.ci[lo:hi]
    if kind_ == "erf":
        # s = 2k12/√((1+2k11)(1+2k22)):  E = (2/π) arcsin s,  G = (4/π) inv_α inv_β / √((1 − s)(1 + s))
        # (the factored 1 − s² keeps G accurate as |s| → 1; as limits.kernels.expectations.moments)
        W, S, G, t = sc.views(m, 4)
        np.take(pre["inv2"], ri, out=W)
        np.take(pre["inv"], ci, out=t)
        W *= t                                        # W = 2/√((1 + 2k11)(1 + 2k22)) = 2 inv_α·inv_β
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
        dp = pk.dpos[a:b] - lo                        # the diagonal entries of these rows
        E[dp] = pre["dE"][a:b] * e_scale
        if derivative:
            G[dp] = pre["dG"][a:b] * g_scale
            return E, G
        return E, None
    if kind_ == "relu":
        # φ = π − θ, θ = arccos(k12/g), g = √(k11k22), by the half-angle formula
        # tan(θ/2) = √((g − k12)/(g + k12)):  φ = π − 2 atan t for k12 ≥ 0, φ = 2 atan t for k12 < 0 with
        # t = √((g − |k12|)/(g + |k12|)) ∈ [0, 1] (full relative accuracy of φ at both ends, no atan2);
        # E = (√det + φ k12)/(2π), det = (g − |k12|)(g + |k12|);  G = φ/(2π)
        g, t1, t2, t3, G = sc.views(m, 5)
        d = pre["d"]
        np.take(d, ri, out=g)
        np.take(d, ci, out=t1)
        g *= t1
        np.sqrt(g, out=g)                             # g = √(k11 k22)
        np.abs(kv, out=t1)
        np.minimum(t1, g, out=t1)                     # |k12| clipped to g
        np.subtract(g, t1, out=t2)                    # g − |k12|
        np.add(g, t1, out=t1)                         # g + |k12|
        if pre["zero"]:                               # a zero variance: 0/0 entries are t = 0 (θ = 0)
            t3.fill(0.0)
            np.divide(t2, t1, out=t3, where=t1 > 0.0)
        else:
            np.divide(t2, t1, out=t3)
        t1 *= t2
        np.sqrt(t1, out=t1)                           # root = √det
        np.sqrt(t3, out=t3)
        np.arctan(t3, out=t3)
        t3 *= 2.0                                     # 2 atan t = θ (k12 ≥ 0) or π − θ (k12 < 0)
        np.subtract(np.pi, t3, out=t2)
        np.copyto(t2, t3, where=kv < 0.0)             # φ = π − θ
        np.negative(g, out=t3)
        np.maximum(kv, t3, out=t3)
        np.minimum(t3, g, out=t3)                     # k12 clipped to [−g, g]
        if derivative:
            np.multiply(t2, g_scale / _TWO_PI, out=G)
        t2 *= t3
        t2 += t1
        t2 *= e_scale / _TWO_PI
        return t2, (G if derivative else None)
    if kind_ == "gelu":
        # E[gelu gelu] = k11 B4 (k22 + det)/(1 + k11) + k12 B1 + k12² B4/(1 + k22),
        # E[gelu' gelu'] = B1 + k12 B4 (1/(1 + k11) + 1/(1 + k22) + 1/D), D = det(I + K),
        # B1 = 1/4 + atan(k12/√D)/(2π), B4 = 1/(2π √D)          (limits.activations.gelu_kernel; √D ≥ 1, so
        # atan of the ratio equals the atan2 of the closed form)
        k11, k22, g, c, t, sD, B4, E, G = sc.views(m, 9)
        d = pre["d"]
        np.take(d, ri, out=k11)
        np.take(d, ci, out=k22)
        np.multiply(k11, k22, out=g)
        np.sqrt(g, out=g)                             # g = √(k11 k22)
        np.abs(kv, out=c)
        np.minimum(c, g, out=c)                       # |k12| clipped to g
        np.subtract(g, c, out=t)
        c += g
        t *= c                                        # det = (g − |k12|)(g + |k12|) ≥ 0
        np.add(1.0, k11, out=sD)
        sD += k22
        sD += t                                       # D = 1 + k11 + k22 + det
        if derivative:
            np.divide(1.0, sD, out=G)                 # 1/D (G's buffer, overwritten below)
        np.sqrt(sD, out=sD)
        np.multiply(sD, _TWO_PI, out=B4)
        np.divide(1.0, B4, out=B4)
        np.add(k22, t, out=t)                         # k22 + det
        np.multiply(k11, B4, out=E)
        E *= t
        np.add(1.0, k11, out=t)
        E /= t                                        # k11 B4 (k22 + det)/(1 + k11)
        np.divide(kv, sD, out=sD)
        np.arctan(sD, out=sD)
        sD /= _TWO_PI
        sD += 0.25                                    # B1
        np.multiply(kv, sD, out=g)
        E += g
        np.multiply(kv, kv, out=g)
        g *= B4
        np.add(1.0, k22, out=c)
        g /= c
        E += g
        if e_scale != 1.0:
            E *= e_scale
        if derivative:
            inv1 = pre["inv1"]
            np.take(inv1, ri, out=g)
            np.take(inv1, ci, out=c)
            g += c
            g += G
            np.multiply(kv, B4, out=G)
            G *= g
            G += sD
            if g_scale != 1.0:
                G *= g_scale
        return E, G
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
    tsum = 0.0
    for seg in pk.segments:
        s0, s1 = seg[2], seg[3]
        kp = Kp[s0:s1]
        E, G = seg_moments(kind_, pre, pk, seg, kp, sc, derivative=ntk, e_scale=c_w, g_scale=c_w)
        C = Cn[s0:s1]
        np.add(E, c_b, out=C)                         # C = c_w E[φφ] + c_b
        K = Kn[s0:s1]
        if residual:
            np.add(kp, C, out=K)
        else:
            K[...] = C
        if ntk:
            thp = Thp[s0:s1]
            T = Tn[s0:s1]
            np.multiply(G, thp, out=T)                # c_w E[φ'φ'] ∘ Θ̃
            if t_scale is None:
                T += C
            else:
                np.multiply(C, t_scale, out=E)
                T += E
            if residual:
                T += thp
            tsum += float(T.sum())
    return tsum


def moments_packed(kind_, pk, Kv, sc, derivative=True, e_scale=1.0, g_scale=1.0):
    """Packed e_scale·E[φφ] and g_scale·E[φ'φ'] (None when ``derivative`` is False) of the packed Gram
    ``Kv``."""
    pre = prepare(kind_, pk.diag(Kv).copy())
    Ev = np.empty(pk.n)
    Gv = np.empty(pk.n) if derivative else None
    for seg in pk.segments:
        s0, s1 = seg[2], seg[3]
        E, G = seg_moments(kind_, pre, pk, seg, Kv[s0:s1], sc, derivative=derivative, e_scale=e_scale,
                           g_scale=g_scale)
        Ev[s0:s1] = E
        if derivative:
            Gv[s0:s1] = G
    return Ev, Gv


def mirror(A, block: int = 128):
    """Copy the upper triangle of the square array A onto its lower triangle, in place (blocks of
    ``block`` columns: each transposed copy stays in cache)."""
    P = A.shape[0]
    low = np.tri(min(block, P), k=-1, dtype=bool)
    for a in range(0, P, block):
        b = min(P, a + block)
        D = A[a:b, a:b]
        np.copyto(D, D.T, where=low[:b - a, :b - a])
        if b < P:
            A[b:, a:b] = A[a:b, b:].T
    return A
