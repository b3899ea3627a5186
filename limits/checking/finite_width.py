"""``limits.check`` of the O(1/N) finite-width corrections (:func:`limits.kernels.finite_width`).

Finite side, per width N and ``inits`` initialisations of ``model.finite(N)``: the read-out kernel
E[f fᵀ | h^L] = σ²_w,out φ(h^L)φ(h^L)ᵀ/N + σ²_b,out (Rao–Blackwellised f fᵀ, same mean), optionally
the stream Grams h^l h^lᵀ/N (``layers=True``), and the empirical NTK (NTK parameterisation). Per entry
the means are fitted by weighted least squares E[K_N] = a + b/N (+ c/N² with ``quadratic=True``),
giving two tests:

* the limit: z_a = (a − K)/se(a);
* the slope: z_b = (b − K1)/se(b), the O(1/N) correction itself.

Both are compared with a Bonferroni threshold over all tested numbers (family-wise ``alpha``). The
power of the slope test: the probability that a prediction off by ``rel_error`` (10 %) of K1 would be
rejected by the slope test of the best-measured entry (largest abs(K1)/se(b)) at the Bonferroni
threshold z: Φ(δ − z) + Φ(−δ − z), δ = rel_error·abs(K1)/se(b) (``power``; a lower bound for a scale error
of the whole K1, which every entry sees), and the smallest relative error of K1 detected with 80 %
probability, (z + z₀.₈)·se(b)/abs(K1) (``detectable``). ``width_for_tol``: the width from which
the infinite-width prediction is within ``tol`` of E[K_N] (max abs(K1)/(tol·abs(K))), and whether the
corrected prediction K + K1/N is within ``tol``·abs(K) of the measured means at every width from it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from ..results import Result
from ..stats import control_variate
from .core import register, spawn_seeds


@dataclass(frozen=True)
class FiniteWidthCheck(Result):
    """Slope check of O(1/N) corrections (module docstring). Arrays over entries: ``K``, ``K1``
    (theory), ``a``/``a_se``/``z_a``, ``b``/``b_se``/``z_b``; over (width, entry): ``mean``, ``se``."""

    labels: tuple
    widths: np.ndarray
    inits: int
    K: np.ndarray
    K1: np.ndarray
    mean: np.ndarray
    se: np.ndarray
    a: np.ndarray
    a_se: np.ndarray
    z_a: np.ndarray
    b: np.ndarray
    b_se: np.ndarray
    z_b: np.ndarray
    chi2_dof: np.ndarray
    z_crit: float
    power: float
    detectable: float
    rel_error: float
    tol: float
    width_for_tol: int
    corrected_within_tol: bool
    passed: bool
    reasons: tuple
    model: dict
    seed: int
    seconds: float
    details: dict = field(default_factory=dict)

    def to_markdown(self) -> str:
        ok = "PASS" if self.passed else "FAIL"
        rows = [f"### check: O(1/N) corrections — **{ok}**", "",
                f"model: {self.details.get('model_text', '')}; widths {list(map(int, self.widths))}, "
                f"{self.inits} inits each", "",
                "| entry | K (theory) | a (fit) | z_a | K1 (theory) | b (fit) ± se | z_b |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        for i, lab in enumerate(self.labels):
            rows.append(f"| {lab} | {self.K[i]:.5g} | {self.a[i]:.5g} ± {self.a_se[i]:.2g} | {self.z_a[i]:+.2f} | "
                        f"{self.K1[i]:+.4g} | {self.b[i]:+.4g} ± {self.b_se[i]:.2g} | {self.z_b[i]:+.2f} |")
        rows += ["", f"Bonferroni |z| < {self.z_crit:.2f}; power to detect a {self.rel_error:.0%} error in K1: "
                 f"{self.power:.2f}; smallest relative K1 error detected with 80 %: {self.detectable:.1%}",
                 f"width from which the N → ∞ prediction is within {self.tol:.2%} on every tested entry: "
                 f"N ≥ {self.width_for_tol}{self._width_breakdown()}; "
                 f"corrected prediction K + K1/N within {self.tol:.2%} at the measured widths ≥ it: "
                 f"{self.corrected_within_tol}"]
        if self.reasons:
            rows += ["", "Failed because: " + "; ".join(self.reasons)]
        return "\n".join(rows)

    def __str__(self):
        return self.to_markdown()

    def __repr__(self):
        return (f"FiniteWidthCheck({'PASS' if self.passed else 'FAIL'}: {len(self.labels)} entries at widths "
                f"{list(map(int, self.widths))}, {self.inits} inits; worst |z_a| = {np.max(np.abs(self.z_a)):.2f}, "
                f"|z_b| = {np.max(np.abs(self.z_b)):.2f} (< {self.z_crit:.2f}); detects K1 errors ≥ "
                f"{self.detectable:.1%}; within {self.tol:.2%} from N ≥ {self.width_for_tol}{self._width_breakdown()})")

    def _width_breakdown(self) -> str:
        """' (read-out NNGP: N ≥ 20, FiniteWidth.width_for(tol); NTK: N ≥ 52, width_for(tol, "Theta"))'."""
        per = self.details.get("width_for_tol_per_kernel") or {}
        if len(per) < 2:
            return ""
        call = {"read-out NNGP": "width_for(tol)", "NTK": 'width_for(tol, "Theta")',
                "stream Grams": 'width_for(tol, "K_layers")'}
        return " (" + "; ".join(f"{k}: N ≥ {v}, FiniteWidth.{call.get(k, '')}" for k, v in per.items()) + ")"

    def plot(self, target=None):
        """Left: fitted slope b ± 2 SE against the predicted K1 per entry (the O(1/N) test); right: the
        measured relative deviation abs(E[K_N] − K)/abs(K) of the worst entries against N with the predicted
        abs(K1)/(N abs(K)). ``target``: a path, an Axes or None (:func:`limits.style.plot_target`); returns the Figure."""
        from ..style import PALETTE, plot_target

        pt = plot_target(target, 2, figsize=(9.0, 3.6), what="FiniteWidthCheck.plot")
        a1, a2 = pt.axes
        lo, hi = float(min(self.K1.min(), self.b.min())), float(max(self.K1.max(), self.b.max()))
        pad = 0.05 * (hi - lo + 1e-12)
        a1.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.6", lw=1, label="fit = theory")
        a1.errorbar(self.K1, self.b, yerr=2 * self.b_se, fmt="o", ms=3, label="fitted b ± 2 SE")
        a1.set_xlabel("K1 (theory)")
        a1.set_ylabel("b (fit of E[K_N] = a + b/N)")
        a1.set_title(f"slope test: worst |z_b| = {np.max(np.abs(self.z_b)):.2f} (< {self.z_crit:.2f})", fontsize=8)
        a1.legend(fontsize=7)
        N = self.widths.astype(float)
        scale = np.maximum(np.abs(self.K), 1e-300)
        worst = np.argsort(-np.abs(self.K1) / scale)[:3]
        for k, j in enumerate(worst):
            c = PALETTE[k % len(PALETTE)]
            a2.errorbar(N, np.abs(self.mean[:, j] - self.K[j]) / scale[j], yerr=2 * self.se[:, j] / scale[j], fmt="o",
                        ms=3, color=c, label=f"{self.labels[j]} (±2 SE)")
            a2.plot(N, np.abs(self.K1[j]) / (N * scale[j]), "--", color=c, lw=1)
        a2.axhline(self.tol, color="0.5", lw=0.8, ls=":", label=f"tol {self.tol:.0%}")
        a2.set_xscale("log")
        a2.set_yscale("log")
        a2.set_xlabel("width N")
        a2.set_ylabel("|E[K_N] − K| / |K|  (dashed: |K1|/(N|K|))")
        a2.legend(fontsize=6)
        pt.fig.suptitle(f"O(1/N) corrections — {'PASS' if self.passed else 'FAIL'}", fontsize=9)
        return pt.finish()


def fit_slope(widths, means, ses, quadratic=False):
    """Per column: weighted least squares mean_N = a + b/N (+ c/N²); returns a, se(a), b, se(b), χ²/dof.
    The standard errors are the WLS ones (not inflated by χ²: a bad fit is reported, not absorbed)."""
    N = np.asarray(widths, dtype=float)
    cols = [np.ones_like(N), 1.0 / N] + ([1.0 / N ** 2] if quadratic else [])
    A = np.stack(cols, axis=1)
    if N.size < A.shape[1]:
        raise ValueError(f"widths: the fit needs at least {A.shape[1]} widths, got {N.size}")
    dof = max(N.size - A.shape[1], 1)
    out = np.zeros((5, means.shape[1]))
    for j in range(means.shape[1]):
        w = 1.0 / np.maximum(ses[:, j], 1e-300)
        Aw = A * w[:, None]
        coef, *_ = np.linalg.lstsq(Aw, means[:, j] * w, rcond=None)
        cov = np.linalg.inv(Aw.T @ Aw)
        r = means[:, j] * w - Aw @ coef
        out[:, j] = coef[0], np.sqrt(cov[0, 0]), coef[1], np.sqrt(cov[1, 1]), float(r @ r) / dof
    return out


def _gram(a):
    return np.matmul(a, a.transpose(0, 2, 1)) / a.shape[-1]


def _forward_samples(model, net, Z, S, seed, ntk):
    """Per init: φ(h^l)φ(h^l)ᵀ/N (S, L+1, P, P), stream Grams h^l h^lᵀ/N (S, L+1, P, P) and, with
    ``ntk``, the empirical NTK (S, P, P) of the SAME networks (weight-free conditional sampler)."""
    from ..finite import empirical_kernels
    from ..finite.forward import forward
    from ..finite.ntk import ConditionalWeights, assemble_ntk
    from ..finite.weights import init_streams

    L = model.depth
    if not ntk:
        ek = empirical_kernels(net, Z, S, seed=seed, keep_samples=True, phi_kernels=True)
        return ek.K_phi, ek.K, None, None
    streams = init_streams(S, seed=seed)
    N, P = net.width, Z.shape[0]
    chunk = max(1, min(S, int(256 * 2**20 // (64.0 * (L + 2) * P * (N + P)))))
    Kphi, G, T, Gd = [], [], [], []
    dphi = model.act.dphi
    for st in range(0, S, chunk):
        w = ConditionalWeights(net, streams[st:st + chunk], P)
        fwd = forward(net, w, Z, check=False)
        T.append(assemble_ntk(net, w, fwd, 0, False, False))
        Kphi.append(np.stack([_gram(fwd.inp[f"{l + 1}.1"]) for l in range(L)] + [_gram(fwd.inp["out"])], axis=1))
        G.append(np.stack([_gram(h) for h in fwd.h], axis=1))
        Gd.append(np.stack([_gram(dphi(h)) for h in fwd.h], axis=1))
    return np.concatenate(Kphi), np.concatenate(G), np.concatenate(T), np.concatenate(Gd)


def _pair_F(act, C, derivative=False):
    """E_{N(0,C)}[φφᵀ] (or E[φ'φ'ᵀ]) for a stack of P×P covariances C (…, P, P), entry by entry."""
    from ..kernels.expectations import pair_dkernel, pair_kernel

    if derivative:
        pair_kernel = pair_dkernel  # noqa: F811 — same signature

    d = np.diagonal(C, axis1=-2, axis2=-1)
    k11 = np.broadcast_to(d[..., :, None], C.shape)
    k22 = np.broadcast_to(d[..., None, :], C.shape)
    P = C.shape[-1]
    iu = np.triu_indices(P)
    vals = pair_kernel(act, k11[..., iu[0], iu[1]].ravel(), C[..., iu[0], iu[1]].ravel(),
                       k22[..., iu[0], iu[1]].ravel()).reshape(C.shape[:-2] + (iu[0].size,))
    out = np.empty_like(C)
    out[..., iu[0], iu[1]] = vals
    out[..., iu[1], iu[0]] = vals
    return out


def _controls(model, Z, Kphi, G, Gd=None):
    """Per-init regressors with mean exactly 0 at every width (martingale differences of the forward
    pass; ``Gd`` = φ'(h^l)φ'(h^l)ᵀ/N adds ν^l for MLPs): η^l = G^l − E[G^l | layer l−1] (stream Gram
    sampling noise; MLP: G^l − C^l, ResNet: G^l − G^{l−1} − C^l, η⁰ = G⁰ − K⁰) and, for MLPs, ξ^l = C^l − s_l F(C^{l−1}) − b_l with F computed
    exactly from the sampled C^{l−1} (C⁰ = K⁰). No theory enters: they only remove variance."""
    v = model.variances()
    L = model.depth
    r2 = model.branch ** 2
    s = [r2 * v["sigma_w2"]] * L + [v["sigma_w2_out"]]
    b = [r2 * v["sigma_b2"]] * L + [v["sigma_b2_out"]]
    K0 = v["sigma_w2_in"] * (Z @ Z.T) / Z.shape[1] + v["sigma_b2_in"]
    C = [s[l] * Kphi[:, l] + b[l] for l in range(L + 1)]         # C^{l+1}, l = 0..L
    iu = np.triu_indices(Z.shape[0])
    cols = [(G[:, 0] - K0)[:, iu[0], iu[1]]]
    for l in range(1, L + 1):
        eta = G[:, l] - C[l - 1] - (G[:, l - 1] if model.residual else 0.0)
        cols.append(eta[:, iu[0], iu[1]])
    if not model.residual:
        prev = np.broadcast_to(K0, C[0].shape)
        for l in range(L + 1):
            xi = C[l] - s[l] * _pair_F(model.act, prev) - b[l]
            cols.append(xi[:, iu[0], iu[1]])
            if Gd is not None:          # ν^l = φ'φ'(h^l)ᵀ/N − E_{N(0,C^l)}[φ'φ'] (NTK sampling noise)
                nu = Gd[:, l] - _pair_F(model.act, prev, derivative=True)
                cols.append(nu[:, iu[0], iu[1]])
            prev = C[l]
    return C, np.concatenate(cols, axis=1)


def measure(model, X, widths, inits, seed, *, layers=False, ntk=True, X2=None, control=True):
    """Per width: (labels, per-init samples (inits × entries)) of the read-out kernel E[f fᵀ|h^L],
    stream Grams (``layers``) and NTK (``ntk``); X2: the cross entries X × X2 only. ``control``:
    subtract exactly-mean-zero control variates (:func:`_controls`) — same means, far smaller spread."""
    P1 = X.shape[0]
    Z = X if X2 is None else np.vstack([X, X2])
    if X2 is None:
        i, j = np.triu_indices(P1)
    else:
        ii, jj = np.meshgrid(np.arange(P1), np.arange(X2.shape[0]), indexing="ij")
        i, j = ii.ravel(), P1 + jj.ravel()
    ent = [f"[{a},{b - (0 if X2 is None else P1)}]" for a, b in zip(i, j)]
    L = model.depth
    lay = list(range(1, L + 1)) if layers else []
    labels = [f"K^{l}{e}" for l in lay for e in ent] + [f"K_out{e}" for e in ent]
    if ntk:
        labels += [f"Θ{e}" for e in ent]
    seeds = spawn_seeds(seed, len(widths))
    samples = []
    for k, N in enumerate(widths):
        net = model.finite(int(N))
        Kphi, G, T, Gd = _forward_samples(model, net, Z, int(inits), seeds[k], ntk)
        C, R = _controls(model, Z, Kphi, G, Gd)
        parts = [G[:, l, i, j] for l in lay] + [C[L][:, i, j]] + ([T[:, i, j]] if ntk else [])
        Y = np.concatenate(parts, axis=1)
        samples.append(control_variate(Y, R) if control else Y)
    return labels, samples


def _grams(x):
    """Channel Grams over (input, position) per network: x (S, P, *spatial, C) → (S, P·|spatial|, P·|spatial|)."""
    z = x.reshape(x.shape[0], -1, x.shape[-1])
    return np.matmul(z, z.transpose(0, 2, 1)) / x.shape[-1]


def _chain_mean(chain, G, P, spatial):
    """E[Ĝ_next | Ĝ] for a batch of channel Grams Ĝ (S, n, n) read by ``chain`` = [Dense/Conv, (pool), Activation,
    (pool)…] up to the next parametric layer: the layers' own linear rules (position operators) and E[φφ] under
    the sampled covariance (exact Gaussian expectations); Identity is skipped."""
    from ..kernels.expectations import pair_kernel
    from ..kernels.layer_operators import position_operator

    sp = tuple(spatial)
    for layer in chain:
        if type(layer).__name__ == "Identity":
            continue
        if type(layer).__name__ == "Activation":
            d = np.diagonal(G, axis1=1, axis2=2)
            G = pair_kernel(layer.act, d[:, :, None], G, d[:, None, :])
            continue
        S = int(np.prod(sp)) if sp else 1
        Lpos, sp, bias = position_operator(layer, sp, "check")
        Sp = int(np.prod(sp)) if sp else 1
        B = G.reshape(-1, P, S, P, S)
        G = np.einsum("abij,spiqj->spaqb", Lpos.reshape(Sp, Sp, S, S), B).reshape(-1, P * Sp, P * Sp) + bias
    return G


_BRANCH_LAYERS = ("Activation", "AvgPool", "Dense", "Conv", "Identity")   # what a checked Residual branch may hold
_CHAIN_LAYERS = ("Activation", "AvgPool", "GlobalAvgPool", "Flatten", "Identity")   # channel-wise, between a ξ's ends
_POOLS = ("AvgPool", "GlobalAvgPool", "Identity")      # linear and per channel: may precede the Activation of a ζ


@dataclass(frozen=True)
class _Zeta:
    """Parametric layer ``b`` reads the stream after Residual block ``r`` (x + ρy, y = output of parametric layer
    ``last``) through ``pre`` (pooling), ``act`` (erf or relu) and ``post`` (channel-wise linear layers)."""

    r: int
    rho: float
    last: int
    b: int
    pre: tuple
    act: object
    post: tuple


@dataclass(frozen=True)
class _Layout:
    """The parametric layers of a composition in forward order, branches included: ``par`` = ((layer, spatial
    shape of its input), …), the last one the read-out; ``xi`` = ((a, b, chain), …): parametric layer b reads
    parametric layer a's output through ``chain`` = [layer a, channel-wise layers with one Activation];
    ``zeta``: the :class:`_Zeta` chains that read the stream after a Residual block; ``stream``: per Residual block
    the spatial shape of its input."""

    par: tuple
    xi: tuple
    zeta: tuple
    stream: tuple


def _one_act(layers):
    acts = [k for k, l in enumerate(layers) if type(l).__name__ == "Activation"]
    return acts[0] if len(acts) == 1 else None


def _layout(S, in_shape) -> _Layout:
    """Walk ``S.plan`` (:class:`_Layout`). A tensor is *fresh* while it is a channel-wise function (Activation,
    pooling, Flatten, Identity) of one Dense/Conv output — Gaussian given that layer's input, so E[Ĝ | Ĝ_in] is the
    layers' rules (ξ). A Residual's branch reads the stream: fresh before the first block after a Dense/Conv; after
    a block it is x + ρy, not Gaussian given its Gram (no ξ), but y is Gaussian given x and the branch's last input:
    a chain [pooling, erf or relu, channel-wise linear] reading it gets a ζ (:func:`_shifted_rule`)."""
    from ..layers import Residual

    par, xi, zeta, stream = [], [], [], []

    def visit(layer, sin, src):
        name = type(layer).__name__
        if name == "Attention":
            raise ValueError("check: the finite-width check of a composition covers Dense and Conv layers; "
                             "it cannot treat Attention")
        if layer.parametric:
            k = len(par)
            par.append((layer, tuple(sin[:-1])))
            kind, origin, chain = src if src is not None else (None, None, [])
            q = _one_act(chain)
            if kind == "fresh" and q is not None:
                xi.append((origin, k, (par[origin][0],) + tuple(chain)))
            elif (kind == "stream" and q is not None and _shifted_rule(chain[q].act) is not None
                  and all(type(l).__name__ in _POOLS for l in chain[:q])):
                r, rho, last = origin
                zeta.append(_Zeta(r, rho, last, k, tuple(chain[:q]), chain[q], tuple(chain[q + 1:])))
            return "fresh", k, []
        if src is not None and name in _CHAIN_LAYERS:
            return src[0], src[1], src[2] + [layer]
        return None

    src = None
    for i, (layer, sin, _, sub) in enumerate(S.plan(tuple(in_shape), 2)):
        if not isinstance(layer, Residual):
            src = visit(layer, sin, src)
            continue
        for bl in layer.branch.layers:
            if type(bl).__name__ not in _BRANCH_LAYERS:
                raise ValueError(f"check: layer {i} (Residual): its branch holds {type(bl).__name__}; the finite-width "
                                 f"check treats branches of {', '.join(_BRANCH_LAYERS)} only")
        b = src
        for bl, bsin, _, _ in sub:
            b = visit(bl, bsin, b)
        src = "stream", (len(stream), layer.rho, len(par) - 1), []
        stream.append(tuple(sin[:-1]))
    return _Layout(tuple(par), tuple(xi), tuple(zeta), tuple(stream))


def _erf_shifted_gram(m, C):
    """(1/N) Σ_c E[erf(m_c + e) erf(m_c + e)ᵀ], e ~ N(0, C), per network: m (S, n, N) the channels' means, C
    (S, n, n). Per pair (a, b) one Gaussian variable in closed form, E_z[erf(μ + σz)] = erf(μ/√(1 + 2σ²)), the other
    by the trapezoid rule in z on [−8.5, 8.5] with step 4π/(33 max σ) (erf is analytic in a strip of half-width 2
    around the real axis: error ≈ e^−33 relative)."""
    from scipy.special import erf

    d = np.sqrt(np.maximum(np.diagonal(C, axis1=1, axis2=2), 0.0))
    h = min(4.0 * np.pi / (33.0 * max(float(d.max()), 1e-6)), 0.45)
    z = np.linspace(-8.5, 8.5, 2 * int(np.ceil(8.5 / h)) + 1)
    w = (z[1] - z[0]) * np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)
    n, N = m.shape[1], m.shape[2]
    out = np.empty(C.shape)
    for a in range(n):
        A = erf(m[:, a, :, None] + d[:, a, None, None] * z) * w
        for b in range(a, n):
            r = C[:, a, b] / np.maximum(d[:, a] * d[:, b], 1e-300)
            v = np.sqrt(1.0 + 2.0 * d[:, b] ** 2 * np.maximum(1.0 - r * r, 0.0))
            B = erf((m[:, b, :, None] + (d[:, b] * r)[:, None, None] * z) / v[:, None, None])
            out[:, a, b] = out[:, b, a] = np.einsum("scz,scz->s", A, B) / N
    return out


def _relu_shifted_gram(m, C):
    """(1/N) Σ_c E[relu(m_c + e) relu(m_c + e)ᵀ], e ~ N(0, C), per network (shapes as :func:`_erf_shifted_gram`), in
    closed form: the truncated normal moments of :mod:`limits.kernels.relu_fourpoint` (``moment1`` with p = 2 on the
    diagonal, ``moment2`` off it; the orthant by Owen's T)."""
    from ..kernels.relu_fourpoint import moment1, moment2

    d = np.sqrt(np.maximum(np.diagonal(C, axis1=1, axis2=2), 1e-300))
    n = m.shape[1]
    out = np.empty(C.shape)
    for a in range(n):
        sa = d[:, a, None]
        out[:, a, a] = moment1(m[:, a], sa, 2).mean(axis=1)
        for b in range(a + 1, n):
            sb = d[:, b, None]
            r = np.clip(C[:, a, b, None] / (sa * sb), -1 + 1e-12, 1 - 1e-12)
            out[:, a, b] = out[:, b, a] = moment2(m[:, a], m[:, b], sa, sb, r, 1, 1).mean(axis=1)
    return out


def _shifted_rule(act):
    """The closed-form E[φφᵀ] of shifted Gaussian channels for the built-in erf and relu, else None."""
    from ..kernels.expectations import activation_name, is_builtin_activation

    if not is_builtin_activation(act):
        return None
    return {"erf": _erf_shifted_gram, "relu": _relu_shifted_gram}.get(activation_name(act))


def _zeta_mean(zt, x, G_last, P, layout):
    """E[Ĝ_in^b | x, the branch's last input] for the chain ``zt`` (:class:`_Zeta`) reading x + ρy, y = the last
    branch layer's output: channels of ρy iid N(0, ρ² (s L Ĝ + b)); pooling maps the mean and the covariance."""
    layer, sp = layout.par[zt.last]
    C = zt.rho ** 2 * _chain_mean([layer], G_last, P, sp)
    C = _chain_mean(zt.pre, C, P, layout.stream[zt.r])
    for l in zt.pre:
        x, _ = l.apply({}, x)
    G = _shifted_rule(zt.act.act)(x.reshape(x.shape[0], -1, x.shape[-1]), C)
    return _chain_mean(zt.post, G, P, x.shape[2:-1])


def _cross_grams(x, y):
    """(1/C) Σ_c (x_c y_cᵀ + y_c x_cᵀ) over (input, position) per network (S, n, n)."""
    a = x.reshape(x.shape[0], -1, x.shape[-1])
    c = y.reshape(a.shape)
    xy = np.matmul(a, c.transpose(0, 2, 1))
    return (xy + xy.transpose(0, 2, 1)) / x.shape[-1]


def _forward_record(layers, params, x):
    """The finite forward pass of ``layers`` (a composition's, Residual branches applied layer by layer: y = x + ρ ·
    branch(x)) and, in forward order, every parametric layer's input and output channel Grams, every Residual's
    cross Gram of its input x and branch output y (:func:`_cross_grams`) and its input x. Returns (f, ins, outs,
    cross, xs)."""
    from ..layers import Residual

    ins, outs, cross, xs = [], [], [], []

    def run(layer, p, x):
        y, _ = layer.apply(p, x)
        if layer.parametric:
            ins.append(_grams(x))
            outs.append(_grams(y))
        return y

    for layer, p in zip(layers, params):
        if isinstance(layer, Residual):
            y = x
            for bl, bp in zip(layer.branch.layers, p):
                y = run(bl, bp, y)
            cross.append(_cross_grams(x, y))
            xs.append(x)
            x = x + layer.rho * y
        else:
            x = run(layer, p, x)
    return x, ins, outs, cross, xs


def _serial_forward_grams(S, X, width, inits, seed, layout=None, chunk=None):
    """Per network of ``SerialNetwork(S, width)`` (its own weights, init s from stream s of ``seed``): a dict of
    the input and output channel Grams of every parametric layer in forward order, branches included ("ins",
    "outs": lists of (inits, n, n); the read-out's output dropped), every Residual's cross Gram ("cross"), with
    ``layout`` the conditional means of its ζ chains ("zeta", :func:`_zeta_mean`), and the read-out NNGP
    observable E[f fᵀ | last hidden] = σ²_w Ĝ_in + σ²_b ("K", (inits, P, P))."""
    from ..finite.serial import SerialNetwork

    net = SerialNetwork(S, int(width))
    gens = [np.random.default_rng(s) for s in np.random.SeedSequence(int(seed)).spawn(inits)]
    n, N = X.size // X.shape[-1], int(width)
    zetas = layout.zeta if layout is not None else ()
    if chunk is None:                 # ≈ 32 MiB of activations, Grams and quadrature values per layer
        chunk = int(np.clip(2**22 // (n * (N + n) + X.size + (256 * N if zetas else 0)), 1, 256))
    keys = ("ins", "outs", "cross", "zeta")
    recs = {k: [] for k in keys}
    for st in range(0, inits, chunk):
        params = net.init_weights(X.shape[1:], None, streams=gens[st:st + chunk])
        x = np.ascontiguousarray(np.broadcast_to(X[None], (len(gens[st:st + chunk]),) + X.shape))
        _, ins, outs, cross, xs = _forward_record(S.layers, params, x)
        zeta = [_zeta_mean(zt, xs[zt.r], ins[zt.last], X.shape[0], layout) for zt in zetas]
        for k, v in zip(keys, (ins, outs, cross, zeta)):
            recs[k].append(v)
    out = {k: [np.concatenate([r[q] for r in v]) for q in range(len(v[0]))] for k, v in recs.items()}
    last = S.layers[-1]
    out["outs"] = out["outs"][:-1]
    out["K"] = out["ins"][-1] * last.sigma_w2 + last.sigma_b2
    return out


def _serial_controls(layout, rec, P):
    """Regressors (inits × m), each of conditional mean exactly 0 at every width (no theory of the correction):
    η = Ĝ_out − (s L Ĝ_in + b) of every hidden Dense/Conv, branches included (fresh weights given the input);
    per Residual the cross Gram (1/N) Σ_c (x_c y_cᵀ + y_c x_cᵀ) = (Ĝ(x + ρy) − Ĝ(x) − ρ² Ĝ(y))/ρ (y = branch output:
    fresh zero-mean weights given x and the branch's last input); ξ = Ĝ_in^b − E[Ĝ_in^b | Ĝ_in^a] along the fresh
    chains of :func:`_layout` (none reads the stream after a Residual: x + ρy is not Gaussian given its Gram, so
    E[Φ̂ | Ĝ] is not the Gaussian rule there); ζ = Ĝ_in^b − E[Ĝ_in^b | x, branch's last input] along the erf and relu chains
    that read it (:func:`_zeta_mean`). Upper triangles only (the Grams are symmetric)."""
    def tri(G):
        iu = np.triu_indices(G.shape[-1])
        return G[:, iu[0], iu[1]]

    ins = rec["ins"]
    R = [tri(rec["outs"][k] - _chain_mean([layer], ins[k], P, sp)) for k, (layer, sp) in enumerate(layout.par[:-1])]
    R += [tri(c) for c in rec["cross"]]
    R += [tri(ins[b] - _chain_mean(chain, ins[a], P, layout.par[a][1])) for a, b, chain in layout.xi]
    R += [tri(ins[zt.b] - g) for zt, g in zip(layout.zeta, rec["zeta"])]
    return np.concatenate(R, axis=1) if R else None


def _serial_measure(S, X1, X2, widths, inits, seed, control=True):
    """Per width, per network of the composition ``S`` (``limits.finite.serial``): the read-out NNGP observable
    E[f fᵀ | last hidden] (Dense read-out) on the entries the theory reports and, with ``control``, the same minus
    the least-squares fit on the exactly-mean-zero regressors of :func:`_serial_controls` (η of every Dense/Conv,
    the cross Gram of every Residual, ξ along fresh chains, ζ along erf and relu chains reading the stream) — same means,
    smaller spread. Residual branches may
    hold Activation, AvgPool, Dense, Conv and Identity (no nested Residual); anything else is refused by name."""
    if type(S.layers[-1]).__name__ != "Dense":
        raise ValueError("check: a composition's finite-width check needs a Dense read-out (end with Flatten or "
                         "GlobalAvgPool and Dense)")
    X = X1 if X2 is None else np.concatenate([X1, X2])
    P1, P = X1.shape[0], X.shape[0]
    i, j = np.triu_indices(P1) if X2 is None else [a.ravel() for a in np.meshgrid(np.arange(P1), P1 + np.arange(
        X2.shape[0]), indexing="ij")]
    layout = _layout(S, X.shape[1:])
    samples = []
    for w, sd in zip(widths, spawn_seeds(seed, len(widths))):
        rec = _serial_forward_grams(S, X, w, inits, sd, layout if control else None)
        Y = rec["K"][:, i, j]
        R = _serial_controls(layout, rec, P) if control else None
        samples.append(Y if R is None else control_variate(Y, R))
    return [f"K_out[{a},{b - (0 if X2 is None else P1)}]" for a, b in zip(i, j)], samples


def _theory_entries(result, X1, X2, layers, ntk):
    """(K, K1) of every tested entry, and per tested kernel (read-out NNGP, NTK, stream Grams) its (K, K1) —
    the blocks whose ``width_for`` the report gives."""
    if X2 is None:
        iu = np.triu_indices(X1.shape[0])
        pick = lambda A: A[..., iu[0], iu[1]]            # noqa: E731
    else:
        pick = lambda A: A.reshape(A.shape[:-2] + (-1,))  # noqa: E731
    blocks = {"read-out NNGP": (pick(result.K), pick(result.K1))}
    if ntk:
        blocks["NTK"] = (pick(result.Theta), pick(result.Theta1))
    if layers:
        blocks["stream Grams"] = (pick(result.K_layers[1:]).ravel(), pick(result.K1_layers[1:]).ravel())
    th = [pick(result.K_layers[1:]).ravel() if layers else np.zeros(0), pick(result.K)]
    th1 = [pick(result.K1_layers[1:]).ravel() if layers else np.zeros(0), pick(result.K1)]
    if ntk:
        th.append(pick(result.Theta))
        th1.append(pick(result.Theta1))
    return np.concatenate(th), np.concatenate(th1), blocks


@register(lambda r: type(r).__name__ == "FiniteWidth", layers=True)
def check_finite_width(result, widths, inits, seed, *, alpha=0.01, layers=False, ntk=None, tol=0.01,
                       rel_error=0.1, quadratic=False, control=True, model=None, X=None, progress=None,
                       sampler="network"):
    """Check ``result`` (a :class:`limits.kernels.finite_width.FiniteWidth`) against finite networks.
    ``sampler="tangent"`` (MLPs, NTK parameterisation, read-out entries): the networks with their tangent
    network (:mod:`limits.checking.tangent`) — E[Θ | hidden layers] instead of the empirical NTK, so the
    read-out quadratic form's spread is gone and the NTK slope is measured as precisely as the kernel's.
    A composition's result (``limits.serial``, read-out K1) is checked against ``limits.finite.serial`` networks."""
    from ..model import as_model

    rec = result.params
    X1 = np.asarray(X if X is not None else rec["X1"], dtype=float)
    X2 = rec.get("X2") if X is None else None
    X2 = None if X2 is None else np.asarray(X2, dtype=float)
    if ntk is None:
        ntk = result.Theta1 is not None
    if ntk and result.Theta1 is None:
        raise ValueError("check: ntk=True but this result has no Theta1 (parameterisation 'NTK' only)")
    t0 = time.perf_counter()
    if model is None and "model" not in rec and "serial" in rec:
        from ..layers import Serial

        if layers or ntk or sampler != "network":
            raise ValueError("check: a composition's finite-width result is checked on its read-out K1 "
                             "(layers=False, ntk=False, sampler='network')")
        S = Serial.from_dict(rec["serial"])
        labels, samples = _serial_measure(S, X1, X2, widths, inits, seed, control)
        text, mdict = S.describe(), S.to_dict()
    else:
        m = as_model(model if model is not None else rec.get("model"))
        text, mdict = m.describe(), m.to_dict()
        if sampler == "tangent":
            if layers or X2 is not None or not ntk:
                raise ValueError("check: sampler='tangent' measures the read-out K and Θ of X1 (layers=False, no X2, "
                                 "ntk=True)")
            from .tangent import measure_tangent

            labels, samples = measure_tangent(m, X1, widths, inits, seed, control=control)
        elif sampler == "network":
            labels, samples = measure(m, X1, widths, inits, seed, layers=layers, ntk=ntk, X2=X2, control=control)
        else:
            raise ValueError(f"check: sampler must be 'network' or 'tangent', got {sampler!r}")
    K, K1, blocks = _theory_entries(result, X1, X2, layers, ntk)
    return _verdict(labels, samples, K, K1, widths, inits, seed, alpha, tol, rel_error, quadratic,
                    {"model_text": text, "alpha": alpha, "quadratic": bool(quadratic),
                     "control_variates": bool(control), "sampler": sampler}, mdict, time.perf_counter() - t0, blocks)


def _verdict(labels, samples, K, K1, widths, inits, seed, alpha, tol, rel_error, quadratic, details, mdict, secs,
             blocks=None):
    """Fit a + b/N (+ c/N²) per entry, z-tests of the limit and the slope at a Bonferroni threshold, power."""
    mean = np.stack([s.mean(axis=0) for s in samples])
    se = np.stack([s.std(axis=0, ddof=1) / np.sqrt(s.shape[0]) for s in samples])
    se = np.maximum(se, 1e-12 * (np.abs(mean) + 1.0))   # entries the controls make exact (e.g. K^1)
    a, a_se, b, b_se, chi2 = fit_slope(widths, mean, se, quadratic=quadratic)
    z_a = (a - K) / a_se
    z_b = (b - K1) / b_se
    n_tests = 2 * K.size
    z_crit = float(norm.isf(alpha / (2 * n_tests)))
    reasons = []
    if np.max(np.abs(z_a)) > z_crit:
        reasons.append(f"extrapolated limit a differs from K (worst |z| = {np.max(np.abs(z_a)):.2f} at "
                       f"{labels[int(np.argmax(np.abs(z_a)))]})")
    if np.max(np.abs(z_b)) > z_crit:
        reasons.append(f"fitted slope b differs from K1 (worst |z| = {np.max(np.abs(z_b)):.2f} at "
                       f"{labels[int(np.argmax(np.abs(z_b)))]})")
    # power of the slope test against a rel_error relative error of K1
    snr = np.abs(K1) / b_se
    best = float(np.max(snr)) if snr.size else 0.0
    d = rel_error * best
    power = float(norm.cdf(d - z_crit) + norm.cdf(-d - z_crit))
    detectable = float((z_crit + norm.isf(0.2)) / best) if best > 0 else float("inf")
    # the width from which the N → ∞ prediction is within tol, per tested kernel and over all of them
    from ..kernels.finite_width import relative_width

    blocks = {"tested entries": (K, K1)} if blocks is None else blocks
    per_block = {k: relative_width(b, c, float(tol)) for k, (b, c) in blocks.items()}
    n_tol = max(per_block.values())
    widths_arr = np.asarray(widths, dtype=float)
    ok_w = widths_arr >= n_tol
    corr_err = np.abs(mean - (K + K1 / widths_arr[:, None])) - 2 * se
    within = bool(np.all(corr_err[ok_w] <= tol * np.abs(K))) if np.any(ok_w) else True
    return FiniteWidthCheck(tuple(labels), widths_arr, int(inits), K, K1, mean, se, a, a_se, z_a, b, b_se, z_b,
                            chi2, z_crit, power, detectable, float(rel_error), float(tol), n_tol, within,
                            not reasons, tuple(reasons), mdict, int(seed), secs,
                            {**details, "width_for_tol_per_kernel": per_block})
