"""How far is a depth-L, width-N MLP from its kernel limit? (docs/theory/depth_width.rst §6)

:func:`depth_width_report` answers at T = L/N for two inputs of correlation ρ₀:

* ``shaped-relu`` (φ = s₊ max(x,0) + s₋ min(x,0), s± = 1 + c±/√N): the law of the output correlation ρ_L from the
  covariance SDE (:func:`limits.nfd.covariance_sde`, the width-N network's κ_N, step-halving check, Monte Carlo
  SEs by batch means), the first order of the 1/N expansion (:func:`limits.nfd.linear_noise.first_order`: the
  mean K + K1/N and the Gaussian spread), the log-norm N(−T, 2T);
* ``shaped-tanh`` (s tanh(x/s), s = shape·√N, inputs of unit variance): the same with the smooth drift
  (a, b) = (0, −1/(3 shape²)); the NNGP is the continuous-depth skeleton, the log-norm sampled;
* ``relu`` (unshaped, He initialisation): no SDE exists (the NNGP correlation itself collapses); the NNGP and
  K + K1/N of the Gram by :func:`limits.kernels.finite_width`, the log-norm by Hanin–Nica at width N exactly.

The regime (criteria and where their thresholds come from: the theory page and ``regime_rule``):
*degenerate* when the output correlation has collapsed, median (1 − |ρ_L|)/(1 − |ρ₀|) < e⁻⁶, or the output
scale is lost, sd(log V_L) > 6/1.96; else *kernel-like* when the first-order (1/N) prediction's error, in units of
the law's spread (ρ_L's mean and sd; the squared norm's sd), is ≤ D* = :data:`KERNEL_LIKE_MAX_ERROR` (a Monte
Carlo estimate counts with its lower 2-SE bound); else *proportional*.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import finite_float, generator, positive_float, positive_int
from ..results import Result

ACTIVATIONS = ("shaped-relu", "shaped-tanh", "relu")
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
BATCHES = 20
MAX_DEPTH = 100_000                   # the NNGP recursion runs layer by layer: beyond this, minutes of pure Python
# D*: the largest relative error of the first-order spread of ρ that 10⁴ finite networks did not resolve in the
# committed validation (benchmarks/depth_width_regimes.py → benchmarks/results/depth_width/regimes.json; a test
# keeps this equal to the data)
KERNEL_LIKE_MAX_ERROR = 0.040
COLLAPSE_RATIO = float(np.exp(-6.0))     # Schoenholz et al. 2017: trainable depth ≈ 6 correlation depth scales
LOG_NORM_SD_MAX = 6.0 / 1.96            # 95 % of inits keep their output scale within a factor e⁶ of typical


@dataclass(frozen=True)
class DepthWidthReport(Result):
    """Answer of :func:`depth_width_report` (module docstring). Statistics of ρ_L carry Monte Carlo SEs
    (``*_se``); ``gram_*`` are 2×2 (inputs of unit norm): the NNGP, the first order K + K1/N and the SDE mean;
    ``first_order_error`` D (with SE) is max over ρ's mean and sd and the norm's sd of ``|first order − law|`` / the
    law's sd; ``halving``: change of the mean of ρ and of the log-norm when the SDE's step is halved (± SE)."""

    depth: int
    width: int
    T: float
    activation: str
    c_plus: float
    c_minus: float
    kappa: float
    rho0: float
    nngp_rho: float
    rho_mean: float
    rho_mean_se: float
    rho_sd: float
    rho_sd_se: float
    quantile_levels: np.ndarray
    rho_quantiles: np.ndarray
    rho_quantiles_se: np.ndarray
    first_order_rho_mean: float
    first_order_rho_sd: float
    gram_nngp: np.ndarray
    gram_first_order: np.ndarray
    gram_sde: np.ndarray
    gram_sde_se: np.ndarray
    log_norm_mean: float
    log_norm_var: float
    log_norm_source: str
    first_order_error: float
    first_order_error_se: float
    collapse: float
    halving: dict
    regime: str
    reason: str
    paths: int
    steps: int
    seed: int | None
    diagnostics: dict

    def summary(self) -> str:
        """A short human report (what ``limits depth-width`` prints)."""
        return summary(self)


def _activation(name):
    """The allowlisted activation name (resolved once, here)."""
    if not isinstance(name, str) or name.strip().lower().replace("_", "-") not in ACTIVATIONS:
        raise ValueError(f"unknown activation {str(name)[:40]!r}; choose one of: {', '.join(ACTIVATIONS)}")
    return name.strip().lower().replace("_", "-")


def _batch_stats(x, fn):
    """fn(x) and its standard error by batch means over :data:`BATCHES` batches."""
    b = np.array([fn(p) for p in np.array_split(x, BATCHES)])
    return fn(x), b.std(axis=0, ddof=1) / np.sqrt(BATCHES)


def _spread_error(law_mean, law_sd, fo_mean, fo_sd, se_mean, se_sd):
    """D = max(|Δmean|, |Δsd|)/sd and its SE (the SE of the larger term)."""
    dm, ds = abs(fo_mean - law_mean) / law_sd, abs(fo_sd - law_sd) / law_sd
    return (dm, se_mean / law_sd) if dm >= ds else (ds, se_sd * fo_sd / law_sd ** 2)


def norm_error(log_var: float, first_order_var: float) -> float:
    """D of the squared norm's scale: 1 − (first-order sd)/(sd) of V_L/E V_L, the law log-normal with
    variance ``log_var`` (sd² = e^{log_var} − 1), the first order Gaussian with variance ``first_order_var``."""
    return float(1.0 - np.sqrt(first_order_var / np.expm1(log_var))) if log_var > 0 else 0.0


def regime_rule(collapse: float, log_norm_var: float, D: float) -> tuple[str, str]:
    """(regime, reason) from the three criteria of the module docstring."""
    sd = float(np.sqrt(max(log_norm_var, 0.0)))
    if collapse < COLLAPSE_RATIO:
        return "degenerate", (f"correlations collapse: typical (1−|ρ_L|)/(1−|ρ₀|) = {collapse:.2e} < e⁻⁶ "
                              f"= {COLLAPSE_RATIO:.2e}")
    if sd > LOG_NORM_SD_MAX:
        return "degenerate", f"output scale lost: sd(log V_L) = {sd:.2f} > 6/1.96 = {LOG_NORM_SD_MAX:.2f}"
    if D <= KERNEL_LIKE_MAX_ERROR:
        return "kernel-like", (f"the 1/N expansion's (resolved) error is {D:.3f} of the spread ≤ D* = "
                               f"{KERNEL_LIKE_MAX_ERROR:.3f}")
    return "proportional", (f"random kernel: the 1/N expansion's (resolved) error is {D:.3f} of the spread > D* = "
                            f"{KERNEL_LIKE_MAX_ERROR:.3f}")


def _inputs(depth, width, activation, c_plus, c_minus, rho):
    L, N = positive_int(depth, "depth", maximum=MAX_DEPTH), positive_int(width, "width")
    act = _activation(activation)
    rho = finite_float(rho, "rho")
    if not -1.0 < rho < 1.0:
        raise ValueError(f"rho (the inputs' correlation) must lie strictly between -1 and 1, got {rho}")
    cp, cm = finite_float(c_plus, "c_plus"), finite_float(c_minus, "c_minus")
    if act == "shaped-relu" and min(1 + cp / np.sqrt(N), 1 + cm / np.sqrt(N)) < 0:
        raise ValueError(f"width {N} too small for c± = ({cp:g}, {cm:g}): a slope 1 + c/√N is negative")
    for name, c in (("c_plus", cp), ("c_minus", cm)):
        if act == "shaped-relu" and abs(c) > 1e6 * np.sqrt(N):
            raise ValueError(f"{name} = {c:g} too large for width {N}: the shaping needs |c| ≪ √N (at most 10⁶ √N)")
    return L, N, act, cp, cm, rho


def depth_width_report(depth: int, width: int, activation: str = "shaped-relu", *, c_plus: float = 1.0,
                       c_minus: float = -1.0, shape: float = 1.0, rho: float = 0.3, paths: int = 10_000, steps: int | None = None,
                       seed=0, rng=None, progress: bool | None = None) -> DepthWidthReport:
    """The distance of a depth-L, width-N MLP from its kernel limit and its regime (module docstring).

    ``activation``: ``"shaped-relu"`` (slopes 1 + c±/√N), ``"shaped-tanh"`` (s tanh(x/s), s = ``shape``·√N, weight
    variance 1) or ``"relu"`` (unshaped, He); ``rho``: correlation of the two inputs (of unit variance); ``paths``: SDE paths (≥ 200); ``steps``: Euler steps (default max(16, min(L, 256⌈T⌉)), ×4 for shaped-tanh); randomness
    only through ``seed`` / ``rng``; ``progress`` as for :func:`limits.nfd.covariance_sde`.
    """
    L, N, act, cp, cm, rho = _inputs(depth, width, activation, c_plus, c_minus, rho)
    paths = positive_int(paths, "paths", minimum=10 * BATCHES)
    n = positive_int(steps, "steps") if steps is not None else _default_steps(L, N, act)
    if act == "relu":
        return _relu_report(L, N, rho, progress)
    shape = positive_float(shape, "shape")
    return _shaped_report(L, N, act, cp, cm, shape, rho, paths, n, generator(rng, seed), seed, progress)


def _default_steps(L, N, act):
    """max(16, min(L, 256⌈T⌉)) Euler steps (the layers themselves up to 256 per unit T); four times as many for the
    smooth drift, whose step-halving change is larger."""
    k = 4 if act == "shaped-tanh" else 1
    return max(16 * k, min(k * L, 256 * k * int(np.ceil(L / N))))


def _K0(rho):
    return np.array([[1.0, rho], [rho, 1.0]])


def _rho_law(x):
    """Mean, sd and quantiles of the sampled ρ_L with batch-means SEs."""
    m, m_se = _batch_stats(x, np.mean)
    s, s_se = _batch_stats(x, lambda y: np.std(y, ddof=1))
    q, q_se = _batch_stats(x, lambda y: np.quantile(y, QUANTILES))
    return float(m), float(m_se), float(s), float(s_se), q, q_se


def _shape(act, cp, cm, shape, N):
    """(covariance_sde keywords, drift b(V), κ_N) of a shaped activation: the leaky relu with κ_N, or
    s tanh(x/s) with s = shape·√N → x − x³/(3 shape² N): the smooth drift with (a, b) = (0, −1/(3 shape²))."""
    from .covariance_sde import drift, drift_coefficient, smooth_drift

    if act == "shaped-relu":
        kap = float(drift_coefficient(cp, cm, N))
        return {"kappa": kap}, (lambda V: drift(V, kap)), kap
    b = -1.0 / (3.0 * shape * shape)
    return {"smooth": (0.0, b)}, (lambda V: smooth_drift(V, 0.0, b)), float("nan")


def _norm_part(act, T, r, fo):
    """(mean, var of log V_L/V₀, D_norm, its SE, source): exact for the leaky relu (no drift on the diagonal),
    sampled (batch-means SE) for a smooth activation."""
    if act == "shaped-relu":
        return -T, 2 * T, norm_error(2 * T, fo.Sigma[0, 0] / fo.K0[0, 0] ** 2), 0.0, "covariance SDE (exact: N(−T, 2T))"
    ln, v = r.log_norm()[-1], r.V[-1][:, 0, 0]
    law, law_se = _batch_stats(v, lambda y: np.std(y, ddof=1) / np.mean(y))
    first = np.sqrt(fo.Sigma[0, 0]) / (fo.V[0, 0] + fo.m[0, 0])
    D, se = abs(first - law) / law, law_se * abs(first) / law ** 2
    return float(ln.mean()), float(ln.var(ddof=1)), float(D), float(se), f"covariance SDE ({r.paths} paths)"


def _shaped_report(L, N, act, cp, cm, shape, rho, paths, n, gen, seed, progress):
    import time

    from .covariance_sde import covariance_sde
    from .linear_noise import first_order

    cpu0 = time.process_time()
    K0, T = _K0(rho), L / N
    sde_kw, bfun, kap = _shape(act, cp, cm, shape, N)
    fo = first_order(K0, T, bfun)
    nngp = fo.V if act != "shaped-relu" else covariance_sde(
        K0, T, dt=1.0 / N, paths=2, noise=0.0, halving=False, seed=0, progress=False, **sde_kw).V[-1, 0]
    r = covariance_sde(K0, T, dt=T / n, paths=paths, rng=gen, progress=progress, **sde_kw)
    x = r.correlation()[-1]
    m, m_se, s, s_se, q, q_se = _rho_law(x)
    fo_m, fo_s = fo.correlation()
    D_rho, D_se = _spread_error(m, s, fo_m, fo_s, m_se, s_se)
    lm, lv, D_norm, Dn_se, source = _norm_part(act, T, r, fo)
    D = max(D_rho, D_norm)
    D_decide = max(D_rho - 2 * D_se, D_norm - 2 * Dn_se, 0.0)   # a Monte Carlo error counts once resolved (2 SE)
    collapse = float(np.median((1 - np.abs(x)) / (1 - abs(rho))))
    regime, reason = regime_rule(collapse, lv, D_decide)
    diag = {**r.diagnostics, "first_order_rk4_error": fo.rk4_error, "D_rho": D_rho, "D_rho_se": float(D_se),
            "D_norm": D_norm, "D_norm_se": Dn_se, "D_decide": D_decide, "cpu_seconds": time.process_time() - cpu0}
    diag.pop("halving", None)
    return DepthWidthReport(
        depth=L, width=N, T=T, activation=act, c_plus=cp if act == "shaped-relu" else float("nan"),
        c_minus=cm if act == "shaped-relu" else float("nan"), kappa=kap, rho0=rho,
        nngp_rho=float(nngp[0, 1] / np.sqrt(nngp[0, 0] * nngp[1, 1])), rho_mean=m, rho_mean_se=m_se, rho_sd=s,
        rho_sd_se=s_se, quantile_levels=np.array(QUANTILES), rho_quantiles=q, rho_quantiles_se=q_se,
        first_order_rho_mean=fo_m, first_order_rho_sd=fo_s, gram_nngp=nngp, gram_first_order=fo.V + fo.m,
        gram_sde=r.mean[-1], gram_sde_se=r.mean_se[-1], log_norm_mean=lm, log_norm_var=lv, log_norm_source=source,
        first_order_error=D, first_order_error_se=float(D_se if D_rho >= D_norm else Dn_se), collapse=collapse,
        halving=list(r.diagnostics["halving"].values())[-1], regime=regime, reason=reason, paths=paths, steps=n,
        seed=seed if isinstance(seed, (int, np.integer)) else None, diagnostics=diag)


def relu_norm_moments(L: int, N: int) -> tuple[float, float]:
    """(exact, first-order) variance of V_L/V₀ for one input through L He relu layers of width N: V_{l+1}/V_l =
    R χ independent (:func:`relu_log_norm`), E R = E χ = 1, so Var = (E R² E χ²)^L − 1, first order
    L(E R² E χ² − 1);
    E χ² = (N+2)/N, E R² = 4 E[B²], B ~ Beta(K/2, (N−K)/2), K ~ Bin(N, ½) given K ≥ 1."""
    from scipy.stats import binom

    K = np.arange(1, N + 1)
    p = binom.pmf(K, N, 0.5)
    p = p / p.sum()
    a, s = K / 2.0, N / 2.0
    g = float(p @ (4 * a * (a + 1) / (s * (s + 1)))) * (N + 2) / N
    return float(np.expm1(L * np.log(g))), L * (g - 1.0)


RELU_K1_MAX_DEPTH = 1024           # limits.kernels.finite_width's cost grows faster than L² (≈ 3 CPU-s at L = 1000)


def relu_nngp_correlation(rho: float, L: int) -> float:
    """The He relu NNGP correlation after L layers: ρ ↦ (√(1−ρ²) + ρ(π − arccos ρ))/π (norms preserved)."""
    for _ in range(L):
        if rho == 1.0:
            break
        rho = float(np.clip((np.sqrt(max(1.0 - rho * rho, 0.0)) + rho * (np.pi - np.arccos(rho))) / np.pi, -1, 1))
    return rho


def _relu_first_order(L, N, rho, progress):
    """K + K1/N of the 2×2 Gram (unit inputs) from :func:`limits.kernels.finite_width` (NaN beyond
    :data:`RELU_K1_MAX_DEPTH`)."""
    if L > RELU_K1_MAX_DEPTH:
        return np.full((2, 2), np.nan)
    from ..kernels.finite_width import finite_width
    from ..model import mlp
    from ..progress import stage

    with stage(f"depth-width: K1 of the depth-{L} relu MLP (limits.kernels.finite_width)",
               disable=True if progress is False else None):
        fw = finite_width(mlp(2, depth=L, activation="relu", sigma_w2=2.0),
                          np.linalg.cholesky(_K0(rho)) * np.sqrt(2), ntk=False)
    return (fw.K_layers[L] + fw.K1_layers[L] / N) / 2.0   # L relu layers; the read-in's σ_w² = 2 doubles the Gram


def _relu_report(L, N, rho, progress):
    import time

    from .covariance_sde import relu_log_norm

    cpu0 = time.process_time()
    nngp_rho = relu_nngp_correlation(rho, L)
    fo = _relu_first_order(L, N, rho, progress)
    exact, first = relu_norm_moments(L, N)
    D = norm_error(np.log1p(exact), first)
    lm, lv = relu_log_norm(L / N, N)
    collapse = (1 - abs(nngp_rho)) / (1 - abs(rho))
    regime, reason = regime_rule(collapse, lv, D)
    nan, nan2 = float("nan"), np.full(len(QUANTILES), np.nan)
    return DepthWidthReport(
        depth=L, width=N, T=L / N, activation="relu", c_plus=nan, c_minus=nan, kappa=nan, rho0=rho, nngp_rho=nngp_rho,
        rho_mean=nan, rho_mean_se=nan, rho_sd=nan, rho_sd_se=nan, quantile_levels=np.array(QUANTILES),
        rho_quantiles=nan2, rho_quantiles_se=nan2, first_order_rho_mean=float(fo[0, 1] / np.sqrt(fo[0, 0] * fo[1, 1])),
        first_order_rho_sd=nan, gram_nngp=_K0(nngp_rho), gram_first_order=fo, gram_sde=np.full((2, 2), np.nan),
        gram_sde_se=np.full((2, 2), np.nan), log_norm_mean=lm, log_norm_var=lv,
        log_norm_source=f"Hanin–Nica, exact at width {N}", first_order_error=D, first_order_error_se=0.0,
        collapse=collapse, halving={}, regime=regime, reason=reason, paths=0, steps=0, seed=None,
        diagnostics={"D_norm": D, "norm_var_exact": exact, "norm_var_first_order": first,
                     "cpu_seconds": time.process_time() - cpu0})


def _pm(v, se, f=".4f"):
    return f"{v:{f}} ± {se:.1g}"


def _gram_line(r) -> str:
    """The mean Gram's V₁₂: NNGP, first order and the SDE, with the z of their distance."""
    fo, m, se = r.gram_first_order[0, 1], r.gram_sde[0, 1], r.gram_sde_se[0, 1]
    return (f"  mean Gram V₁₂: NNGP {r.gram_nngp[0, 1]:.4f}, K + K1·L/N {fo:.4f}, SDE {_pm(m, se)} "
            f"(SDE − first order = {m - fo:+.1e}, z = {(m - fo) / se if se > 0 else 0.0:+.1f})")


