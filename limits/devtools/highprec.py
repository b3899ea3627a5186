"""Independent high-precision reference for the closed-form kernels (mpmath, 50 digits by default).

Nothing here shares code with the float64 paths: the read-in Gram is formed from the inputs in mpmath, every
layer applies the textbook closed forms (docs/theory/kernels.rst §1) in mpmath arithmetic, and no
cancellation-free rewriting is used — at 50 digits the naive forms lose at most the digits the inputs'
conditioning costs (an angle of 1e-12 between rows of norm 1e19 costs ≈ 24 + 2·19 digits of K⁰ in the worst
case; :func:`mlp` raises the working precision to cover that). Used by the edge-case tests
(``tests/kernels/test_edge_numerics.py``) and the published table (``benchmarks/edge_numerics.py``).

MLP (``limits.mlp`` / ``limits.kernels.nngp``, NTK parameterisation)::

    K⁰ = σ²_w,in XXᵀ/d + σ²_b,in,   Θ⁰ = K⁰
    K^l = σ_w² E[φφ](K^{l−1}) + σ_b²,   Θ^l = K^l + σ_w² E[φ'φ'](K^{l−1}) Θ^{l−1}
    K_out = σ²_w,out E[φφ](K^L) + σ²_b,out,   Θ_out = K_out + σ²_w,out E[φ'φ'](K^L) Θ^L

Compositions of Dense / Activation / LayerNorm (``limits.serial``; neural-tangents' conventions): K⁰ = XXᵀ/d,
Θ⁰ = 0; Dense: K' = σ_w²K + σ_b², Θ' = σ_w²Θ + K'; Activation: K' = E[φφ], Θ' = E[φ'φ']Θ; LayerNorm:
K'_αβ = K_αβ/√((K_αα+ε)(K_ββ+ε)), likewise Θ.
"""
from __future__ import annotations

import mpmath

CLOSED = ("linear", "relu", "erf", "gelu")


def _pair(name, k11, k12, k22):
    """(E[φ(u)φ(v)], E[φ'(u)φ'(v)]) for (u, v) ~ N(0, [[k11, k12], [k12, k22]]), mpmath closed forms."""
    mp = mpmath.mp
    if name == "linear":
        return k12, mp.mpf(1)
    if name == "relu":
        g = mp.sqrt(k11 * k22)
        if g == 0:
            return mp.mpf(0), mp.mpf(1) / 4
        root = mp.sqrt(max(k11 * k22 - k12 * k12, mp.mpf(0)))      # g sin θ (exactly 0 for collinear rows)
        pmt = mp.atan2(root, -k12)                                 # π − θ
        return (root + pmt * k12) / (2 * mp.pi), pmt / (2 * mp.pi)
    if name == "erf":
        a1, a2 = 1 + 2 * k11, 1 + 2 * k22
        E = 2 / mp.pi * mp.asin(2 * k12 / mp.sqrt(a1 * a2))
        G = 4 / mp.pi / mp.sqrt(a1 * a2 - 4 * k12 * k12)
        return E, G
    if name == "gelu":
        det = k11 * k22 - k12 * k12
        D = 1 + k11 + k22 + det
        B4 = 1 / (2 * mp.pi * mp.sqrt(D))
        B1 = mp.mpf(1) / 4 + mp.asin(k12 / mp.sqrt((1 + k11) * (1 + k22))) / (2 * mp.pi)
        E = k11 * B4 * (k22 + det) / (1 + k11) + k12 * B1 + k12 * k12 * B4 / (1 + k22)
        G = B1 + k12 * B4 * (1 / (1 + k11) + 1 / (1 + k22) + 1 / D)
        return E, G
    raise ValueError(f"no closed form for {name!r}; known: {CLOSED}")


def _mp(x):
    return mpmath.mpf(float(x))


def gram(X, scale=1.0, shift=0.0):
    """scale·XXᵀ/d + shift in mpmath from the float64 rows of X (exact inputs)."""
    rows = [[_mp(v) for v in r] for r in X]
    d = len(rows[0])
    s, b = _mp(scale), _mp(shift)
    P = len(rows)
    return [[s * mpmath.fsum(a * c for a, c in zip(rows[i], rows[j])) / d + b for j in range(P)] for i in range(P)]


