"""Cancellation-free kernel recursions for nearly collinear inputs and large norms (docs/theory/kernels.rst §5).

A pair of jointly Gaussian pre-activations is described by its variances (q₁, q₂) and the half-angle
(sh, ch) = (sin θ/2, cos θ/2) of its correlation c = cos θ, both components to full *relative* accuracy::

    k₁₂ = √q₁√q₂ (ch − sh)(ch + sh),   1 − c = 2 sh²,   1 + c = 2 ch²,   sin θ = 2 sh ch,
    k₁₁k₂₂ − k₁₂² = (√q₁√q₂ · 2 sh ch)².

The usual triple (q₁, k₁₂, q₂) loses 1 − c to rounding as c → ±1 (identical, collinear, nearly collinear or
opposite inputs), and every closed form that needs 1 − c², √(k₁₁k₂₂) − k₁₂ or (1+2k₁₁)(1+2k₂₂) − 4k₁₂² then
cancels (e.g. the erf NTK of two identical rows of norm 1e7: 5 % apart instead of equal). Here every layer
maps (q₁, q₂, sh, ch) to the next layer's without forming such a difference:

* **read-in** from the rows themselves: t = ⟨a, b⟩/|a|² in double-double arithmetic and the residual
  r = b − t a with error-free products, so sin θ = |r|/|b| is relative-accurate however small θ is;
* **sums of covariances** (weights, biases, residual branches): for A + B,
  g − k₁₂ = X + g_A·2sh_A² + g_B·2sh_B² and g + k₁₂ = X + g_A·2ch_A² + g_B·2ch_B² with
  X = (√(a₁₁b₂₂) − √(a₂₂b₁₁))²/(g + g_A + g_B) ≥ 0 (g = √((a₁₁+b₁₁)(a₂₂+b₂₂))) — sums of non-negative terms;
* **activations** give E₁₁, E₂₂ and the two gaps √(E₁₁E₂₂) ∓ E₁₂ as sums of non-negative terms:
  relu π ∓ J(θ) with J = sin θ + (π − θ) cos θ (π − J = 2π sh² − (sin θ − θ cos θ), the bracket by its series
  for small θ); erf the arcsine differences arcsin(s_c) ∓ arcsin(s_c c) from s_c² sin² θ and
  1 − s_c² = (1 + 2q₁ + 2q₂)/((1+2q₁)(1+2q₂)), plus the collinear gap √(α₁α₂) − arcsin √(t₁t₂) (second-order
  in log(q₁/q₂), by its Taylor term where the direct difference would cancel); gelu the angle part as
  √q₁√q₂ ∫₀^θ E[φ'φ'](θ') sin θ' dθ' (Price's theorem; 20-point Gauss–Legendre) below θ = 1/4, and the
  collinear gap by a mixed second difference of log E₁₂;
* **derivative kernels** from the same half-angles: relu (π − θ)/2π with π − θ = 2 atan2(ch, sh); erf
  (4/π)/√(1 + 2q₁ + 2q₂ + (2√q₁√q₂ sin θ)²); gelu with det K = (√q₁√q₂ sin θ)².

Accuracy: every step is a sum of non-negative terms or an arctangent of relative-accurate arguments, so
(sh, ch) keep ~1e-15 relative accuracy through the layers; where two inputs' variances differ by about as
much as their angle (|q₁/q₂ − 1| ≈ θ ≪ 1) the rounding of the variances themselves bounds it by ε/θ — the
conditioning of that input (tabulated in docs/theory/kernels.rst §5). The kernel paths use this engine for
the pairs where their fast closed forms would lose accuracy (:func:`delicate`) and overwrite those entries.
"""
from __future__ import annotations

import math

import numpy as np

from .. import parallel

KINDS = ("linear", "relu", "erf", "gelu")
TAU = 1e-3                  # a pair is delicate when 1 − |c| (erf: 1 − |s|) falls below this
_SPLIT = 134217729.0        # 2^27 + 1 (Veltkamp splitting)
_TWO_PI = 2.0 * math.pi


# ------------------------------------------------------------------ error-free arithmetic
def _split(a):
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def two_prod(a, b):
    """(p, e) with p = fl(a·b) and a·b = p + e exactly (Dekker; no FMA needed)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def two_sum(a, b):
    """(s, e) with s = fl(a + b) and a + b = s + e exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def dot2(A, B):
    """Row-wise ⟨A_k, B_k⟩ in twice the working precision (Ogita–Rump–Oishi Dot2): (hi, lo) arrays."""
    p, e = two_prod(A, B)
    s = p[:, 0].copy()
    c = e[:, 0].copy()
    for j in range(1, A.shape[1]):
        s, q = two_sum(s, p[:, j])
        c += q + e[:, j]
    return two_sum(s, c)