def summary(r: DepthWidthReport) -> str:
    """The short human report of a :class:`DepthWidthReport`."""
    act = r.activation + {"shaped-relu": f" (c₊ = {r.c_plus:g}, c₋ = {r.c_minus:g}; κ_N = {r.kappa:.4g})",
                          "shaped-tanh": " (s tanh(x/s), s ∝ √N)", "relu": " (unshaped, He initialisation)"}[r.activation]
    out = [f"depth L = {r.depth}, width N = {r.width}, {act}: T = L/N = {r.T:.4g}",
           f"regime: {r.regime} — {r.reason}",
           f"output correlation of two inputs at ρ₀ = {r.rho0:g}: NNGP (kernel limit) {r.nngp_rho:.4f}"]
    if np.isfinite(r.rho_mean):
        qs = ", ".join(f"{100 * l:g}% {v:+.3f}" for l, v in zip(r.quantile_levels, r.rho_quantiles))
        out += [f"  SDE ({r.paths} paths, {r.steps} steps): mean {_pm(r.rho_mean, r.rho_mean_se)}, "
                f"sd {_pm(r.rho_sd, r.rho_sd_se)}",
                f"  quantiles: {qs} (SE ≤ {np.max(r.rho_quantiles_se):.1g})",
                f"  1/N expansion (K + K1·L/N, Gaussian spread): mean {r.first_order_rho_mean:.4f}, "
                f"sd {r.first_order_rho_sd:.4f}",
                _gram_line(r),
                f"  step halving: Δ mean ρ = {r.halving['rho_01'][0]:+.1e} ± {r.halving['rho_01'][1]:.1e}, "
                f"Δ mean log-norm = {r.halving['log_norm_0'][0]:+.1e} ± {r.halving['log_norm_0'][1]:.1e}"]
    else:
        k1 = (f"{r.first_order_rho_mean:.4f}" if np.isfinite(r.first_order_rho_mean)
              else f"not computed beyond L = {RELU_K1_MAX_DEPTH}")
        out.append(f"  1/N expansion (K + K1·L/N, limits.kernels.finite_width): {k1}; "
                   "no SDE for the unshaped net (its correlation law is not computed)")
    z = max((abs(m) / se if se > 0 else 0.0) for m, se in r.halving.values()) if r.halving else 0.0
    if z > 3:
        out.append(f"  warning: halving the step changes a mean by {z:.1f} SE — increase steps")
    d = r.diagnostics
    parts = (f"correlation {d['D_rho']:.3f} ± {d['D_rho_se']:.1g}, "
             if "D_rho" in d else "") + f"squared norm {d['D_norm']:.3f}" + (
        f" ± {d['D_norm_se']:.1g}" if d.get("D_norm_se") else " (exact)")
    out += [f"1/N expansion error D = {r.first_order_error:.3f} of the spread ({parts}; kernel-like while ≤ "
            f"{KERNEL_LIKE_MAX_ERROR:g})",
            f"log-norm log(V_L/V₀): mean {r.log_norm_mean:.4f}, variance {r.log_norm_var:.4f} ({r.log_norm_source})",
            f"collapse: typical (1−|ρ_L|)/(1−|ρ₀|) (SDE median; relu: NNGP) {r.collapse:.3g} "
            f"(degenerate below e⁻⁶ = {COLLAPSE_RATIO:.2g})"]
    return "\n".join(out)