def _dps_for(X, dps):
    """Working precision: ``dps`` plus the digits that the smallest angle and the largest norm cost."""
    import math

    big = max((abs(float(v)) for r in X for v in r), default=1.0)
    extra = 2 * max(0, int(math.log10(big + 1.0))) + 30
    return dps + extra


def mlp(X, activation, depth, sigma_w2=1.0, sigma_b2=0.0, sigma_w2_in=None, sigma_b2_in=None,
        sigma_w2_out=None, sigma_b2_out=None, dps=50):
    """(K_out, Θ_out, layers) of a feed-forward MLP as nested lists of mpmath numbers; ``layers`` = [(K^l, Θ^l)]."""
    win = sigma_w2 if sigma_w2_in is None else sigma_w2_in
    bin_ = sigma_b2 if sigma_b2_in is None else sigma_b2_in
    wout = sigma_w2 if sigma_w2_out is None else sigma_w2_out
    bout = sigma_b2 if sigma_b2_out is None else sigma_b2_out
    with mpmath.workdps(_dps_for(X, dps)):
        K = gram(X, win, bin_)
        T = [row[:] for row in K]
        layers = [(K, T)]
        w, b = _mp(sigma_w2), _mp(sigma_b2)
        for _ in range(depth):
            K, T = _layer(activation, K, T, w, b)
            layers.append((K, T))
        K, T = _layer(activation, K, T, _mp(wout), _mp(bout))
        out = (_round(K), _round(T), [(_round(a), _round(c)) for a, c in layers])
    return out


def _layer(name, K, T, w, b):
    P = len(K)
    Kn = [[None] * P for _ in range(P)]
    Tn = [[None] * P for _ in range(P)]
    for i in range(P):
        for j in range(i, P):
            E, G = _pair(name, K[i][i], K[i][j], K[j][j])
            Kn[i][j] = Kn[j][i] = w * E + b
            Tn[i][j] = Tn[j][i] = Kn[i][j] + w * G * T[i][j]
    return Kn, Tn


def composition(X, layers, dps=50):
    """(K, Θ) of ``limits.serial`` of Dense / Activation / LayerNorm layers (module docstring) on rows X
    (P×d), or — inputs (P, n, C) — of 1-D Conv (stride 1, padding "SAME"), Activation, Dense, GlobalAvgPool and
    Flatten layers, with every pair of positions kept (:func:`_spatial_composition`)."""
    import numpy as np

    if np.ndim(X) == 3:
        return _spatial_composition(X, layers, dps)
    with mpmath.workdps(_dps_for(X, dps)):
        K = gram(X)
        P = len(K)
        T = [[mpmath.mpf(0)] * P for _ in range(P)]
        for layer in layers:
            K, T = _composition_layer(layer, K, T)
        return _round(K), _round(T)


def _spatial_composition(X, layers, dps):
    """Neural-tangents' rules on position-pair blocks K[a][b][p][p'] (inputs a, b; positions p, p'):
    K⁰ = ⟨x_a,p, x_b,p'⟩/C; Conv K'[p][p'] = σ_w²/k Σ_f K[p+f−lo][p'+f−lo] (zero outside) + σ_b², Θ likewise
    plus K'; Activation per position pair with the variances K[a][a][p][p], K[b][b][p'][p']; Dense per entry;
    GlobalAvgPool the mean over all (p, p'); Flatten the mean over p = p'."""
    import numpy as np

    flat = np.asarray(X, dtype=np.float64).reshape(len(X), -1)
    with mpmath.workdps(_dps_for(flat, dps)):
        P, n, C = np.shape(X)
        xs = [[[_mp(v) for v in X[a][p]] for p in range(n)] for a in range(P)]
        K = [[[[mpmath.fsum(u * w for u, w in zip(xs[a][p], xs[b][q])) / C for q in range(n)] for p in range(n)]
              for b in range(P)] for a in range(P)]
        T = [[[[mpmath.mpf(0)] * n for _ in range(n)] for _ in range(P)] for _ in range(P)]
        spatial = True
        for layer in layers:
            kind = type(layer).__name__
            if kind in ("GlobalAvgPool", "Flatten"):
                f = ((lambda M: mpmath.fsum(v for row in M for v in row) / (n * n)) if kind == "GlobalAvgPool"
                     else (lambda M: mpmath.fsum(M[p][p] for p in range(n)) / n))
                K = [[f(K[a][b]) for b in range(P)] for a in range(P)]
                T = [[f(T[a][b]) for b in range(P)] for a in range(P)]
                spatial = False
            elif not spatial:
                K, T = _composition_layer(layer, K, T)
            elif kind == "Conv":
                K, T = _conv(layer, K, T, n)
            elif kind in ("Dense", "Activation"):
                K, T = _pointwise(layer, K, T, n)
            else:
                raise ValueError(f"no spatial reference for layer {kind}")
        return _round(K), _round(T)


