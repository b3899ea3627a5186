"""Gram matrices of smooth activations by piecewise Chebyshev interpolation in the correlation.

For fixed variances (q₁, q₂) the Gaussian expectation

    F(c) = E[f(√q₁ x) g(√q₂ y)],   (x, y) standard bivariate normal with correlation c ∈ [−1, 1]

is one smooth function of one variable (C^∞ on the closed interval; at large variance its structure sits
at 1 − |c| ~ 1/q near ±1). A P×P Gram matrix whose diagonal takes few values therefore needs F only for
a few variance pairs: F is interpolated on panels of w = 1 − c ∈ [0, 1] by Chebyshev polynomials of degree
``DEG`` (F(−c) = α + β F(c) by the parity of tanh/sigmoid: f = f(0) + odd, f' even; the nodes are placed in w
and the engine gets 1 − c exactly, so the conditional variances q(1 − c²) carry no cancellation where F
varies on the scale 1/q), panels graded geometrically (ratio 2) towards c = 1 down to 1 − c ~ 1/(4q) and bisected until the interpolation error is certified a
posteriori; every entry of the group is then evaluated in one vectorised pass (panel index from c by a
lookup table, Clenshaw recurrence; the panel holding most entries on the whole array in place, the
others sorted by panel). Cost per Gram: O(#pairs · #nodes) engine evaluations (#nodes ≈ 20 per function and doubling of
q: it grows like log q, not with q, and not with P) + O(P²) cheap work.

Node values ("the engine"): the Mehler series Σ a_k b_k c^k with M_NODES = 400 terms where its certified
truncation bound is below 1e-15 relative (standard deviation ≤ MEHLER_SMAX = 20), else the engine's own
rules — the tensor trapezoid, or at large variance the natural-variable rule evaluated for all nodes at once
(:func:`limits.gaussian.wide_pair_batch`, half grids for tanh by symmetry). sigmoid is computed from tanh:
E[σσ](q) = ¼ + ¼ E[tanh tanh](q/4), E[σ'σ'](q) = E[tanh' tanh'](q/4)/16 (σ(x) = ½ + ½ tanh(x/2)).

Certificate (per panel and per function): the last two Chebyshev coefficients and the difference from
the node engine at three off-node points (both ends of the panel and its middle) are at most
``TOL · max(|F|, FLOOR · √(E f² E g²))`` (TOL = 1e-12, FLOOR = 1e-2: relative to the value, with a floor at
the Cauchy–Schwarz scale where F nearly vanishes). Where the node values' own scatter dominates (the
large-variance rule is certified to 1e-10; e.g. E[tanh'tanh'] at q = 1e6 near c = 1 scatters by ~5e-11) a
panel whose Chebyshev coefficients stopped decaying, or whose bisection no longer reduces the error, is
accepted up to NOISE_MAX = 1e-10 relative (``PairInterpolant.err`` keeps the achieved ratio). A pair that
does not converge within ``MAX_PANELS`` panels / ``MAX_EVALUATIONS`` node values returns None (remembered)
and the caller keeps its general path. Measured (tests/test_corrinterp.py): ≤ 1e-12 against the engine's
per-entry rules at q = 1.5 … 1e6, ~1e-14 against mpmath near |c| = 1 at small variance, where the
engine's own trapezoid is off by up to ~2e-11.

Groups. Diagonal values are grouped when they are bitwise equal, or when they lie within a relative spread
``GROUP_RTOL`` (= 64 ulps, e.g. inputs of equal norm whose Gram diagonals differ by rounding): an entry
is evaluated at its own correlation c = K_αβ/√(K_αα K_ββ) and at the group's representative variances;
the error of that substitution is |Δ log s| |E[u f'(u) g(v)]| + (same for g) ≤ 7e-15 · sup|x f'(x)| √(E g²)
+ … (first order in the relative spread; for tanh/sigmoid and their derivatives sup|x f'(x)| < 1), i.e.
≤ 1e-14 of the Cauchy–Schwarz scale. The diagonal itself is always computed by the engine at each
entry's own variance. When grouping leaves more than ``max_groups`` groups the caller keeps its general
path unchanged.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

DEG = 16                  # Chebyshev degree per panel (DEG + 1 nodes)
TOL = 1e-12
FLOOR = 1e-2
MAX_PANELS = 600
MAX_EVALUATIONS = 12000   # engine values per build before giving up (the caller keeps its path)
NOISE_MAX = 1e-10         # accepted error (relative, as TOL) where the node values' scatter dominates
GROUP_RTOL = 64 * np.finfo(float).eps
M_NODES = 400            # Mehler terms for the node values
MEHLER_SMAX = 20.0       # above this standard deviation the node values come from the engine directly
_TABLE = 4096             # uniform lookup cells on [−1, 1] for the panel index

_th = np.pi * (2.0 * np.arange(DEG + 1) + 1.0) / (2.0 * (DEG + 1))
NODES = np.cos(_th)[::-1].copy()                       # Chebyshev points of the first kind, ascending
_CHECK = np.array([-1.0, 0.5 * (NODES[DEG // 2] + NODES[DEG // 2 + 1]), 1.0])
# DCT matrix: a_k = (2/(D+1)) Σ_i F(t_i) T_k(t_i), a_0 halved
_DCT = (2.0 / (DEG + 1)) * np.cos(np.outer(np.arange(DEG + 1), np.arccos(NODES)))
_DCT[0] *= 0.5

stats = {"engine_evaluations": 0, "builds": 0, "cache_hits": 0}
_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 256


def _clenshaw(a, t, out=None):
    """Σ_k a_k T_k(t) for scalar coefficients a (length D+1) and an array t (into ``out`` if given)."""
    if a.size == 1:
        if out is None:
            return np.full(t.shape, a[0])
        out[...] = a[0]
        return out
    tt = 2.0 * t
    b1 = np.full(t.shape, a[-1])
    b2 = np.zeros(t.shape)
    b0 = np.empty(t.shape)
    for k in range(a.size - 2, 0, -1):
        np.multiply(tt, b1, out=b0)
        b0 -= b2
        b0 += a[k]
        b1, b2, b0 = b0, b1, b2
    out = np.multiply(t, b1, out=out)
    out -= b2
    out += a[0]
    return out


class PairInterpolant:
    """Piecewise Chebyshev interpolants of F_j(c) = E[f_j(√q₁ x) g_j(√q₂ y)] on common panels.

    ``edges`` (n+1,) ascending: in c from −1 to 1, or (``refl`` given) in w = 1 − |c| from 0 to 1;
    ``coef`` (m, n, DEG+1) Chebyshev coefficients of the m functions on each panel (local variable
    t = (x − mid)/half ∈ [−1, 1], x = c or w); ``err`` (m,) the largest
    certified a-posteriori error estimate relative to the allowed error (≤ 1)."""

    def __init__(self, edges, coef, err, evaluations, refl=None):
        self.edges = edges
        self.refl = refl              # None, or [(α, β)] per function: F(−c) = α + β F(c), edges in w
        self.coef = coef
        self.err = err
        self.evaluations = evaluations
        n = edges.size - 1
        self.mid = 0.5 * (edges[1:] + edges[:-1])
        self.ih = 2.0 / (edges[1:] - edges[:-1])
        # lookup table: panel of the left end of each uniform cell; cells holding more than one edge
        # are "crowded" (their entries are located by a binary search)
        self.e0 = float(edges[0])
        self.scale = _TABLE / (1.0 - self.e0)
        left = self.e0 + np.arange(_TABLE) / self.scale
        self.table = np.clip(np.searchsorted(edges, left, side="right") - 1, 0, n - 1).astype(np.int32)
        right_panel = np.clip(np.searchsorted(edges, left + 1.0 / self.scale, side="right") - 1, 0, n - 1)
        self.crowded = (right_panel - self.table) > 1
        self.n = n

    def panel(self, c):
        """Panel index of every c (flat array in [−1, 1])."""
        k = ((c - self.e0) * self.scale).astype(np.int32)
        np.clip(k, 0, _TABLE - 1, out=k)
        j = self.table[k]
        nxt = np.minimum(j + 1, self.n)
        j += (c >= self.edges[nxt]) & (j < self.n - 1)
        if self.crowded.any():
            sel = np.nonzero(self.crowded[k])[0]
            if sel.size:
                j[sel] = np.clip(np.searchsorted(self.edges, c[sel], side="right") - 1, 0, self.n - 1)
        return j

    def _sorted(self, c, j, which, block, counts=None):
        """Values at c (panel indices j) with the entries sorted by panel (one Clenshaw pass per panel)."""
        order = np.argsort(j.astype(np.int16), kind="stable")
        if counts is None:
            counts = np.bincount(j, minlength=self.n)
        cs = c[order]
        vals = [np.empty(c.size) for _ in which]
        start = 0
        for p in np.nonzero(counts)[0]:
            stop = start + int(counts[p])
            for lo in range(start, stop, block):
                hi = min(stop, lo + block)
                t = cs[lo:hi] - self.mid[p]
                t *= self.ih[p]
                for o, m in zip(vals, which):
                    _clenshaw(self.coef[m, p], t, out=o[lo:hi])
            start = stop
        outs = []
        for o in vals:
            r = np.empty(c.size)
            r[order] = o
            outs.append(r)
        return outs

    def __call__(self, c, which=None, block=32768):
        """Values of the interpolants at the flat array c (clipped to [−1, 1]): list of arrays."""
        c = np.clip(np.asarray(c, dtype=np.float64).ravel(), -1.0, 1.0)
        which = range(self.coef.shape[0]) if which is None else which
        sgn = None
        if self.refl is not None:
            sgn = np.copysign(1.0, c)
            c = 1.0 - np.abs(c)          # the panels' variable w = 1 − |c| (exact for |c| ≥ ½)
        j = self.panel(c)
        counts = np.bincount(j, minlength=self.n)
        outs = [np.empty(c.size) for _ in which]
        dom = int(np.argmax(counts))
        if counts[dom] >= 0.5 * c.size:
            # most entries in one panel: that panel's polynomial on the whole array in place (no sort;
            # the values outside its interval are overwritten below), the others sorted by panel
            with np.errstate(over="ignore", invalid="ignore"):      # (far outside a narrow panel)
                for lo in range(0, c.size, block):
                    hi = min(c.size, lo + block)
                    t = c[lo:hi] - self.mid[dom]
                    t *= self.ih[dom]
                    for o, m in zip(outs, which):
                        _clenshaw(self.coef[m, dom], t, out=o[lo:hi])
            rest = np.nonzero(j != dom)[0]
            if rest.size:
                sub = self._sorted(c[rest], j[rest], which, block)
                for o, v in zip(outs, sub):
                    o[rest] = v
        else:
            outs = self._sorted(c, j, which, block, counts)
        res = []
        for o, m in zip(outs, which):
            r = o
            if sgn is not None and self.refl[m][1] != 1.0:     # F(−c) = α − F(c)
                al = self.refl[m][0]
                if al != 0.0:
                    r -= 0.5 * al
                r *= sgn
                if al != 0.0:
                    r += 0.5 * al
            res.append(r)
        return res


def _engine(pairs, q1, q2, c, omc=None):
    """Engine values of every pair at the correlations c: the Mehler series Σ a_k b_k c^k with ``M_NODES``
    terms (coefficients from :func:`limits.gaussian.mehler.coefficients`, once per variance) where its truncation
    bound |c|^{M+1} √(T_f T_g) is below 1e-15 · max(|F|, FLOOR √(E f² E g²)); the tensor trapezoid /
    natural-variable rule of :func:`limits.gaussian.expect2` for the other nodes (near ±1, large variance)."""
    from .engine import resolve, expect2, wide_pair_batch
    from .mehler import coefficients

    s1, s2 = float(np.sqrt(q1)), float(np.sqrt(q2))
    k11, k22 = np.full(c.shape, q1), np.full(c.shape, q2)
    k12 = c * (s1 * s2)
    stats["engine_evaluations"] += len(pairs) * c.size
    out = []
    for f, g in pairs:
        ok = np.zeros(c.shape, dtype=bool)
        v = np.empty(c.shape)
        if max(s1, s2) <= MEHLER_SMAX:
            fn, gn = resolve(f)[0], resolve(g)[0]
            a, ma = coefficients(fn, np.array([s1]), M_NODES)
            b, mb = (a, ma) if (g == f and q1 == q2) else coefficients(gn, np.array([s2]), M_NODES)
            ab = (a[0] * b[0])[::-1]
            v = np.zeros(c.shape)
            for x in ab:                        # Horner
                v *= c
                v += x
            ta = max(float(ma[0] - a[0] @ a[0]), 0.0)
            tb = max(float(mb[0] - b[0] @ b[0]), 0.0)
            cs = float(np.sqrt(ma[0] * mb[0]))
            bound = np.abs(c) ** (M_NODES + 1) * np.sqrt(ta * tb)
            ok = bound <= 1e-15 * np.maximum(np.abs(v), FLOOR * cs)
        if not ok.all():
            bad = ~ok
            if _natural(f, g, s1, s2):      # the engine's large-variance rule, all nodes at once
                even = f.rstrip("'") == "tanh" and g.rstrip("'") == "tanh" and (len(f) - len(g)) % 2 == 0
                v[bad] = wide_pair_batch(f, g, q1, k12[bad], q2, even=even,
                                         omc=None if omc is None else omc[bad])
            else:
                v[bad] = expect2(f, g, k11[bad], k12[bad], k22[bad], method="trapezoid")
        out.append(v)
    return out


def _reflections(pairs):
    """[(α, β)] with F(−c) = α + β F(c) for every pair, or None. tanh and sigmoid are a constant plus an
    odd function (f = f(0) + o): F(−c) = 2 f(0) g(0) − F(c); their derivatives are even: F(−c) = F(c)."""
    from ..activations import activation

    out = []
    for f, g in pairs:
        if f != g:
            return None
        name = f.rstrip("'")
        order = len(f) - len(name)
        if name not in ("tanh", "sigmoid") or order > 1:
            return None
        if order == 1:
            out.append((0.0, 1.0))
        else:
            f0 = float(activation(name).phi(np.zeros(1))[0])
            out.append((2.0 * f0 * f0, -1.0))
    return out


def _natural(f, g, s1, s2) -> bool:
    """True when :func:`limits.gaussian.expect2` takes its natural-variable rule for (f, g) at these standard
    deviations (the z-space trapezoid would need more than ``SWITCH`` nodes per dimension)."""
    from .engine import SWITCH, raw_need, resolve

    sf, sg = resolve(f)[3], resolve(g)[3]
    return bool(raw_need(max(s1 / sf, s2 / sg)) > SWITCH)


def _seed(q: float, half: bool = False):
    """Initial panels: [−½, 0], [0, ½] and panels graded geometrically (ratio 2) towards ±1 down to a
    width ~ 1/(4q) (where F has its structure at large variance); bisection refines from there."""
    K = max(0, int(np.ceil(np.log2(max(q, 1.0))))) + 1
    w = 0.5 * 0.5 ** np.arange(K + 1)                  # distances 1 − |c| of the edges
    right = [(1.0 - w[k], 1.0 - w[k + 1]) for k in range(K)] + [(1.0 - w[K], 1.0)]
    if half:                  # in w = 1 − c ∈ [0, 1] (F(−c) by reflection), ascending
        return [(0.0, 1.0 - a) if b == 1.0 else (1.0 - b, 1.0 - a) for a, b in reversed(right)] + [(0.5, 1.0)]
    left = [(-b, -a) for a, b in right]
    return left + [(-0.5, 0.0), (0.0, 0.5)] + right


def build(pairs, q1: float, q2: float, max_panels: int = MAX_PANELS):
    """PairInterpolant of the pairs ``[(f, g), ...]`` (names accepted by :func:`limits.gaussian.expect2`)
    at variances (q1, q2), or None when the certificate is not reached within ``max_panels`` panels."""
    from .engine import expect2

    key = (tuple(pairs), float(q1), float(q2))
    if key in _CACHE:                        # a failed build is remembered too (None)
        _CACHE.move_to_end(key)
        stats["cache_hits"] += 1
        return _CACHE[key]
    stats["builds"] += 1
    m = len(pairs)
    cs = np.array([np.sqrt(abs(float(expect2(f, f, q1, q1, q1))) * abs(float(expect2(g, g, q2, q2, q2))))
                   for f, g in pairs])
    stats["engine_evaluations"] += 2 * m
    floor = FLOOR * cs
    refl = _reflections(pairs)
    pending = [(a_, b_, np.inf) for a_, b_ in _seed(max(q1, q2), half=refl is not None)]
    done = []                 # (lo, hi, coef (m, DEG+1), err (m,))
    evaluations = 0
    while pending:
        if len(done) + len(pending) > max_panels or evaluations > MAX_EVALUATIONS:
            return _remember(key, None)
        lo = np.array([p[0] for p in pending])
        hi = np.array([p[1] for p in pending])
        if np.any(hi - lo < 1e-15):
            return _remember(key, None)
        mid, half = 0.5 * (hi + lo), 0.5 * (hi - lo)
        pts = np.concatenate([NODES, _CHECK])
        x = np.clip(mid[:, None] + half[:, None] * pts[None, :], -1.0, 1.0)
        if refl is not None:     # x = w = 1 − c: the engine gets 1 − c exactly (conditional variances
            c = 1.0 - x          # q(1 − c²) without cancellation; F varies on the scale 1/q there)
            vals = _engine(pairs, q1, q2, c.ravel(), omc=x.ravel())
        else:
            c = x
            vals = _engine(pairs, q1, q2, c.ravel())
        evaluations += m * c.size
        nxt = []
        for i, (a_, b_, parent) in enumerate(pending):
            coef = np.empty((m, DEG + 1))
            err = np.empty(m)
            plateau = True
            for r in range(m):
                v = vals[r].reshape(c.shape)[i]
                fv, chk = v[: DEG + 1], v[DEG + 1:]
                a = _DCT @ fv
                approx = _clenshaw(a, _CHECK)
                allowed_nodes = TOL * max(float(np.min(np.abs(fv))), floor[r])
                allowed_chk = TOL * np.maximum(np.abs(chk), floor[r])
                e1 = (abs(a[-1]) + abs(a[-2])) / allowed_nodes
                e2 = float(np.max(np.abs(approx - chk) / allowed_chk))
                coef[r] = a
                err[r] = max(e1, e2)
                # Chebyshev coefficients that stopped decaying: the node values' scatter, not resolution
                plateau &= err[r] <= 1.0 or max(abs(a[-1]), abs(a[-2])) >= 0.5 * max(abs(a[-3]), abs(a[-4]))
            worst = float(np.max(err))
            # accepted when certified, or when bisection no longer reduces the error (the node values'
            # own scatter dominates: the engine is certified to ≤ 1e-10) and it is below NOISE_MAX
            if worst <= 1.0 or ((plateau or worst > 0.25 * parent) and worst * TOL <= NOISE_MAX):
                done.append((a_, b_, coef, err))
            else:
                mm = 0.5 * (a_ + b_)
                nxt += [(a_, mm, worst), (mm, b_, worst)]
        pending = nxt
    done.sort(key=lambda p: p[0])
    edges = np.array([p[0] for p in done] + [1.0])
    coef = np.stack([p[2] for p in done], axis=1)
    err = np.max(np.stack([p[3] for p in done]), axis=0)
    return _remember(key, PairInterpolant(edges, coef, err, evaluations, refl))


def _remember(key, itp):
    _CACHE[key] = itp
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return itp


def groups(d, rtol: float = GROUP_RTOL):
    """(labels, representatives): diagonal values grouped when bitwise equal or within a relative
    spread ``rtol`` (consecutive sorted values, the whole group's spread bounded)."""
    d = np.asarray(d, dtype=np.float64)
    u, inv = np.unique(d, return_inverse=True)
    lab = np.empty(u.size, dtype=np.int64)
    reps = []
    g = -1
    start = None
    for i, x in enumerate(u):
        if start is None or x - start > rtol * max(abs(start), 1e-300):
            g += 1
            start = x
            reps.append([x])
        else:
            reps[-1].append(x)
        lab[i] = g
    rep = np.array([r[len(r) // 2] for r in reps])
    return lab[inv], rep


def _tanh_form(pairs):
    """sigmoid(x) = ½ + ½ tanh(x/2), sigmoid'(x) = ¼ tanh'(x/2): a sigmoid Gram at variance q is an affine
    image of the tanh Gram at q/4 (exact; q/4 is exact in binary), E[σσ] = ¼ + ¼ E[tanh tanh],
    E[σ'σ'] = E[tanh' tanh']/16 — one interpolant (with tanh's half-grid symmetry) serves both.
    Returns (pairs to build, variance factor, [(a, b)] with F = a + b F_built)."""
    if all(f.rstrip("'") == "sigmoid" for f, _ in pairs):
        return ([(f.replace("sigmoid", "tanh"), g.replace("sigmoid", "tanh")) for f, g in pairs], 0.25,
                [(0.25, 0.25) if f == "sigmoid" else (0.0, 1.0 / 16.0) for f, _ in pairs])
    return pairs, 1.0, None


def _affine(vals, aff):
    if aff is None:
        return vals
    out = []
    for v, (a, b) in zip(vals, aff):
        v *= b
        if a != 0.0:
            v += a
        out.append(v)
    return out


def _valid(c) -> bool:
    """|c| ≤ 1 within the engine's PSD tolerance (else the caller's path raises its ValueError)."""
    return bool(np.all(np.abs(c) <= 1.0 + 1e-10))


def gram(pairs, K, min_size: int = 64, max_groups: int = 4, diag=None):
    """P×P matrices E_{N(0,K)}[f_j(u_α) g_j(u_β)] for the pairs ``[(f, g), ...]`` (f_j, g_j names of
    registered smooth activations or derivatives; each pair symmetric in the sense f_j = g_j), or None
    when this route does not apply (P < ``min_size``, more than ``max_groups`` variance groups, a
    non-positive variance, or an interpolant that does not certify) — the caller then keeps its path.
    ``diag`` (optional): callable q ↦ list of the m diagonal values at variances q (default: the engine)."""
    from .engine import expect2

    K = np.asarray(K, dtype=np.float64)
    P = K.shape[0]
    if P < min_size or any(f != g for f, g in pairs):
        return None
    d = np.diag(K).copy()
    if not np.all(d > 0.0) or not np.all(np.isfinite(K)):
        return None
    lab, rep = groups(d)
    G = rep.size
    bpairs, qfac, aff = _tanh_form(pairs)
    if G > max_groups:
        return None
    itps = {}
    for a in range(G):
        for b in range(a, G):
            itp = build(bpairs, float(rep[a]) * qfac, float(rep[b]) * qfac)
            if itp is None:
                return None
            itps[a, b] = itp
    s = np.sqrt(d)
    m = len(pairs)
    outs = [np.empty((P, P)) for _ in range(m)]
    if G == 1:
        # strict upper triangle, row by row (contiguous slices: no index arrays)
        C = K / np.multiply.outer(s, s)
        c = np.concatenate([C[i, i + 1:] for i in range(P - 1)]) if P > 1 else np.empty(0)
        if not _valid(c):
            return None
        vals = _affine(itps[0, 0](c), aff)
        for o, v in zip(outs, vals):
            off = 0
            for i in range(P - 1):
                n = P - 1 - i
                o[i, i + 1:] = v[off:off + n]
                o[i + 1:, i] = v[off:off + n]
                off += n
    else:
        idx = [np.nonzero(lab == a)[0] for a in range(G)]
        for (a, b), itp in itps.items():
            I, J = idx[a], idx[b]
            if a == b:
                r, q = np.triu_indices(I.size, 1)
                ii, jj = I[r], I[q]
            else:
                ii, jj = (x.ravel() for x in np.meshgrid(I, J, indexing="ij"))
            if ii.size == 0:
                continue
            c = K[ii, jj] / (s[ii] * s[jj])
            if not _valid(c):
                return None
            vals = _affine(itp(c), aff)
            for o, v in zip(outs, vals):
                o[ii, jj] = v
                o[jj, ii] = v
    # the diagonal (c = 1) at each entry's own variance, by the engine's per-entry rule (as the general
    # Gram path does, so the layer variances of a recursion are unchanged)
    u, inv = np.unique(d, return_inverse=True)         # (the per-entry rule: one value per distinct d)
    if diag is None:
        dv = [np.asarray(expect2(f, g, u, u, u, method="trapezoid"), dtype=np.float64).reshape(u.shape)[inv]
              for f, g in pairs]
    else:
        dv = [np.asarray(x, dtype=np.float64).reshape(u.shape)[inv] for x in diag(u)]
    for o, v in zip(outs, dv):
        np.fill_diagonal(o, v)
    return outs