def read_in(A, B):
    """(‖a‖², ‖b‖², sh, ch) for the rows a = A_k, b = B_k: squared norms (double-double, rounded) and the
    half-angle of their angle to full relative accuracy (module docstring). A zero row gets θ = 0."""
    A = np.ascontiguousarray(A, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    aa_h, aa_l = dot2(A, A)
    bb_h, bb_l = dot2(B, B)
    ab_h, ab_l = dot2(A, B)
    pos = aa_h > 0
    den = np.where(pos, aa_h, 1.0)
    t_h = ab_h / den                                  # t = ⟨a,b⟩/‖a‖² in double-double
    p, e = two_prod(t_h, den)
    t_l = (((ab_h - p) - e) + ab_l - t_h * np.where(pos, aa_l, 0.0)) / den
    p, e = two_prod(t_h[:, None], A)
    r = ((B - p) - e) - t_l[:, None] * A               # b − t a, each component to relative accuracy
    rr = np.einsum("ij,ij->i", r, r)
    na, nb = aa_h + aa_l, bb_h + bb_l
    with np.errstate(divide="ignore", invalid="ignore"):
        sin2 = np.where(pos & (nb > 0), rr / np.where(nb > 0, nb, 1.0), 0.0)
        c = np.where(pos & (nb > 0), t_h * np.sqrt(na) / np.sqrt(np.where(nb > 0, nb, 1.0)), 1.0)
    c = np.clip(c, -1.0, 1.0)
    sin2 = np.minimum(sin2, 1.0)
    sh, ch = _from_sin2(sin2, c)
    return na, nb, sh, ch


def _from_sin2(sin2, c):
    """Half-angle (sh, ch) from sin² θ (relative-accurate) and c = cos θ (absolute-accurate)."""
    acute = c >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        one_m = np.where(acute, sin2 / (1.0 + np.abs(c)), 1.0 + np.abs(c))     # 1 − c
        one_p = np.where(acute, 1.0 + np.abs(c), sin2 / (1.0 + np.abs(c)))     # 1 + c
    return _normalise(np.sqrt(0.5 * one_m), np.sqrt(0.5 * one_p))


def _normalise(sh, ch):
    r = np.hypot(sh, ch)
    ok = r > 0
    r = np.where(ok, r, 1.0)
    return np.where(ok, sh / r, 0.0), np.where(ok, ch / r, 1.0)


def from_gram(k11, k12, k22):
    """(sh, ch) of a given 2×2 covariance [[k11, k12], [k12, k22]] (its numbers taken as exact: the
    determinant k11k22 − k12² by error-free products)."""
    k11, k12, k22 = (np.asarray(a, dtype=np.float64) for a in (k11, k12, k22))
    s1, s2 = np.sqrt(k11), np.sqrt(k22)
    g = s1 * s2
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(g > 0, 1.0 / np.where(g > 0, g, 1.0), 0.0)
    # det scaled by 1/g² (no overflow): (k11/g)(k22/g) − (k12/g)² with error-free products
    a, b, k = k11 * sc, k22 * sc, k12 * sc
    p, e = two_prod(a, b)
    q, f = two_prod(k, k)
    sin2 = np.clip((p - q) + (e - f), 0.0, 1.0)
    c = np.clip(k12 * sc, -1.0, 1.0)
    sh, ch = _from_sin2(sin2, c)
    return np.where(g > 0, sh, 0.0), np.where(g > 0, ch, 1.0)


# ------------------------------------------------------------------ sums of covariances
def add(a1, a2, sha, cha, b1, b2, shb, chb):
    """The covariance A + B of two pairs (variances a1, a2 and b1, b2; half-angles): (s1, s2, sh, ch)."""
    ga = np.sqrt(a1) * np.sqrt(a2)
    gb = np.sqrt(b1) * np.sqrt(b2)
    n1, n2 = a1 + b1, a2 + b2
    g = np.sqrt(n1) * np.sqrt(n2)
    with np.errstate(divide="ignore", invalid="ignore"):
        mix = np.sqrt(a1) * np.sqrt(b2) - np.sqrt(a2) * np.sqrt(b1)
        X = np.where(g > 0, mix * mix / np.where(g > 0, g + ga + gb, 1.0), 0.0)
    minus = X + 2.0 * (ga * sha * sha + gb * shb * shb)            # g − k12
    plus = X + 2.0 * (ga * cha * cha + gb * chb * chb)             # g + k12
    sh, ch = _normalise(np.sqrt(minus), np.sqrt(plus))
    return n1, n2, sh, ch


def affine(q1, q2, sh, ch, w, b):
    """w·K + b (b added to every entry, a bias): (q1', q2', sh', ch')."""
    if b == 0.0:
        return w * q1, w * q2, sh, ch
    one = np.ones_like(q1)
    return add(w * q1, w * q2, sh, ch, b * one, b * one, np.zeros_like(sh), one)


# ------------------------------------------------------------------ activations
def angles(sh, ch):
    """(θ, π − θ, sin θ, cos θ) from the half-angle."""
    return 2.0 * np.arctan2(sh, ch), 2.0 * np.arctan2(ch, sh), 2.0 * sh * ch, (ch - sh) * (ch + sh)


def _h(x):
    """sin x − x cos x ≥ 0 on [0, π], by its series below 0.6 (no cancellation)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.sin(x) - x * np.cos(x)
    small = x < 0.6
    if np.any(small):
        xs = x[small]
        x2 = xs * xs
        term = xs * x2 / 3.0                          # n = 1: 2n x^{2n+1}/(2n+1)!
        acc = term.copy()
        for n in range(2, 14):
            term = -term * x2 * n / ((n - 1) * (2 * n) * (2 * n + 1))
            acc += term
        out[small] = acc
    return out


def pair_rule(kind, q1, q2, sh, ch, derivative=True):
    """One activation on pairs (q1, q2, sh, ch): (E12, sh_E, ch_E, G12) — the value E[φ(u)φ(v)], the
    half-angle of the correlation of (φ(u), φ(v)) and E[φ'(u)φ'(v)] (None without ``derivative``). The
    variances E[φ(u)²] are this rule at (q, q, 0, 1) (:func:`diag_rule`), so identical inputs get identical
    numbers."""
    if kind == "linear":
        return cov(q1, q2, sh, ch), sh, ch, (np.ones_like(q1) if derivative else None)
    return {"relu": _relu, "erf": _erf, "gelu": _gelu}[kind](q1, q2, sh, ch, derivative)


def diag_rule(kind, q, derivative=True):
    """(E[φ(u)²], E[φ'(u)²]) for u ~ N(0, q): :func:`pair_rule` at θ = 0."""
    q = np.asarray(q, dtype=np.float64)
    E, _, _, G = pair_rule(kind, q, q, np.zeros_like(q), np.ones_like(q), derivative)
    return E, G


def _relu(q1, q2, sh, ch, derivative):
    th, psi, sin, cos = angles(sh, ch)
    g = np.sqrt(q1) * np.sqrt(q2)
    obtuse = th > 0.5 * np.pi
    J = np.where(obtuse, _h(np.where(obtuse, psi, 0.0)), sin + psi * cos)        # sin θ + (π − θ) cos θ
    pmj = np.where(obtuse, np.pi - J, 2.0 * np.pi * sh * sh - _h(np.where(obtuse, 0.0, th)))   # π − J
    shE, chE = _normalise(np.sqrt(np.maximum(pmj, 0.0)), np.sqrt(np.pi + J))
    return g * J / _TWO_PI, shE, chE, (psi / _TWO_PI if derivative else None)


def _erf_alpha(q):
    return np.arctan2(2.0 * q, np.sqrt(1.0 + 4.0 * q))       # arcsin(2q/(1+2q))


def _erf(q1, q2, sh, ch, derivative):
    th, psi, sin, cos = angles(sh, ch)
    s1, s2 = np.sqrt(q1), np.sqrt(q2)
    u1, u2 = 1.0 / np.sqrt(1.0 + 2.0 * q1), 1.0 / np.sqrt(1.0 + 2.0 * q2)
    x = 2.0 * (s1 * u1) * (s2 * u2)                   # s_c = the arcsine's argument at c = 1
    wc = (1.0 + 2.0 * q1 + 2.0 * q2) * (u1 * u1) * (u2 * u2)    # 1 − s_c²
    rx = np.sqrt(wc)
    y = x * cos
    ry = np.sqrt(wc + (x * sin) ** 2)                 # √(1 − y²)
    bc = np.arctan2(x, rx)                            # arcsin s_c
    b = np.arctan2(y, ry)                             # arcsin(s_c c)
    num = (x * sin) ** 2                              # x² − y²
    ay = np.abs(y)
    den = x * ry + ay * rx
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.arctan2(num / np.where(den > 0, den, 1.0), rx * ry + x * ay)
    d = np.where(num > 0, d, 0.0)                     # arcsin x − arcsin |y| ≥ 0, cancellation-free
    minus = np.where(y >= 0, d, bc - b)               # arcsin s_c − arcsin y
    plus = np.where(y <= 0, d, bc + b)                # arcsin s_c + arcsin y
    a1, a2 = _erf_alpha(q1), _erf_alpha(q2)
    gap = _erf_collinear_gap(q1, q2, a1, a2, bc, x, wc)
    shE, chE = _normalise(np.sqrt(gap + minus), np.sqrt(gap + plus))
    G = None
    if derivative:
        G = (4.0 / np.pi) / np.hypot(np.sqrt(1.0 + 2.0 * q1 + 2.0 * q2), 2.0 * (s1 * s2) * sin)
    return (2.0 / np.pi) * b, shE, chE, G


def _asin_excess(t):
    """arcsin t − t√(1 − t²) = 2∫₀ᵗ u²/√(1 − u²) du ≥ 0 (series below 0.5: no cancellation)."""
    out = np.arcsin(t) - t * np.sqrt(np.maximum(1.0 - t * t, 0.0))
    small = t < 0.5
    if np.any(small):
        ts = t[small]
        z = ts * ts
        term = ts * z                                   # C(2n,n)/4ⁿ t^{2n+3}, n = 0
        acc = term / 3.0
        for n in range(1, 40):
            term = term * z * (2 * n - 1) / (2 * n)
            acc += term / (2 * n + 3)
        out[small] = 2.0 * acc
    return out


def _erf_F2(x):
    """F''(x) for F(x) = log arcsin eˣ (x < 0): F' A/(1 − t²) with t = eˣ, F' = t/(√(1−t²) arcsin t) and
    A = (arcsin t − t√(1−t²))/arcsin t — no cancellation near t = 0 (series) or t = 1 (1 − t² = −expm1 2x)."""
    t = np.exp(x)
    w = -np.expm1(2.0 * x)
    a = np.arcsin(np.minimum(t, 1.0))
    F1 = t / (np.sqrt(w) * a)
    return F1 * (_asin_excess(t) / a) / w


_GAP_NODES, _GAP_WEIGHTS = np.polynomial.legendre.leggauss(16)
_GAP_PANELS = 16


def _hat_integral(F2, xm, h):
    """½(F(x̄ − h) + F(x̄ + h)) − F(x̄) = h² ∫₀¹ (1 − s)·½[F''(x̄ − hs) + F''(x̄ + hs)] ds for x̄ + h < 0 (F''
    singular at 0 at worst): 16-point Gauss–Legendre in s where h is small against the distance to 0 and 1,
    else composite Gauss–Legendre in w = log(−x) (geometric panels towards x = 0) on both halves, graded
    (cubically) towards the upper end x̄ + h."""
    out = np.zeros_like(xm)
    near = h < 0.05 * np.minimum(-(xm + h), 1.0)
    if np.any(near):
        i = np.flatnonzero(near)
        s = 0.5 * (_GAP_NODES + 1.0)
        hs = h[i, None] * s
        f = (1.0 - s) * 0.5 * (F2(xm[i, None] - hs) + F2(xm[i, None] + hs))
        out[i] = h[i] ** 2 * (0.5 * f @ _GAP_WEIGHTS)
    far = ~near
    if np.any(far):
        i = np.flatnonzero(far)
        out[i] = _hat_panels(F2, xm[i], h[i])
    return out


def _hat_panels(F2, xm, h):
    total = np.zeros_like(xm)
    k = np.arange(_GAP_PANELS + 1) / _GAP_PANELS
    for lo, hi in ((xm - h, xm), (xm, xm + h)):
        wl, wh = np.log(-hi), np.log(-lo)              # w = log(−x) decreases with x: wl is the upper end
        edges = wl[:, None] + (wh - wl)[:, None] * k ** 3
        a, b = edges[:, :-1], edges[:, 1:]
        mid, half = 0.5 * (a + b), 0.5 * (b - a)
        w = mid[..., None] + half[..., None] * _GAP_NODES
        x = -np.exp(w)
        f = F2(x) * (h[:, None, None] - np.abs(x - xm[:, None, None])) * 0.5 * (-x)
        total += np.einsum("pkn,n,pk->p", f, _GAP_WEIGHTS, half)
    return total


def _erf_logt(q):
    """log t, t = 2q/(1 + 2q), to full relative accuracy for every q > 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(q < 1.0, np.log(2.0 * q / (1.0 + 2.0 * q)), np.log1p(-1.0 / (1.0 + 2.0 * q)))


def _erf_collinear_gap(q1, q2, a1, a2, bc, x, wc):
    """√(α₁α₂) − arcsin √(t₁t₂) ≥ 0 with t = 2q/(1+2q), α = arcsin t: β_c·expm1(½(F(x₁) + F(x₂)) − F(x̄)),
    F(x) = log arcsin eˣ, x = log t, the second difference as the integral of F'' against the hat kernel
    (:func:`_hat_integral`; h = ½ log(t₁/t₂) = ½ log1p((q₁ − q₂)/(q₂(1 + 2q₁))) exactly) — zero for q₁ = q₂,
    no cancellation for any pair of variances."""
    out = np.zeros_like(q1)
    dif = (q1 != q2) & (q1 > 0) & (q2 > 0)
    if not np.any(dif):
        return out
    i = np.flatnonzero(dif)
    a, b = np.minimum(q1[i], q2[i]), np.maximum(q1[i], q2[i])
    h = 0.5 * np.log1p((b - a) / (a * (1.0 + 2.0 * b)))
    xm = 0.5 * (_erf_logt(a) + _erf_logt(b))
    out[i] = bc[i] * np.expm1(_hat_integral(_erf_F2, xm, h))
    return out


# --- gelu: closed forms in (q1, q2, θ) and the Price-integral angle part
def _gelu_B1(k12, D):
    """E[Φ(u)Φ(v)] = 1/4 + atan2(k12, √D)/2π, for k12 < 0 as atan2(√D, −k12)/2π (no cancellation as it → 0)."""
    r = np.sqrt(D)
    return np.where(k12 >= 0, 0.25 + np.arctan2(k12, r) / _TWO_PI, np.arctan2(r, -k12) / _TWO_PI)


def _gelu_E(q1, q2, g, cos, sin):
    k12 = g * cos
    det = (g * sin) ** 2
    D = 1.0 + q1 + q2 + det
    B4 = 1.0 / (_TWO_PI * np.sqrt(D))
    return q1 * B4 * (q2 + det) / (1.0 + q1) + k12 * _gelu_B1(k12, D) + k12 * k12 * B4 / (1.0 + q2)


def _gelu_G(q1, q2, g, cos, sin):
    k12 = g * cos
    D = 1.0 + q1 + q2 + (g * sin) ** 2
    B4 = 1.0 / (_TWO_PI * np.sqrt(D))
    return _gelu_B1(k12, D) + k12 * B4 * (1.0 / (1.0 + q1) + 1.0 / (1.0 + q2) + 1.0 / D)


_GL_X, _GL_W = np.polynomial.legendre.leggauss(10)
_GL_EDGES = (np.arange(17) / 16.0) ** 4        # panels graded towards 0, where E[φ'φ'] has its knee (θ ≈ 1/√q)
_GELU_QUAD = 0.25           # below this angle (or its supplement) the Price integral replaces the difference


def _gelu_integral(q1, q2, g, hi, anti=False):
    """g ∫₀^hi E[φ'φ'](θ') sin θ' dθ' — or, ``anti``, the same over θ' ∈ [π − hi, π] in ψ' = π − θ'
    (cos θ' = −cos ψ', no rounding of π) — composite 10-point Gauss–Legendre on 16 panels graded as (k/16)⁴
    towards 0 (the knee of E[φ'φ'] at θ' ≈ √(1 + q1 + q2)/√(q1q2) is resolved wherever it falls), vectorised."""
    a, b = _GL_EDGES[:-1], _GL_EDGES[1:]
    mid, half = 0.5 * (a + b), 0.5 * (b - a)
    t = hi[:, None, None] * (mid[:, None] + half[:, None] * _GL_X)          # pairs × panels × nodes
    c = -np.cos(t) if anti else np.cos(t)
    val = _gelu_G(q1[:, None, None], q2[:, None, None], g[:, None, None], c, np.sin(t)) * np.sin(t)
    return g * hi * np.einsum("pkn,n,k->p", val, _GL_W, half)


def _gelu_m(a, b):
    """m(a, b) ≥ 0 with E[gelu(aZ) gelu(bZ)] = ab (1/2 − m/2π) (a, b > 0): from the closed form at c = 1,
    m = atan v − (α/(1+α) + β/(1+β))/v with α = 1/a², β = 1/b², v = √(αβ + α + β); for v < 1 (large a, b:
    m = O(v³) while its two terms are O(v)) as (atan v − v) + (αβ + α²/(1+α) + β²/(1+β))/v, the first by its
    series — relative accuracy for every a, b."""
    al, be = 1.0 / (a * a), 1.0 / (b * b)
    v = np.sqrt(al * be + al + be)
    out = np.arctan(v) - (al / (1.0 + al) + be / (1.0 + be)) / v
    small = v < 1.0
    if np.any(small):
        vs, A, B = v[small], al[small], be[small]
        z = vs * vs
        atan_m_v = np.arctan(vs) - vs
        tiny = vs < 0.5
        if np.any(tiny):                               # atan v − v = Σ_{n≥1} (−1)ⁿ v^{2n+1}/(2n+1)
            vt, zt = vs[tiny], z[tiny]
            term, acc = vt.copy(), np.zeros_like(vt)
            for n in range(1, 30):
                term = -term * zt
                acc += term / (2 * n + 1)
            atan_m_v[tiny] = acc
        out[small] = atan_m_v + (A * B + A * A / (1.0 + A) + B * B / (1.0 + B)) / vs
    return out


def _gelu_mu(a, b):
    """μ = π/2 − m = atan(1/v) + (α/(1+α) + β/(1+β))/v (:func:`_gelu_m`): relative-accurate for small a, b."""
    al, be = 1.0 / (a * a), 1.0 / (b * b)
    v = np.sqrt(al * be + al + be)
    return np.arctan(1.0 / v) + (al / (1.0 + al) + be / (1.0 + be)) / v


def _gelu_collinear_gap(q1, q2):
    """√(E11E22) − E12(c = 1) ≥ 0 for gelu: ab·(√(M_aa M_bb) − M_ab) with a = √q1, b = √q2 and
    M = E[gelu(aZ)gelu(bZ)]/(ab) = M₀ + σu/2π — (1/2, −1, m) for large variances, (1/4, +1, μ) for small ones
    (:func:`_gelu_m`, :func:`_gelu_mu`; u relative-accurate) — so that
    M_aa M_bb − M_ab² = M₀σ(u_aa + u_bb − 2u_ab)/2π + (u_aa u_bb − u_ab²)/4π² (relative error ε/h²,
    h = ¼ log(q1/q2)). Second order in h: for |h| < 1e-4 instead ab M_ab expm1(2 f₁₂ h²), f = log M in
    x = log a, f₁₂ from Richardson-extrapolated finite differences of u (relative error ~1e-10)."""
    out = np.zeros_like(q1)
    dif = (q1 != q2) & (q1 > 0) & (q2 > 0)
    if not np.any(dif):
        return out
    i = np.flatnonzero(dif)
    a, b = np.sqrt(q1[i]), np.sqrt(q2[i])
    h = 0.25 * np.log1p((q1[i] - q2[i]) / q2[i])
    al, be = 1.0 / q1[i], 1.0 / q2[i]
    large = np.sqrt(al * be + al + be) < 1.0
    M0, sg = np.where(large, 0.5, 0.25), np.where(large, -1.0, 1.0)

    def u(x, y):
        return np.where(large_, _gelu_m(x, y), _gelu_mu(x, y))

    def M(uv):
        return M0_ + sg_ * uv / _TWO_PI

    large_, M0_, sg_ = large, M0, sg
    uaa, ubb, uab = u(a, a), u(b, b), u(a, b)
    num = M0 * sg * (uaa + ubb - 2.0 * uab) / _TWO_PI + (uaa * ubb - uab * uab) / (4.0 * np.pi ** 2)
    gap = a * b * num / (np.sqrt(M(uaa)) * np.sqrt(M(ubb)) + M(uab))
    small = np.abs(h) < 1e-4
    if np.any(small):
        large_, M0_, sg_ = large[small], M0[small], sg[small]
        g = np.sqrt(a[small]) * np.sqrt(b[small])      # x̄: the geometric-mean standard deviation
        u0 = u(g, g)

        def derivs(dl):
            up, dn = g * math.exp(dl), g * math.exp(-dl)
            d1 = (u(up, g) - u(dn, g)) / (2.0 * dl)
            d12 = (u(up, up) - 2.0 * u(up, dn) + u(dn, dn)) / (4.0 * dl * dl)
            return d1, d12

        (d1a, d12a), (d1b, d12b) = derivs(1e-3), derivs(2e-3)
        u1, u12 = (4.0 * d1a - d1b) / 3.0, (4.0 * d12a - d12b) / 3.0      # Richardson: O(δ⁴)
        Mx = M(u0)
        f12 = (Mx * sg_ * u12 / _TWO_PI - (u1 / _TWO_PI) ** 2) / (Mx * Mx)
        hs = h[small]
        gap[small] = a[small] * b[small] * M(uab[small]) * np.expm1(2.0 * f12 * hs * hs)
    out[i] = np.maximum(gap, 0.0)
    return out


def _gelu_anti(q1, q2):
    """(E12 at c = −1, √(E11E22) + E12(c = −1) ≥ 0) for gelu: E[gelu(aZ)gelu(−bZ)] = −ab m(a, b)/2π
    (:func:`_gelu_m`, a = √q1, b = √q2) — O(1/√q) for large variances, where the closed form's O(q) terms
    cancel — and the anti-collinear gap from M = 1/2 − m/2π (large variances: no cancellation) or
    M = 1/4 + μ/2π (small: ab[(M_aaM_bb − 1/16)/(√(M_aaM_bb) + 1/4) + μ_ab/2π], all terms ≥ 0)."""
    a, b = np.sqrt(q1), np.sqrt(q2)
    al, be = 1.0 / q1, 1.0 / q2
    large = np.sqrt(al * be + al + be) < 1.0
    E = np.empty_like(q1)
    gap = np.empty_like(q1)
    if np.any(large):
        x, y = a[large], b[large]
        maa, mbb, mab = _gelu_m(x, x), _gelu_m(y, y), _gelu_m(x, y)
        E[large] = -x * y * mab / _TWO_PI
        gap[large] = x * y * (np.sqrt(0.5 - maa / _TWO_PI) * np.sqrt(0.5 - mbb / _TWO_PI) - mab / _TWO_PI)
    sm = ~large
    if np.any(sm):
        x, y = a[sm], b[sm]
        uaa, ubb, uab = _gelu_mu(x, x), _gelu_mu(y, y), _gelu_mu(x, y)
        Maa, Mbb = 0.25 + uaa / _TWO_PI, 0.25 + ubb / _TWO_PI
        E[sm] = x * y * (uab / _TWO_PI - 0.25)
        num = (uaa + ubb) / (8.0 * np.pi) + uaa * ubb / (4.0 * np.pi ** 2)
        gap[sm] = x * y * (num / (np.sqrt(Maa) * np.sqrt(Mbb) + 0.25) + uab / _TWO_PI)
    return E, np.maximum(gap, 0.0)


_GELU_ANTI = 1.0            # within this of θ = π the value comes from c = −1 plus the Price integral


def _gelu(q1, q2, sh, ch, derivative):
    th, psi, sin, cos = angles(sh, ch)
    g = np.sqrt(q1) * np.sqrt(q2)
    one, zero = np.ones_like(g), np.zeros_like(g)
    E1 = _gelu_E(q1, q1, np.sqrt(q1) * np.sqrt(q1), one, zero)
    E2 = _gelu_E(q2, q2, np.sqrt(q2) * np.sqrt(q2), one, zero)
    E12 = _gelu_E(q1, q2, g, cos, sin)
    root = np.sqrt(E1) * np.sqrt(E2)
    minus, plus = root - E12, root + E12
    near0 = th < _GELU_QUAD
    nearpi = (psi < _GELU_ANTI) & (q1 > 0) & (q2 > 0)
    if np.any(near0):
        i = np.flatnonzero(near0)
        gap = _gelu_collinear_gap(q1[i], q2[i])
        minus[i] = gap + _gelu_integral(q1[i], q2[i], g[i], th[i])
    if np.any(nearpi):
        i = np.flatnonzero(nearpi)
        em, agap = _gelu_anti(q1[i], q2[i])
        part = _gelu_integral(q1[i], q2[i], g[i], psi[i], anti=True)       # E12(c) − E12(−1)
        E12[i] = em + part
        plus[i] = agap + part
        minus[i] = root[i] - E12[i]
    shE, chE = _normalise(np.sqrt(np.maximum(minus, 0.0)), np.sqrt(np.maximum(plus, 0.0)))
    return E12, shE, chE, (_gelu_G(q1, q2, g, cos, sin) if derivative else None)


def cov(q1, q2, sh, ch):
    """k12 = √q1√q2 (ch − sh)(ch + sh)."""
    return (np.sqrt(q1) * np.sqrt(q2)) * ((ch - sh) * (ch + sh))


# ------------------------------------------------------------------ which pairs need this engine
def delicate(kinds, k11, k12, k22, tau=TAU):
    """Boolean mask of the pairs whose fast closed forms lose accuracy: 1 − |c| < τ for relu / gelu
    (relu's E[φ'φ'] = (π − θ)/2π loses ε/θ), 1 − |s| < τ for erf with s = 2k12/√((1+2k11)(1+2k22))
    (its E[φ'φ'] ∝ 1/√(1 − s²) loses ε/(1 − |s|): nearly collinear inputs *or* large variances)."""
    k11, k12, k22 = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (k11, k12, k22)))
    out = np.zeros(k12.shape, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if any(k in ("relu", "gelu") for k in kinds):
            g = np.sqrt(k11) * np.sqrt(k22)
            out |= (g > 0) & (np.abs(k12) > (1.0 - tau) * g)
        if "erf" in kinds:
            s = 2.0 * k12 / (np.sqrt(1.0 + 2.0 * k11) * np.sqrt(1.0 + 2.0 * k22))
            out |= np.abs(s) > 1.0 - tau
    return out


# ------------------------------------------------------------------ the MLP / ResNet recursion on pairs
class MLPPairs:
    """The NNGP/NTK recursion of :mod:`limits.kernels.nngp` for n pairs of inputs, in half-angle form.

    State: variances (q1, q2), half-angle (sh, ch) and value k12 of K^l, the value Θ12 of Θ^l. ``layer()``
    advances one hidden block and returns (K^l_12, C^l_12, G^l_12, Θ^l_12, q1, q2): G = E[φ'φ'] at
    K^{l−1} (what the NTK update multiplies by ρ²σ_w²), and the variances of K^l. ``readout()`` gives
    (K_out_12, Θ_out_12) at the current layer (Θ only if ``ntk``)."""

    def __init__(self, kind, c_w, c_b, residual, q1, q2, sh, ch, ntk=True):
        self.kind, self.c_w, self.c_b, self.residual, self.ntk = kind, c_w, c_b, bool(residual), ntk
        self.q1, self.q2, self.sh, self.ch = q1, q2, sh, ch
        self.k12 = cov(q1, q2, sh, ch)
        self.T = self.k12.copy() if ntk else None

    def _moments(self, w, b):
        return self._moments_g(w, b, self.ntk)

    def _moments_g(self, w, b, derivative=True):
        """(C12 = w E12 + b, its variances and half-angle, G12) at the current state."""
        E12, shE, chE, G = pair_rule(self.kind, self.q1, self.q2, self.sh, self.ch, derivative)
        E1, _ = diag_rule(self.kind, self.q1, False)
        E2, _ = diag_rule(self.kind, self.q2, False)
        c1, c2, csh, cch = affine(E1, E2, shE, chE, w, b)
        return w * E12 + b, (c1, c2, csh, cch), G

    def layer(self):
        C12, (c1, c2, csh, cch), G = self._moments(self.c_w, self.c_b)
        if self.ntk:
            T = C12 + self.c_w * G * self.T
            self.T = T + self.T if self.residual else T
        if self.residual:
            self.q1, self.q2, self.sh, self.ch = add(self.q1, self.q2, self.sh, self.ch, c1, c2, csh, cch)
            self.k12 = self.k12 + C12
        else:
            self.q1, self.q2, self.sh, self.ch = c1, c2, csh, cch
            self.k12 = C12
        return self.k12, C12, G, self.T

    def readout(self, w_out, b_out):
        K, _, G = self._moments(w_out, b_out)
        return K, (K + w_out * G * self.T if self.ntk else None)


def mlp_pairs(kind, arch, A, B, ntk=True):
    """(K_out, Θ_out, layers) for the pairs of rows (A_k, B_k) of an MLP/ResNet with resolved arguments
    ``arch`` (:class:`limits.kernels._args.Arch`): ``layers`` = [(K^l, C^l, Θ^l)] for l = 0..L."""
    na, nb, sh, ch = read_in(A, B)
    d = A.shape[1]
    w, b = arch.sigma_w2_in / d, arch.sigma_b2_in
    q1, q2, sh, ch = affine(na, nb, sh, ch, w, b)
    r2 = arch.rho ** 2
    rec = MLPPairs(kind, r2 * arch.sigma_w2, r2 * arch.sigma_b2, arch.residual, q1, q2, sh, ch, ntk)
    layers = [(rec.k12.copy(), rec.k12.copy(), None if rec.T is None else rec.T.copy())]
    for _ in range(arch.depth):
        K, C, _, T = rec.layer()
        layers.append((K.copy(), C.copy(), None if T is None else T.copy()))
    K_out, T_out = rec.readout(arch.sigma_w2_out, arch.sigma_b2_out)
    return K_out, T_out, layers


# ------------------------------------------------------------------ finding and patching delicate pairs
CHUNK_ROWS = 1 << 20        # entries per chunk of the delicate-pair search


def _thresholds(kinds, q, tau):
    """Per-input factors r with |k12| > r_α r_β ⟺ the pair is delicate (:func:`delicate`): relu / gelu
    √((1−τ) q); erf √((1−τ)(1+2q)/2) — larger, so relu's criterion covers erf's when both are present."""
    q = np.maximum(np.asarray(q, dtype=np.float64), 0.0)
    if any(k in ("relu", "gelu") for k in kinds):
        return np.sqrt((1.0 - tau) * q)
    return np.sqrt((1.0 - tau) * (0.5 + q))


def find_pairs(kinds, K, q1=None, q2=None, symmetric=True, tau=TAU):
    """(i, j) of the delicate entries of a kernel block K (:func:`delicate`); ``q1``/``q2`` the row/column
    variances (default: K's diagonal); symmetric: only i < j (and only the upper triangle is read). Row chunks
    of ~1e6 entries, three passes each (no P×P mask)."""
    P1, P2 = K.shape
    if q1 is None:
        q1 = np.diag(K)
    if q2 is None:
        q2 = q1 if symmetric else np.diag(K)
    kinds = tuple(k for k in kinds if k in ("relu", "gelu", "erf"))
    if not kinds or P1 == 0 or P2 == 0:
        return np.empty(0, np.intp), np.empty(0, np.intp)
    r1, r2 = _thresholds(kinds, q1, tau), _thresholds(kinds, q2, tau)
    n = parallel.threads()
    h = max(1, CHUNK_ROWS // max(P2, 1))
    if n > 1:                                          # several chunks per thread (a triangle is uneven)
        h = max(1, min(h, -(-P1 // (4 * n))))
    starts = list(range(0, P1, h))

    def part(group):
        I, J = [], []
        with np.errstate(invalid="ignore", over="ignore"):
            for a in (starts[k] for k in group):
                b = min(P1, a + h)
                c0 = a if symmetric else 0             # symmetric: columns from the chunk's first row on
                thr = np.multiply(r1[a:b, None], r2[None, c0:])
                m = np.abs(K[a:b, c0:]) > thr
                i, j = np.nonzero(m)
                i, j = i + a, j + c0
                if symmetric:
                    keep = i < j
                    i, j = i[keep], j[keep]
                I.append(i)
                J.append(j)
        return I, J
    sizes = [(min(P1, a + h) - a) * (P2 - (a if symmetric else 0)) for a in starts]
    parts = parallel.map_blocks(part, parallel.split(sizes, n, parallel.MIN_COPIES))  # row-major, any n
    return np.concatenate([i for p in parts for i in p[0]]), np.concatenate([j for p in parts for j in p[1]])


def find_pairs_packed(kinds, pk, Kv, d, tau=TAU):
    """(i, j), i < j, of the delicate entries of a symmetric kernel stored as packed upper triangles
    (:class:`limits.kernels._fused.Packed`) with diagonal ``d`` (:func:`find_pairs`)."""
    kinds = tuple(k for k in kinds if k in ("relu", "gelu", "erf"))
    if not kinds:
        return np.empty(0, np.intp), np.empty(0, np.intp)
    r = _thresholds(kinds, d, tau)

    def part(group):
        I, J = [], []
        with np.errstate(invalid="ignore", over="ignore"):
            for seg in (pk.segments[k] for k in group):
                a, b = seg[0], seg[1]
                m = np.abs(pk.rect(Kv, seg)) > np.multiply(r[a:b, None], r[None, a:])
                i, j = np.nonzero(m)
                i, j = i + a, j + a
                keep = i < j
                I.append(i[keep])
                J.append(j[keep])
        return I, J
    parts = pk.over_segments(part, min_size=parallel.MIN_COPIES)
    return np.concatenate([i for p in parts for i in p[0]]), np.concatenate([j for p in parts for j in p[1]])


def initial(i, j, arch, X1=None, X2=None, K0=None):
    """(q1, q2, sh, ch) of the read-in kernel at the pairs (i, j): from the rows (:func:`read_in`, then the
    read-in weights and bias) or, without rows, from the given K0 entries (:func:`from_gram`)."""
    if X1 is not None:
        X2 = X1 if X2 is None else X2
        na, nb, sh, ch = read_in(X1[i], X2[j])
        d = X1.shape[1]
        return affine(na, nb, sh, ch, arch.sigma_w2_in / d, arch.sigma_b2_in)
    q1, q2 = np.diag(K0)[i], np.diag(K0)[j]
    sh, ch = from_gram(q1, K0[i, j], q2)
    return q1, q2, sh, ch


class Slots:
    """Where the pairs (i ≤ j) live in a symmetric kernel stored either as a P×P array (both triangles) or as
    the packed upper triangle of :class:`limits.kernels._fused.Packed` (whose blocks also hold a few entries
    below the diagonal, (j, i) for i and j in one block's rows: written too, so that no stale entry remains)."""

    def __init__(self, i, j, pk=None):
        self.i, self.j, self.pk = i, j, pk
        self.pos = self.mpos = self.mk = None
        if pk is not None and i.size:
            starts = np.array([s[0] for s in pk.segments])
            ends = np.array([s[1] for s in pk.segments])
            offs = np.array([s[2] for s in pk.segments])
            k = np.searchsorted(starts, i, side="right") - 1
            a = starts[k]
            self.pos = offs[k] + (i - a) * (pk.P - a) + (j - a)
            self.mk = np.flatnonzero((j < ends[k]) & (j != i))           # (j, i) stored in the same block
            am = a[self.mk]
            self.mpos = offs[k][self.mk] + (j[self.mk] - am) * (pk.P - am) + (i[self.mk] - am)

    def get(self, A):
        return A[self.pos] if A.ndim == 1 else A[self.i, self.j]

    def put(self, A, v):
        if A.ndim == 1:
            A[self.pos] = v
            if self.mk.size:
                A[self.mpos] = np.broadcast_to(v, self.i.shape)[self.mk]
        else:
            A[self.i, self.j] = v
            A[self.j, self.i] = v


class SymmetricPatch:
    """The delicate pairs of a symmetric MLP/ResNet recursion (:func:`limits.kernels.nngp.run_recursion`),
    recomputed layer by layer and written over the fast path's entries before that layer is checked or used:
    pairs of identical inputs (K⁰_ij = K⁰_ii = K⁰_jj, snapped so by the caller) copy their row's diagonal
    entry (the fast path's diagonal formulas are exact at c = 1: equal inputs keep equal entries bit for
    bit); the other delicate i < j of K⁰ run through :class:`MLPPairs`. ``state`` (:meth:`snapshot`) resumes a
    checkpointed recursion."""

    def __init__(self, kind, arch, K0, X=None, ntk=True, state=None):
        self.kind, self.ntk = kind, ntk
        r2 = arch.rho ** 2
        self.c_w, self.residual = r2 * arch.sigma_w2, arch.residual
        self.w_out, self.b_out = arch.sigma_w2_out, arch.sigma_b2_out
        if state is not None:
            i, j, di, dj, (q1, q2, sh, ch, k12) = state
        else:
            i, j = find_pairs((kind,), K0)
            if X is not None:                          # identical rows (bitwise), whose K⁰ entries were snapped
                from ._args import row_ids

                ids, _ = row_ids(X)
                dup = (ids[i] == ids[j]) & (ids[i] >= 0)
            else:                                      # a given K⁰: equal entries are all there is to know
                d = np.diag(K0)
                dup = (K0[i, j] == d[i]) & (d[i] == d[j])
            di, dj, i, j = i[dup], j[dup], i[~dup], j[~dup]
            q1, q2, sh, ch = initial(i, j, arch, X, None, K0)
            k12 = None
        self.i, self.j, self.di, self.dj = i, j, di, dj
        self.P = K0.shape[0]
        self.rec = MLPPairs(kind, self.c_w, r2 * arch.sigma_b2, arch.residual, q1, q2, sh, ch, ntk=False)
        if k12 is not None:
            self.rec.k12 = k12
        self.slots = {}
        self.G = None

    @property
    def active(self):
        return (self.i.size + self.di.size) > 0

    def extend(self, K, pk=None):
        """Take on the pairs that became delicate at this layer (correlations move towards ±1 with depth, e.g.
        relu in the ordered phase): found on K^l (packed with ``pk``), their state from K^l's entries — accurate
        to ε/τ, as they were not delicate a layer before. Returns how many were added."""
        d = np.asarray(pk.diag(K) if pk is not None else np.diag(K)).copy()
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            i, j = (find_pairs_packed((self.kind,), pk, K, d) if pk is not None
                    else find_pairs((self.kind,), K, d, d))
            if not i.size:
                return 0
            known = np.concatenate([self.i * self.P + self.j, self.di * self.P + self.dj])
            new = ~np.isin(i * self.P + j, known)
            i, j = i[new], j[new]
            if not i.size:
                return 0
            k12 = Slots(i, j, pk).get(K)
            sh, ch = from_gram(d[i], k12, d[j])
        r = self.rec
        self.i, self.j = np.concatenate([self.i, i]), np.concatenate([self.j, j])
        r.q1, r.q2 = np.concatenate([r.q1, d[i]]), np.concatenate([r.q2, d[j]])
        r.sh, r.ch = np.concatenate([r.sh, sh]), np.concatenate([r.ch, ch])
        r.k12 = np.concatenate([r.k12, k12])
        self.slots = {}
        return int(i.size)

    def snapshot(self):
        r = self.rec
        return self.i, self.j, self.di, self.dj, (r.q1.copy(), r.q2.copy(), r.sh.copy(), r.ch.copy(), r.k12.copy())

    def _slots(self, pk, which="pairs"):
        key = (None if pk is None else id(pk), which)
        if key not in self.slots:
            i, j = {"pairs": (self.i, self.j), "dup": (self.di, self.dj), "diag": (self.di, self.di)}[which]
            self.slots[key] = Slots(i, j, pk)
        return self.slots[key]

    def _copy_diag(self, A, pk):
        if self.di.size:
            self._slots(pk, "dup").put(A, self._slots(pk, "diag").get(A))

    def layer(self, K, C, pk=None):
        """Advance one layer; write K^l and C^l at the pairs (K, C: this layer's arrays, packed with ``pk``)."""
        self._copy_diag(C, pk)
        if K is not C:
            self._copy_diag(K, pk)
        if not self.i.size:
            return
        r = self.rec
        C12, cst, G = r._moments_g(r.c_w, r.c_b)
        if r.residual:
            r.q1, r.q2, r.sh, r.ch = add(r.q1, r.q2, r.sh, r.ch, *cst)
            r.k12 = r.k12 + C12
        else:
            r.q1, r.q2, r.sh, r.ch = cst
            r.k12 = C12
        s = self._slots(pk)
        s.put(C, C12)
        if K is not C:
            s.put(K, r.k12)
        self.G, self.C12 = G, C12

    def ntk_layer(self, T, T_prev, t_scale, pk_new=None, pk_prev=None):
        """Θ̃^l at the pairs: ρ²σ_w² G Θ̃^{l−1} + t_scale·C (+ Θ̃^{l−1} for a residual block)."""
        self._copy_diag(T, pk_new)
        if not self.i.size:
            return
        tp = self._slots(pk_prev).get(T_prev)
        t = self.c_w * self.G * tp + (self.C12 if t_scale is None else t_scale * self.C12)
        if self.residual:
            t = t + tp
        self._slots(pk_new).put(T, t)

    def readout(self, K_out, T_out, T_last, t_scale, pk_last=None):
        """The read-out at the pairs (full P×P K_out / Θ̃_out; Θ̃^L in ``T_last``, packed with ``pk_last``)."""
        self._copy_diag(K_out, None)
        if T_out is not None:
            self._copy_diag(T_out, None)
        if not self.i.size:
            return
        r = self.rec
        E12, _, G = r._moments_g(self.w_out, self.b_out)
        s = self._slots(None)
        s.put(K_out, E12)
        if T_out is not None:
            tl = self._slots(pk_last).get(T_last)
            s.put(T_out, (E12 if t_scale is None else t_scale * E12) + self.w_out * G * tl)


def arch_of(kw, depth):
    """The resolved-arguments view :class:`MLPPairs` needs, from a model's kernel keyword arguments."""
    from types import SimpleNamespace

    keys = ("sigma_w2", "sigma_b2", "sigma_w2_in", "sigma_b2_in", "sigma_w2_out", "sigma_b2_out", "residual", "rho")
    return SimpleNamespace(depth=depth, **{k: kw[k] for k in keys})


class Watch:
    """Collects the delicate entries of a cross block layer by layer (``watch(l, a, block)``: rows a.. of
    K^l, with the rows' and columns' variances ``Q1[l]``, ``Q2[l]``): correlations move towards ±1 with depth."""

    def __init__(self, kind, Q1, Q2):
        self.kind, self.Q1, self.Q2 = kind, Q1, Q2
        self.found = []

    def __call__(self, l, a, block):
        n = block.shape[0]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            i, j = find_pairs((self.kind,), block, self.Q1[l][a:a + n], self.Q2[l], symmetric=False)
        if i.size:
            self.found.append((i + a, j))

    def forks(self, n):
        """This watch and n − 1 empty ones on the same variances, one per concurrent group of rows (:meth:`join`)."""
        return [self] + [Watch(self.kind, self.Q1, self.Q2) for _ in range(n - 1)]

    def join(self, others):
        """Take the entries the :meth:`forks` found (:meth:`pairs` sorts them: the order does not matter)."""
        for w in others:
            self.found.extend(w.found)

    def pairs(self):
        if not self.found:
            return np.empty(0, np.intp), np.empty(0, np.intp)
        u = np.unique(np.concatenate([np.stack(f, 1) for f in self.found]), axis=0)
        return u[:, 0], u[:, 1]


def patch_block(kind, arch, X1, X2, K0, q1, q2, K_out, T_out, Ks=None, Ts=None, ids=None, pairs=None):
    """Overwrite the delicate entries of a cross block between the rows X1 and X2 (read-in block K0 with row /
    column variances q1 / q2) in K_out, Θ_out and, when given, the per-layer stacks Ks, Ts ((L+1)×P1×P2), by
    :class:`MLPPairs` from the rows. ``ids`` = (ids1, ids2) of identical rows (:func:`limits.kernels._args.row_ids`):
    those entries are left alone (the caller's diagonal values are exact). ``pairs``: the (i, j) to recompute
    (default: the delicate entries of K0; a :class:`Watch` finds those of every layer). Returns the number."""
    if kind not in ("relu", "erf", "gelu"):
        return 0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        i, j = find_pairs((kind,), K0, q1, q2, symmetric=False) if pairs is None else pairs
        if ids is not None and i.size:
            keep = ~((ids[0][i] == ids[1][j]) & (ids[0][i] >= 0))
            i, j = i[keep], j[keep]
        if not i.size:
            return 0
        ntk = T_out is not None
        r2 = arch.rho ** 2
        q1p, q2p, sh, ch = initial(i, j, arch, X1, X2)
        rec = MLPPairs(kind, r2 * arch.sigma_w2, r2 * arch.sigma_b2, arch.residual, q1p, q2p, sh, ch, ntk=ntk)
        for l in range(1, arch.depth + 1):
            K, _, _, T = rec.layer()
            if Ks is not None:
                Ks[l][i, j] = K
            if Ts is not None and ntk:
                Ts[l][i, j] = T
        K, T = rec.readout(arch.sigma_w2_out, arch.sigma_b2_out)
        K_out[i, j] = K
        if ntk:
            T_out[i, j] = T
    return int(i.size)


# ------------------------------------------------------------------ compositions of position-free layers
class SerialPairs:
    """:func:`limits.serial` of Dense / Activation (closed forms) / LayerNorm / Residual / Identity / Flatten
    layers on pairs of inputs without positions, in half-angle form (the rules of :mod:`limits.layers`:
    K⁰ = ⟨x, y⟩/C, Θ⁰ = 0; Dense K' = σ_w²K + σ_b², Θ' = σ_w²Θ + K'; Activation K' = E[φφ], Θ' = E[φ'φ']Θ;
    LayerNorm K'/Θ' = K/Θ · r₁r₂ with r = 1/√(q + ε); Residual K + ρ²·branch). :meth:`supports` says
    whether a composition is made of these only."""

    SIMPLE = ("Dense", "Activation", "LayerNorm", "Identity", "Flatten")

    @classmethod
    def supports(cls, m) -> bool:
        for l in m.layers:
            kind = type(l).__name__
            if kind == "Residual":
                if not cls.supports(l.branch):
                    return False
            elif kind == "Serial":
                if not cls.supports(l):
                    return False
            elif kind not in cls.SIMPLE:
                return False
            elif kind == "Activation" and _closed_kind(l) is None:
                return False
        return True

    @staticmethod
    def kinds(m) -> tuple:
        out = []
        for l in m.layers:
            kind = type(l).__name__
            if kind == "Residual":
                out += SerialPairs.kinds(l.branch)
            elif kind == "Serial":
                out += SerialPairs.kinds(l)
            elif kind == "Activation":
                out.append(_closed_kind(l))
        return tuple(out)

    @staticmethod
    def run(m, state, ntk=True):
        """state = (q1, q2, sh, ch, k12, t12) → the same after the composition ``m``."""
        for l in m.layers:
            state = SerialPairs._layer(l, state, ntk)
        return state

    @staticmethod
    def _layer(l, st, ntk):
        q1, q2, sh, ch, k12, t12 = st
        kind = type(l).__name__
        if kind in ("Identity", "Flatten"):
            return st
        if kind == "Serial":
            return SerialPairs.run(l, st, ntk)
        if kind == "Dense":
            w, b = l.sigma_w2, l.sigma_b2
            q1, q2, sh, ch = affine(q1, q2, sh, ch, w, b)
            k12 = w * k12 + b
            return q1, q2, sh, ch, k12, (w * t12 + k12 if ntk else None)
        if kind == "Activation":
            a = _closed_kind(l)
            E12, shE, chE, G = pair_rule(a, q1, q2, sh, ch, ntk)
            E1, _ = diag_rule(a, q1, False)
            E2, _ = diag_rule(a, q2, False)
            return E1, E2, shE, chE, E12, (G * t12 if ntk else None)
        if kind == "LayerNorm":
            r1, r2 = 1.0 / np.sqrt(q1 + l.eps), 1.0 / np.sqrt(q2 + l.eps)
            return q1 * r1 * r1, q2 * r2 * r2, sh, ch, k12 * (r1 * r2), (t12 * (r1 * r2) if ntk else None)
        if kind == "Residual":
            b1, b2, bsh, bch, bk, bt = SerialPairs.run(l.branch, st, ntk)
            r2 = l.rho ** 2
            n1, n2, sh, ch = add(q1, q2, sh, ch, r2 * b1, r2 * b2, bsh, bch)
            return n1, n2, sh, ch, k12 + r2 * bk, (t12 + r2 * bt if ntk else None)
        raise ValueError(f"no half-angle rule for layer {kind}")


def _closed_kind(layer):
    from ..activations import BUILTIN

    act = layer.act
    return act.name if act.name in KINDS and BUILTIN.get(act.name) is act else None


def composition_pairs(m, A, B, ntk=True):
    """(K, Θ) of the composition ``m`` (:class:`SerialPairs`) for the pairs of rows (A_k, B_k)."""
    na, nb, sh, ch = read_in(A, B)
    C = A.shape[1]
    q1, q2 = na / C, nb / C
    k12 = cov(q1, q2, sh, ch)
    st = SerialPairs.run(m, (q1, q2, sh, ch, k12, np.zeros_like(k12) if ntk else None), ntk)
    return st[4], st[5]


class Probe:
    """Collects, at the input of every Activation of a composition (``Kernel.probe``), the delicate pairs of
    inputs (:func:`find_pairs`) — those the layer's closed forms would lose accuracy on."""

    def __init__(self, symmetric):
        self.symmetric = symmetric
        self.found = []

    def __call__(self, layer, k):
        if k.spatial or k.pairs is not None:
            return
        kind = _closed_kind(layer)
        if kind is None or kind == "linear":
            return
        q1, q2 = k.variances()
        q1 = np.asarray(q1).reshape(-1)
        q2 = np.asarray(q2).reshape(-1)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            self.found.append(find_pairs((kind,), k.nngp, q1, q2, symmetric=self.symmetric))

    def forks(self, n):
        """This watch and n − 1 empty ones on the same variances, one per concurrent group of rows (:meth:`join`)."""
        return [self] + [Watch(self.kind, self.Q1, self.Q2) for _ in range(n - 1)]

    def join(self, others):
        """Take the entries the :meth:`forks` found (:meth:`pairs` sorts them: the order does not matter)."""
        for w in others:
            self.found.extend(w.found)

    def pairs(self):
        if not self.found:
            return np.empty(0, np.intp), np.empty(0, np.intp)
        i = np.concatenate([f[0] for f in self.found])
        j = np.concatenate([f[1] for f in self.found])
        if not i.size:
            return i, j
        u = np.unique(np.stack([i, j], 1), axis=0)
        return u[:, 0], u[:, 1]


def patch_composition(m, X1, X2, probe, nngp, ntk):
    """Overwrite the delicate entries the probe found (and, symmetric, their mirror images) by
    :func:`composition_pairs`; identical inputs copy their diagonal entry. Returns the number of entries."""
    i, j = probe.pairs()
    if not i.size:
        return 0
    from ._args import row_ids

    sym = X2 is None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if sym:
            ids, _ = row_ids(X1)
            dup = (ids[i] == ids[j]) & (ids[i] >= 0)
            for a in (nngp, ntk):
                if a is not None and dup.any():
                    a[i[dup], j[dup]] = a[i[dup], i[dup]]
                    a[j[dup], i[dup]] = a[i[dup], i[dup]]
            i, j = i[~dup], j[~dup]
        if not i.size:
            return 0
        K, T = composition_pairs(m, X1[i], (X1 if sym else X2)[j], ntk is not None)
        for a, v in ((nngp, K), (ntk, T)):
            if a is not None:
                a[i, j] = v
                if sym:
                    a[j, i] = v
    return int(i.size)