def _conv(layer, K, T, n):
    k = int(layer.filter_shape[0])
    if tuple(layer.strides or (1,)) not in ((1,),) or layer.padding != "SAME":
        raise ValueError("the reference covers stride-1 'SAME' 1-D convolutions only")
    lo = (k - 1) // 2
    w, b = _mp(layer.sigma_w2), _mp(layer.sigma_b2)

    def patch(M):
        out = [[None] * n for _ in range(n)]
        for p in range(n):
            for q in range(n):
                acc = []
                for f in range(k):
                    i, j = p + f - lo, q + f - lo
                    if 0 <= i < n and 0 <= j < n:
                        acc.append(M[i][j])
                out[p][q] = mpmath.fsum(acc) / k
        return out

    P = len(K)
    Kn = [[None] * P for _ in range(P)]
    Tn = [[None] * P for _ in range(P)]
    for a in range(P):
        for c in range(P):
            pk, pt = patch(K[a][c]), patch(T[a][c])
            Kn[a][c] = [[w * pk[p][q] + b for q in range(n)] for p in range(n)]
            Tn[a][c] = [[w * pt[p][q] + Kn[a][c][p][q] for q in range(n)] for p in range(n)]
    return Kn, Tn


def _pointwise(layer, K, T, n):
    P = len(K)
    kind = type(layer).__name__
    Kn = [[None] * P for _ in range(P)]
    Tn = [[None] * P for _ in range(P)]
    for a in range(P):
        for c in range(P):
            if kind == "Dense":
                w, b = _mp(layer.sigma_w2), _mp(layer.sigma_b2)
                Kn[a][c] = [[w * K[a][c][p][q] + b for q in range(n)] for p in range(n)]
                Tn[a][c] = [[w * T[a][c][p][q] + Kn[a][c][p][q] for q in range(n)] for p in range(n)]
            else:
                rk, rt = [[None] * n for _ in range(n)], [[None] * n for _ in range(n)]
                for p in range(n):
                    for q in range(n):
                        E, G = _pair(layer.name_, K[a][a][p][p], K[a][c][p][q], K[c][c][q][q])
                        rk[p][q], rt[p][q] = E, G * T[a][c][p][q]
                Kn[a][c], Tn[a][c] = rk, rt
    return Kn, Tn


def _composition_layer(layer, K, T):
    kind = type(layer).__name__
    P = len(K)
    if kind == "Dense":
        w, b = _mp(layer.sigma_w2), _mp(layer.sigma_b2)
        Kn = [[w * K[i][j] + b for j in range(P)] for i in range(P)]
        return Kn, [[w * T[i][j] + Kn[i][j] for j in range(P)] for i in range(P)]
    if kind == "Activation":
        Kn = [[None] * P for _ in range(P)]
        Tn = [[None] * P for _ in range(P)]
        for i in range(P):
            for j in range(i, P):
                E, G = _pair(layer.name_, K[i][i], K[i][j], K[j][j])
                Kn[i][j] = Kn[j][i] = E
                Tn[i][j] = Tn[j][i] = G * T[i][j]
        return Kn, Tn
    if kind == "LayerNorm":
        e = _mp(layer.eps)
        r = [1 / mpmath.sqrt(K[i][i] + e) for i in range(P)]
        return ([[K[i][j] * r[i] * r[j] for j in range(P)] for i in range(P)],
                [[T[i][j] * r[i] * r[j] for j in range(P)] for i in range(P)])
    raise ValueError(f"no reference for layer {kind}")


def _round(M):
    return [[float(v) for v in row] for row in M]


def relative_error(value, reference):
    """|value − reference| / |reference| (0 where both vanish; inf where only the reference does)."""
    import math

    if reference == 0.0:
        return 0.0 if value == 0.0 else math.inf
    if not math.isfinite(value):
        return math.inf
    return abs(value - reference) / abs(reference)
