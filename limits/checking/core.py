"""``limits.check``: any theory prediction against finite networks built from the same Model.

    c = limits.check(result, widths=(64, 128, 256, 512), inits=256, seed=0)
    c.passed, c.z, c.worst_z, c.rate, c.rate_ci, c.extrapolated, c.power, c.to_markdown(), c.plot()

For every width N the finite observable of ``result`` (its :attr:`observable`) is simulated on
``inits`` independent initialisations of ``model.finite(N)`` — the one place a Model becomes a
finite network — giving per-init samples Y_s (one row per init, one column per compared entry).
From them, per width: mean ± SE and z = (mean − theory)/SE; over widths:

* **N → ∞ extrapolation** per entry: weighted least squares of mean_N = a + b/N (the O(1/N)
  finite-width bias of kernels at init); (a − theory)/se(a) is Student-t with ν effective degrees of
  freedom (se(a) is estimated from the inits: Welch–Satterthwaite over the widths, with the samples'
  kurtosis), ``z_inf`` its normal equivalent, compared with a Bonferroni threshold over the entries.
* **scale test**: per init δ_s = ⟨Y_s − t, t⟩/⟨t, t⟩ (the relative error along the prediction;
  computed per init so correlations between entries are accounted for), extrapolated the same
  way to δ∞ ± se (t with its own ν). ``power`` = (t_{α_δ/2} + t_{0.8})·se(δ∞): the smallest relative bias
  of the prediction this check detects with 80 % probability.
* **finite-size rate**: the relative RMS deviation of single networks from the prediction,
  r_N = ‖Y_s − t‖/‖t‖ averaged over inits, fitted as r_N ∝ N^rate (log–log, 1 − α_rate CI) against the
  expected rate (−1/2 for kernels at init: O(N^{-1/2}) fluctuations around the limit).

``passed`` needs all three. **No verdict without a measurement**: a criterion whose interval is too wide to
decide is reported as *not tested* — with the inits (and, for the rate, the widths) that would test it, computed
from the measured standard errors — and never counted as met. "Too wide" is defined by the criterion's power
(detected with 80 % probability at its level): the bias test must detect a relative bias of ``DECIDE_BIAS`` = 50 %;
the entry test an error of ``DECIDE_ENTRIES`` × the RMS prediction in an entry of median precision,
(z_crit + z₀.₈)·median se ≤ RMS; the rate test a rate ``DECIDE_RATE`` = 0.5 away from the expected one,
(t_{α_rate/2,ν} + t_{0.8,ν})·se(rate) ≤ 0.5 (ν = widths − 2: three widths give ν = 1 and a CI like [−15.6, +14.6]
— not a measurement). The verdict: ``fail`` when a decided criterion fails (a significant failure is valid at any
power); ``pass`` (``passed`` True) when the entry and bias tests are decided and met and the rate is met or not
tested; ``inconclusive`` (``passed`` None, `limits check` exit 4) when nothing failed but the entry or the bias test
is not tested. The rate is not required: it tests the finite-size scaling of single networks, which the other two
tests do not need (they extrapolate the mean); when it cannot be decided the report says so and by what it could be.
``alpha`` (default 1 %) is the family-wise false-alarm rate of the verdict:
Bonferroni over its tests (:func:`verdict_levels`: α/4 entries, α/2 bias, α/4 rate); measured on correct
inputs by ``benchmarks/check_calibration.py`` (docs/theory/finite.rst). Observables: read-out NNGP → E[f fᵀ | h^L] = σ²_out φ(h^L)φ(h^L)ᵀ/N +
σ²_b,out (a Rao–Blackwellised estimate of f fᵀ: same mean, O(N^{-1/2}) instead of O(1) spread);
hidden layers → h^l h^lᵀ/N; NTK → the empirical NTK Σ_θ ∂f/∂θ ∂f/∂θ of the NTK parameterisation.
``backend="torch"`` (kernel results; optional extra) draws the same observables from ``Model.to_torch``
networks (:mod:`limits.torch.kernels`, NTK by autograd) and runs the same statistics.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..checks import positive_int
from ..results import Result
from ..stats import signed

DEFAULT_WIDTHS = (64, 128, 256, 512)
DEFAULT_INITS = 256
Z_POWER = 0.8416212335729143          # one-sided 80 % quantile of N(0, 1)
WEAK_POWER = 0.05                     # a check that cannot see a 5 % error is called weak in its verdict
DECIDE_BIAS = 0.5                     # the bias test decides when it detects a 50 % relative bias (80 % probability)
DECIDE_ENTRIES = 1.0                  # the entry test decides when a typical entry's error of 100 % of the RMS prediction is detected
DECIDE_RATE = 0.5                     # the rate test decides when it tells the expected rate from one 0.5 away (N⁰: no decay)
REQUIRED = ("entries", "bias")        # criteria a pass needs decided (the rate, when undecided, is reported and not counted)
WIDTH_CAP = 8192                      # the widest network a "widths that would test it" suggestion proposes
MAX_INITS = 4096                      # cap of the initialisations chosen for a target power
MIN_TARGET_POWER = 1e-4               # smallest target_power accepted (0.01 %)


def percent(x) -> str:
    """0.1312 → '13 %', 0.0123 → '1.2 %' (two significant digits)."""
    return f"{100 * float(x):.2g} %"


@dataclass(frozen=True)
class CheckResult(Result):
    """Theory vs finite networks (module docstring). Arrays: ``widths`` (n_w,), ``theory`` (n_e,),
    ``estimate``/``se``/``z`` (n_w, n_e), ``extrapolated``/``extrapolated_se``/``z_inf`` (n_e,),
    ``rms``/``rms_se`` (n_w,)."""

    what: str
    labels: tuple
    widths: np.ndarray
    inits: int
    theory: np.ndarray
    estimate: np.ndarray
    se: np.ndarray
    z: np.ndarray
    extrapolated: np.ndarray
    extrapolated_se: np.ndarray
    z_inf: np.ndarray
    z_crit: float
    rms: np.ndarray
    rms_se: np.ndarray
    rate: float
    rate_ci: tuple
    rate_expected: float
    scale_bias: float
    scale_bias_se: float
    scale_z_crit: float
    power: float
    passed: bool | None
    reasons: tuple
    model: dict
    seed: int
    seconds: float
    details: dict = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        """'pass', 'fail' or 'inconclusive' (nothing failed but a required criterion was not tested — ``passed`` is
        then None — or, for predictions, a failure only where the widths are outside the asymptotic regime of the
        problem: :mod:`limits.checking.predict`)."""
        return self.details.get("verdict") or ("inconclusive" if self.passed is None
                                               else ("pass" if self.passed else "fail"))

    @property
    def not_tested(self) -> dict:
        """{criterion: why, and the inits/widths that would test it} of the criteria too wide to decide."""
        return dict(self.details.get("not_tested") or {})

    def verdict_text(self) -> str:
        """One line: PASS/FAIL/INCONCLUSIVE, and how strong the check is ("weak: cannot detect errors
        below 13 %" when its power is above 5 %)."""
        head = {"pass": "PASS", "fail": "FAIL", "inconclusive": "INCONCLUSIVE"}[self.verdict]
        strength = (f"weak: cannot detect errors below {percent(self.power)}" if self.power > WEAK_POWER
                    else f"detects relative errors ≥ {percent(self.power)} with 80 % probability")
        nt = self.not_tested
        if nt:
            strength += "; not tested: " + ", ".join(nt)
        target = self.details.get("target_power")
        if target is not None:
            strength += (f"; target {percent(target)} " + ("met" if self.power <= target else
                         f"not met with {self.inits} inits (cap {self.details.get('max_inits', MAX_INITS)})"))
        return f"{head} ({strength})"

    @property
    def worst_z(self) -> float:
        """Largest |z| of the N → ∞ extrapolation (the statistic ``passed`` uses)."""
        return float(np.max(np.abs(self.z_inf))) if self.z_inf.size else 0.0

    @property
    def rate_estimated(self) -> bool:
        """False when the finite-size rate could not be fitted (fewer than three widths, or a zero RMS
        deviation): ``rate``/``rate_ci`` are then NaN and never reported as numbers."""
        return bool(np.isfinite(self.rate) and np.all(np.isfinite(self.rate_ci)))

    def _rate_text(self, digits) -> str:
        if self.rate_estimated:
            return (f"{self.rate:+.{digits}f} [{self.rate_ci[0]:+.{digits}f}, {self.rate_ci[1]:+.{digits}f}]"
                    + (f" ({self._rate_level():.4g} % CI)" if digits == 3 else ""))
        n = len(self.widths)
        return (f"not estimable: {n} width{'s' if n != 1 else ''} (the log–log fit needs at least 3)" if n < 3
                else "not estimable: zero RMS deviation at some width")

    def _rate_level(self) -> float:
        return 100 * (1 - self.details.get("levels", {}).get("rate", 0.01))

    @property
    def scale_z(self) -> float:
        """z of the relative bias δ∞ (normal equivalent of the Student-t ratio δ∞/se; the scale test's statistic)."""
        return float(self.details.get("scale_z", self.scale_bias / self.scale_bias_se if self.scale_bias_se else 0.0))

    def _levels_text(self) -> str:
        lv = self.details.get("levels")
        return "" if not lv else f"; this test {lv['entries']:.2g}"

    def to_markdown(self) -> str:
        rows = [f"### check: {self.what} — **{self.verdict_text()}**", "",
                f"model: {self.details.get('model_text', '')}", "",
                *([f"network: the user's module {self.details['network']}, declared equivalent (verified before "
                   "the check; limits.torch.equivalent)", ""] if self.details.get("network") else []),
                "| width | inits | max abs z | relative RMS deviation of one network |",
                "|---:|---:|---:|---|"]
        for i, N in enumerate(self.widths):
            rows.append(f"| {int(N)} | {self.inits} | {np.max(np.abs(self.z[i])):.2f} | "
                        f"{self.rms[i]:.4g} ± {self.rms_se[i]:.2g} |")
        nt = self.not_tested
        mark = lambda key, text: ("**not tested**: " + nt[key]["why"]) if key in nt else text     # noqa: E731
        rows += ["", "| statistic | value | criterion |", "|---|---|---|",
                 f"| N → ∞ extrapolation, worst \\|z\\| over {self.theory.size} entries | {self.worst_z:.2f} | "
                 + mark("entries", f"< {self.z_crit:.2f} (Bonferroni; family-wise α = {self.details.get('alpha', 0.01):g} "
                                   f"over the verdict{self._levels_text()})") + " |",
                 f"| relative bias along the prediction δ∞ | {self.scale_bias:+.4f} ± {self.scale_bias_se:.4f} "
                 f"(z = {self.scale_z:+.2f}) | " + mark("bias", f"\\|z\\| < {self.scale_z_crit:.2f}") + " |",
                 f"| finite-size rate of the RMS deviation | {self._rate_text(3)} | "
                 + mark("rate", f"contains {self.rate_expected:+g}") + " |",
                 f"| power: smallest relative bias detected with 80 % probability | {self.power:.3%} | |"]
        rows += _blocks_markdown(self.details)
        if nt:
            rows += ["", "Not tested (too wide to decide; never counted as met): "
                     + "; ".join(f"{k}: {v['why']} — would be tested with {v['would']}" for k, v in nt.items())]
        if self.reasons:
            rows += ["", ("Not conclusive because: " if self.verdict == "inconclusive" else "Failed because: ")
                     + "; ".join(self.reasons)]
        return "\n".join(rows)

    def __str__(self):
        return self.to_markdown()

    def __repr__(self):
        return (f"CheckResult({self.what}: {self.verdict_text()}; widths {list(map(int, self.widths))}, "
                f"{self.inits} inits; worst |z∞| = {self.worst_z:.2f} (< {self.z_crit:.2f}), δ∞ = "
                f"{self.scale_bias:+.4f} ± {self.scale_bias_se:.4f}, rate {self._rate_text(2)})")

    def plot(self, target=None):
        """Two panels: extrapolated entries vs theory (with ±2 SE), and the RMS deviation against N
        with the expected rate. ``target``: a path (.png/.pdf/.svg, saved), an Axes (its place split in two),
        two Axes, or None (:func:`limits.style.plot_target`); returns the Figure."""
        from ..style import plot_target

        pt = plot_target(target, 2, figsize=(9.5, 3.8), what="CheckResult.plot")
        fig, (a1, a2) = pt.fig, pt.axes
        t = self.theory
        lo, hi = float(min(t.min(), self.extrapolated.min())), float(max(t.max(), self.extrapolated.max()))
        pad = 0.05 * (hi - lo + 1e-12)
        a1.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.6", lw=1, label="theory = finite")
        a1.errorbar(t, self.estimate[-1], yerr=2 * self.se[-1], fmt="o", ms=3, alpha=0.6,
                    label=f"N = {int(self.widths[-1])} (±2 SE)")
        a1.errorbar(t, self.extrapolated, yerr=2 * self.extrapolated_se, fmt="s", ms=3,
                    label="N → ∞ extrapolation (±2 SE)")
        a1.set_xlabel("theory")
        a1.set_ylabel("finite networks")
        a1.set_title(f"{self.what}: worst |z∞| = {self.worst_z:.2f}")
        a1.legend(fontsize=7, loc="upper left")
        N = self.widths.astype(float)
        a2.errorbar(N, self.rms, yerr=2 * self.rms_se, fmt="o", label="one network vs theory (RMS, ±2 SE)")
        ref = self.rms[0] * (N / N[0]) ** self.rate_expected
        a2.plot(N, ref, "--", color="0.4", label=f"expected N^{self.rate_expected:+g}")
        a2.set_xscale("log")
        a2.set_yscale("log")
        a2.set_xticks(N, [str(int(n)) for n in N])
        a2.minorticks_off()
        a2.set_xlabel("width N")
        a2.set_ylabel("relative RMS deviation")
        a2.set_title(f"rate {self._rate_text(2)}" if self.rate_estimated else "rate not estimable")
        a2.legend(fontsize=7, loc="lower left")
        fig.suptitle(self.verdict_text(), fontsize=9)
        return pt.finish()


def _blocks_markdown(details) -> list:
    """Per-block statistics (each in its own units) and the per-test-point table, when a check has blocks."""
    blocks = details.get("blocks")
    if not blocks:
        return []
    rows = ["", "| block (user units) | worst entry: N → ∞ vs theory (z, threshold) | relative bias δ∞ | power | "
                "asymptotic regime | verdict |", "|---|---|---|---|---|---|"]
    for name, b in blocks.items():
        w = b.get("worst") or {}
        entry = (f"{w['label']}: {w['extrapolated']:.5g} ± {w['se']:.2g} vs {w['theory']:.5g} "
                 f"(z = {w['z']:+.2f}, {b['z_crit']:.2f})") if w else ""
        rg = b.get("regime") or {}
        regime = rg.get("text", "")
        rows.append(f"| {name} | {entry} | {b['scale_bias']:+.2%} ± {b['scale_bias_se']:.2%} | "
                    f"{percent(b['power'])} | {regime} | {b.get('verdict', 'pass' if b['passed'] else 'fail')} |")
    pts = details.get("per_point")
    if pts:
        cols = details.get("per_point_columns", ("mean", "var"))
        rows += ["", f"| test point | {cols[0]}: theory | N → ∞ (z) | {cols[1]}: theory | N → ∞ (z) |",
                 "|---:|---:|---|---:|---|"]
        for r in pts:
            rows.append(f"| {r['point']} | {r['mean']:.5g} | {r['mean_inf']:.5g} ± {r['mean_se']:.2g} "
                        f"({r['mean_z']:+.2f}) | {r['var']:.5g} | {r['var_inf']:.5g} ± {r['var_se']:.2g} "
                        f"({r['var_z']:+.2f}) |")
        if details.get("per_point_note"):
            rows.append(details["per_point_note"])
    return rows


# ---------------------------------------------------------------------------------------------- statistics
def _wls_extrapolate(N, means, ses):
    """Per column: fit mean_N = a + b/N (weights 1/se²); return a, se(a) (scaled by √max(1, χ²/dof)) and the
    terms c_N² se_N² of the unscaled var(a) = Σ_N c_N² se_N² (a = Σ_N c_N mean_N; for the degrees of freedom)."""
    N = np.asarray(N, dtype=float)
    A = np.stack([np.ones_like(N), 1.0 / N], axis=1)                  # (n_w, 2)
    se = np.maximum(ses, 1e-300)
    a_out = np.empty(means.shape[1])
    s_out = np.empty(means.shape[1])
    terms = np.empty(means.shape)
    dof = max(N.size - 2, 1)
    for j in range(means.shape[1]):
        w = 1.0 / se[:, j]
        Aw = A * w[:, None]
        bw = means[:, j] * w
        Q, R = np.linalg.qr(Aw)
        coef = np.linalg.solve(R, Q.T @ bw)
        resid = bw - Aw @ coef
        chi2 = float(resid @ resid) / dof if N.size > 2 else 1.0
        c = np.linalg.solve(R, Q.T)[0] * w                             # a = Σ_N c_N mean_N
        terms[:, j] = (c * se[:, j]) ** 2                              # Σ = [(RᵀR)⁻¹]₀₀
        a_out[j] = coef[0]
        s_out[j] = np.sqrt(float(np.sum(terms[:, j])) * max(chi2, 1.0))
    return a_out, s_out, terms


VERDICT_SHARES = {"entries": 0.25, "scale": 0.5, "rate": 0.25}


def verdict_levels(alpha, entry_fraction=1.0, analyses=1) -> dict:
    """Two-sided levels of the three tests of a verdict whose family-wise false-alarm rate is ``alpha``
    (Bonferroni over the tests, valid whatever their correlation): α/4 for the entries (split over them), α/2
    for the relative bias along the prediction (the test whose power the check publishes), α/4 for the
    finite-size rate. A check made of several analyses (blocks, :mod:`limits.checking.predict`) gives each
    block ``entry_fraction`` (its share of the entries) and splits the bias and rate levels over ``analyses``."""
    return {"entries": VERDICT_SHARES["entries"] * alpha * entry_fraction,
            "scale": VERDICT_SHARES["scale"] * alpha / analyses, "rate": VERDICT_SHARES["rate"] * alpha / analyses}


def _per_width(samples, t, tse, sc, tt):
    """Per width: means, SEs and Var(s²)/σ⁴ of the entries (entry/scale units); per-init relative bias
    δ_s = ⟨Y_s − t, t⟩/⟨t, t⟩ (mean, SE, Var(s²)/σ⁴); relative RMS deviation of one network (mean, SE)."""
    from ..stats import variance_relative_variance

    n_e = t.size
    out = {k: [] for k in ("means", "ses", "rv", "rms", "rms_se", "deltas", "delta_se", "delta_rv")}
    for Y in samples:
        Y = np.asarray(Y, dtype=float).reshape(len(Y), n_e) / sc
        S = Y.shape[0]
        if S < 2:
            raise ValueError("inits must be >= 2 (a standard error needs two initialisations)")
        if not np.all(np.isfinite(Y)):
            raise ValueError("the finite networks overflowed (inf/NaN); use smaller variances or depth")
        D = Y - t
        r = np.sqrt(np.maximum(np.mean(D * D, axis=1) - np.mean(tse ** 2), 0.0) / (tt / n_e))
        d = (D @ t) / tt
        for k, v in (("means", Y.mean(0)), ("ses", Y.std(0, ddof=1) / np.sqrt(S)), ("rv", variance_relative_variance(Y)),
                     ("rms", r.mean()), ("rms_se", r.std(ddof=1) / np.sqrt(S)), ("deltas", d.mean()),
                     ("delta_se", d.std(ddof=1) / np.sqrt(S)), ("delta_rv", variance_relative_variance(d))):
            out[k].append(v)
    out = {k: np.array(v) for k, v in out.items()}
    out["ses"] = np.where(out["ses"] > 0, out["ses"], 1e-15 * np.maximum(np.abs(out["means"]), 1.0))
    out["inits"] = S
    return out


def _extrapolate(widths, means, ses, rv, known_var):
    """N → ∞ value per column ± SE (``known_var``: the prediction's own variance, in quadrature) and the
    effective degrees of freedom of that SE (Welch–Satterthwaite over the widths, with the samples' kurtosis)."""
    from ..stats import satterthwaite_dof

    if widths.size >= 2:
        a, sa, terms = _wls_extrapolate(widths, means, ses)
    else:
        a, sa, terms = means[-1], ses[-1], ses[-1:] ** 2
        rv = rv[-1:]
    return a, np.sqrt(sa ** 2 + known_var), satterthwaite_dof(terms, rv, known_var)


def analyse(what, widths, theory, samples, *, rate_expected=-0.5, alpha=0.01, labels=None, model=None,
            seed=0, seconds=0.0, details=None, theory_se=None, scales=None, levels=None,
            theory_scale_var=None) -> CheckResult:
    """Statistics of a check from per-width sample matrices ``samples[i]`` (inits × entries).
    ``theory_se``: Monte Carlo standard error of the prediction itself (e.g. nonlinear DMFT); it is
    added in quadrature to every comparison and its mean square is removed from the RMS deviation.
    ``theory_scale_var``: the prediction's own variance of the relative bias along it (δ∞, in the units of
    ``scales``), when its errors are correlated across entries (default: from ``theory_se`` as independent).
    ``scales`` (per entry): the relative statistics (δ∞, RMS deviation, power) are computed on
    entry/scale, so blocks of different size weigh alike; every entry-wise number (theory,
    estimates, extrapolation, the reasons) stays in the user's units (z does not depend on it).
    ``alpha``: the family-wise false-alarm rate of the verdict, split over its tests by
    :func:`verdict_levels` (or ``levels``, a dict of the per-test levels). The SEs are estimated from the
    inits, so each extrapolated ratio (a − t)/se(a) is Student-t with ν effective degrees of freedom
    (Welch–Satterthwaite, kurtosis included); ``z_inf`` and the bias z are its normal equivalents, compared
    with normal thresholds."""
    from scipy.stats import norm

    from ..stats import normal_equivalent, student_quantile

    widths = np.asarray(widths, dtype=int)
    t = np.asarray(theory, dtype=float).ravel()
    n_e = t.size
    if n_e == 0:
        raise ValueError("nothing to compare: the prediction has no entries")
    if not np.all(np.isfinite(t)):
        raise ValueError("the prediction contains inf/NaN (an overflowed kernel); nothing to check")
    tse = np.zeros_like(t) if theory_se is None else np.broadcast_to(np.asarray(theory_se, float).ravel(), t.shape)
    sc = np.ones_like(t) if scales is None else np.broadcast_to(np.asarray(scales, float).ravel(), t.shape)
    t_user, t, tse = t, t / sc, tse / sc
    tt = float(t @ t)
    if tt == 0:
        raise ValueError("the prediction is identically zero; a relative check is undefined")
    lv = verdict_levels(alpha) if levels is None else dict(levels)
    pw = _per_width(samples, t, tse, sc, tt)
    means, ses = pw["means"], pw["ses"]
    z = (means - t) / np.sqrt(ses ** 2 + tse ** 2)
    a, sa, nu = _extrapolate(widths, means, ses, pw["rv"], tse ** 2)
    dinf, dse, dnu = _extrapolate(widths, pw["deltas"][:, None], np.maximum(pw["delta_se"], 1e-300)[:, None],
                                  pw["delta_rv"][:, None], float(np.sum((t * tse) ** 2)) / tt ** 2
                                  if theory_scale_var is None else float(theory_scale_var))
    dinf, dse, dnu = float(dinf[0]), float(dse[0]), float(dnu[0])
    z_inf = normal_equivalent((a - t) / np.maximum(sa, 1e-300), nu)
    t, means, ses, a, sa = t_user, means * sc, ses * sc, a * sc, sa * sc      # back to the user's units
    z_crit = float(norm.isf(lv["entries"] / (2 * n_e)))
    z1 = float(norm.isf(lv["scale"] / 2))
    dz = float(normal_equivalent(dinf / dse, dnu))
    reasons = []
    if np.max(np.abs(z_inf)) > z_crit:
        j = int(np.argmax(np.abs(z_inf)))
        lab = labels[j] if labels is not None else str(j)
        reasons.append(f"entry {lab}: extrapolated {a[j]:.6g} ± {sa[j]:.2g} vs theory {t[j]:.6g} "
                       f"(z = {z_inf[j]:+.2f}, threshold {z_crit:.2f})")
    if abs(dz) > z1:
        reasons.append(f"relative bias along the prediction {dinf:+.4f} ± {dse:.4f} (z = {dz:+.2f})")
    rate, ci, why = _rate_test(widths, pw["rms"], pw["rms_se"], rate_expected, 1.0 - lv["rate"])
    reasons += why
    power = float(student_quantile(lv["scale"] / 2, dnu) + student_quantile(0.2, dnu)) * dse
    entry_power = (z_crit + Z_POWER) * float(np.median(sa / sc)) / math.sqrt(tt / n_e)
    untested = _undecided(widths, int(pw["inits"]), power, entry_power, rate, ci, lv["rate"], bool(why))
    verdict = "fail" if reasons else ("inconclusive" if any(k in untested for k in REQUIRED) else "pass")
    det = {"alpha": alpha, "levels": lv, "scale_z": dz, "dof": {"entries": [float(v) for v in np.minimum(nu, 1e12)],
                                                 "scale": float(min(dnu, 1e12))},
           "criterion_power": {"entries": float(entry_power), "bias": float(power),
                               "rate": untested.get("rate", {}).get("power", _rate_power(widths, rate, ci, lv["rate"]))},
           "not_tested": untested, "verdict": verdict, **(details or {})}
    passed = {"pass": True, "fail": False, "inconclusive": None}[verdict]
    return CheckResult(str(what), tuple(labels or ()), widths, int(pw["inits"]), t, means, ses, z, a, sa, z_inf,
                       z_crit, pw["rms"], pw["rms_se"], rate, ci, float(rate_expected), dinf, dse, z1,
                       float(power), passed, tuple(reasons), model or {}, int(seed), float(seconds), det)


def _rate_power(widths, rate, ci, level):
    """(t_{level/2,ν} + t_{0.8,ν})·se(rate), ν = widths − 2 (NaN when the rate is not estimable): the rate difference
    the rate test detects with 80 % probability."""
    from ..stats import student_quantile

    if not (np.isfinite(rate) and np.all(np.isfinite(ci))) or widths.size < 3:
        return float("nan")
    nu = widths.size - 2
    tq = float(student_quantile(level / 2, nu))
    se = 0.5 * (ci[1] - ci[0]) / tq
    return float((tq + student_quantile(0.2, nu)) * se)


def _undecided(widths, inits, power, entry_power, rate, ci, rate_level, rate_failed):
    """{criterion: {"why", "would", "power"}} of the criteria too wide to decide (module docstring), with the inits
    (power ∝ 1/√inits) and, for the rate, the widths (the log-width spread and ν = widths − 2) that would test them."""
    out = {}

    def more_inits(p, target):
        return int(math.ceil(inits * 1.1 * (p / target) ** 2))

    if power > DECIDE_BIAS:
        out["bias"] = {"power": power, "why": f"detects a relative bias of {percent(power)} only (needs ≤ "
                                              f"{percent(DECIDE_BIAS)})",
                       "would": f"≈ {more_inits(power, DECIDE_BIAS)} inits per width"}
    if entry_power > DECIDE_ENTRIES:
        out["entries"] = {"power": entry_power, "why": f"a typical entry's detectable error is {entry_power:.3g} × the RMS "
                                                       f"prediction (needs ≤ {DECIDE_ENTRIES:g})",
                          "would": f"≈ {more_inits(entry_power, DECIDE_ENTRIES)} inits per width"}
    if rate_failed:
        return out
    rp = _rate_power(widths, rate, ci, rate_level)
    if not np.isfinite(rp):
        w = sorted(int(x) for x in widths)
        ext = w + [w[-1] * 2 ** k for k in range(1, 5 - len(w))] if len(w) < 4 else w
        out["rate"] = {"power": float("nan"), "why": f"not estimable with {len(w)} widths",
                       "would": f"widths {', '.join(map(str, ext))} (the fit needs at least 3; 4 give it a CI)"}
    elif rp > DECIDE_RATE:
        out["rate"] = {"power": rp, "why": f"CI [{ci[0]:+.2f}, {ci[1]:+.2f}] tells the expected rate only from one "
                                           f"{rp:.2g} away (needs ≤ {DECIDE_RATE:g})",
                       "would": _rate_suggestion(widths, inits, rp, rate_level)}
    return out


def _rate_suggestion(widths, inits, rp, level):
    """The widths (doubling the widest, same inits) and the inits (same widths, se ∝ 1/√inits) at which the rate test
    would decide: se(rate) ∝ 1/√(Σ (log N − mean)²) at fixed precision per width, ν = widths − 2."""
    from ..stats import student_quantile

    w = [float(x) for x in sorted(widths)]
    nu = len(w) - 2
    fac = lambda v: float(student_quantile(level / 2, v) + student_quantile(0.2, v))      # noqa: E731
    se = rp / fac(nu)
    sxx = lambda ws: float(np.sum((np.log(ws) - np.mean(np.log(ws))) ** 2))            # noqa: E731
    s0 = sxx(w)
    cand = list(w)
    wider = None
    while cand[-1] * 2 <= WIDTH_CAP:
        cand.append(cand[-1] * 2)
        if fac(len(cand) - 2) * se * math.sqrt(s0 / sxx(cand)) <= DECIDE_RATE:
            wider = cand
            break
    parts = []
    if wider:
        parts.append(f"widths {', '.join(str(int(x)) for x in wider)} at {inits} inits")
    n = int(math.ceil(inits * 1.1 * (rp / DECIDE_RATE) ** 2))
    parts.append(f"≈ {n} inits per width at these widths")
    return " or ".join(parts)


def _rate_test(widths, rms, rms_se, expected, level):
    """Log–log slope of the RMS deviation against N with its ``level`` CI (NaN with fewer than three widths or a
    zero deviation), and the reason it fails (the CI excludes ``expected``)."""
    from ..stats import loglog_fit

    if widths.size < 3 or not np.all(rms > 0):
        return float("nan"), (float("nan"), float("nan")), []
    fit = loglog_fit(widths, rms, yerr=rms_se, level=level)
    ci = (fit.ci_low, fit.ci_high)
    why = [] if fit.contains(expected) else [
        f"finite-size rate {signed(fit.slope, 3)} [{signed(ci[0], 3)}, {signed(ci[1], 3)}] excludes the "
        f"expected {expected:+g}"]
    return fit.slope, ci, why


# ---------------------------------------------------------------------------------------------- observables
def recorded(result, model, X, how):
    """(Model, X) for a check: the arguments when given, else what ``result`` recorded when it was computed
    with ``model=`` (``result.params`` or ``result.inputs``); a clear error naming ``how`` otherwise."""
    from ..model import as_model

    rec = getattr(result, "params", None)
    if not isinstance(rec, dict):
        rec = getattr(result, "inputs", None) or {}
    model = model if model is not None else rec.get("model")
    X = X if X is not None else rec.get("X")
    if model is None or X is None:
        raise ValueError(f"check: this {type(result).__name__} does not record its model and inputs; compute it "
                         f"with {how} or pass model= and X=")
    return as_model(model), np.asarray(X, dtype=float)


def spawn_seeds(seed, n):
    """``n`` independent integer seeds from ``seed`` (``numpy.random.SeedSequence(seed).spawn(n)``): one per
    width (or per init) so that adding a width never changes the others' networks."""
    return [int(s.generate_state(1, dtype=np.uint64)[0] >> 1)
            for s in np.random.SeedSequence(int(seed)).spawn(n)]


def _tri(P1, P2, symmetric):
    if symmetric:
        return np.triu_indices(P1)
    ii, jj = np.meshgrid(np.arange(P1), np.arange(P2), indexing="ij")
    return ii.ravel(), P1 + jj.ravel()


def _nngp_samples(m, net, X, idx, S, seed, layers):
    """Per init: [hidden layers' h hᵀ/N at ``layers``…, read-out E[f fᵀ|h^L]] at the index pairs."""
    from ..finite import empirical_kernels

    v = m.variances()
    ek = empirical_kernels(net, X, S, seed=seed, keep_samples=True, phi_kernels=True)
    i, j = idx
    parts = [ek.K[:, l, i, j] for l in layers]
    parts.append(v["sigma_w2_out"] * ek.K_phi[:, -1, i, j] + v["sigma_b2_out"])
    return np.concatenate(parts, axis=1)


def _ntk_samples(net, X, idx, S, seed, chunk=None):
    """Per init: the empirical NTK at the index pairs, drawn by the weight-free conditional sampler
    (:func:`limits.finite.ntk.conditional_ntk`, exact in distribution)."""
    from ..finite.ntk import conditional_ntk
    from ..finite.weights import init_streams

    i, j = idx
    N, P = net.width, X.shape[0]
    per = 8.0 * 8 * (net.n_blocks + 2) * P * (N + P)
    chunk = chunk or max(1, min(S, int(256 * 2**20 // per)))
    streams = init_streams(S, seed=seed)
    out = []
    for st in range(0, S, chunk):
        Th = conditional_ntk(net, X, streams=streams[st:st + chunk])
        out.append(Th[:, i, j])
    return np.concatenate(out, axis=0)


def _kernel_check(m, X1, X2, theory_nngp, theory_ntk, widths, inits, seed, layer_theory=None, progress=None,
                  alpha=0.01, backend="numpy", network=None):
    from ..progress import progress as _progress

    if backend == "torch":         # the same observables from Model.to_torch networks (optional extra)
        from ..torch.kernels import nngp_samples as _torch_nngp, ntk_samples as _torch_ntk, user_samples

    symmetric = X2 is None
    X = X1 if symmetric else np.vstack([X1, X2])
    P1 = X1.shape[0]
    P2 = P1 if symmetric else X2.shape[0]
    idx = _tri(P1, P2, symmetric)
    results = {}
    t0 = time.perf_counter()
    seeds = spawn_seeds(seed, 2 * len(widths))
    pairs = list(zip(idx[0].tolist(), (idx[1] - (0 if symmetric else P1)).tolist()))
    kinds = [k for k, th in (("nngp", theory_nngp), ("ntk", theory_ntk)) if th is not None]
    bar = _progress(total=len(kinds) * len(widths), desc="check", disable=None if progress is None else not progress)
    for kind in kinds:
        samples = []
        if kind == "nngp":
            layers = sorted(layer_theory) if layer_theory else []
            th = np.concatenate([*(layer_theory[l][idx[0], idx[1] - (0 if symmetric else P1)]
                                   for l in layers), theory_nngp[idx[0], idx[1] - (0 if symmetric else P1)]])
            labels = [f"K^{l}[{a},{b}]" for l in layers for a, b in pairs] + [f"K_out[{a},{b}]" for a, b in pairs]
        else:
            th = theory_ntk[idx[0], idx[1] - (0 if symmetric else P1)]
            labels = [f"Θ_out[{a},{b}]" for a, b in pairs]
        for k, N in enumerate(widths):
            s = seeds[k + (0 if kind == "nngp" else len(widths))]
            if network is not None:                 # the user's module, declared (and verified) equivalent
                samples.append(user_samples(network, kind, N, X, idx, inits, s))
                bar.update(1)
                continue
            if backend == "torch":
                samples.append(_torch_nngp(m, N, X, idx, inits, s, layers) if kind == "nngp"
                               else _torch_ntk(m, N, X, idx, inits, s))
                bar.update(1)
                continue
            net = m.finite(int(N))
            if kind == "nngp":
                samples.append(_nngp_samples(m, net, X, idx, inits, s, layers))
            else:
                samples.append(_ntk_samples(net, X, idx, inits, s))
            bar.update(1)
        results[kind] = (th, samples, labels)
    bar.close()
    return results, time.perf_counter() - t0


def _combine(parts, widths, m, seed, seconds, alpha, details, levels=None):
    """One CheckResult from several observables (entries concatenated; samples per width side by side);
    ``levels``: the per-test levels of :func:`analyse`."""
    names = list(parts)
    th = np.concatenate([parts[k][0] for k in names])
    labels = [lab for k in names for lab in parts[k][2]]
    samples = [np.concatenate([parts[k][1][i] for k in names], axis=1) for i in range(len(widths))]
    if len(names) > 1:
        # relative tests per observable would weigh NNGP and NTK by their scale; normalise each block
        scales = np.concatenate([np.full(parts[k][0].size, np.sqrt(np.mean(parts[k][0] ** 2)) or 1.0)
                                 for k in names])
        return analyse(" + ".join(names), widths, th, samples, labels=labels, model=m.to_dict(), seed=seed,
                       seconds=seconds, alpha=alpha, scales=scales, levels=levels,
                       details={**details, "normalised_by": "RMS of each observable (relative statistics only)"})
    return analyse(names[0], widths, th, samples, labels=labels, model=m.to_dict(), seed=seed, seconds=seconds,
                   alpha=alpha, details=details, levels=levels)


combine = _combine          # public within the package (the observable modules combine their blocks with it)


def _model_and_inputs(result, model, X):
    from ..model import as_model

    mdict = None
    params = getattr(result, "params", None)
    if model is None:
        mdict = getattr(result, "model", None)
        if not mdict and isinstance(params, dict):
            mdict = params.get("model")
        if not mdict:
            raise ValueError("check: this result does not record its model; pass model= (a limits.Model) "
                             "or compute the result with model=")
        model = mdict
    m = as_model(model)
    return m


_OBSERVABLES = []          # (accepts(result) -> bool, check function, takes layers=, own defaults), by register()


def register(accepts, *, layers=False, own_defaults=False):
    """Decorator with which an observable module (``limits/checking/<observable>.py``) makes :func:`check`
    dispatch to it: ``accepts(result) -> bool`` says which theory results it checks, and the decorated
    ``fn(result, widths, inits, seed, *, model, X, alpha, progress) -> CheckResult`` checks them
    (``layers=True``: ``fn`` also takes check's ``layers=`` keyword; ``own_defaults=True``: ``fn`` receives
    ``widths``/``inits`` as given — None for its own defaults — and check's ``target_power=``)."""
    def deco(fn):
        _OBSERVABLES.append((accepts, fn, layers, own_defaults))
        return fn

    return deco


def normalise_widths(widths):
    """Widths as a sorted tuple of distinct positive integers (at least two), or ValueError naming ``widths``."""
    widths = tuple(positive_int(w, "widths") for w in np.atleast_1d(widths))
    if len(widths) < 2:
        raise ValueError("widths: give at least two widths (three or more for the finite-size rate)")
    if len(set(widths)) != len(widths):
        raise ValueError("widths must be distinct")
    return tuple(sorted(widths))


def check(result, widths=None, inits=None, seed=0, *, model=None, X=None, alpha=0.01,
          layers=False, progress=None, backend=None, target_power=None, max_inits=MAX_INITS,
          network=None) -> CheckResult:
    """Check a theory ``result`` against finite networks of the same Model (module docstring).

    Supported results: :func:`limits.kernels.kernel` (read-out NNGP and/or NTK between X1 and X2; for a
    composition ``limits.serial(...)`` against :mod:`limits.finite.serial` networks),
    :func:`limits.kernels.nngp` computed with ``model=`` (read-out NNGP and NTK; every layer's
    K^l with ``layers=True``), :func:`limits.dmft.solve` computed with ``model=`` (trained networks'
    outputs; see :mod:`limits.checking.dmft`; with ``X_test`` also the test outputs; with
    ``model=limits.serial(...)`` mean-field compositions: :mod:`limits.checking.dmft_serial`),
    :func:`limits.kernels.response` computed with ``model=`` (finite differences;
    :mod:`limits.checking.response`), :func:`limits.kernels.kernel_fluctuations` with ``model=``
    (variance across inits; :mod:`limits.checking.fluctuations`), :func:`limits.predict.nngp_posterior`
    and :func:`limits.predict.gradient_descent` (finite networks' Bayesian read-out posteriors / GD-trained
    ensembles; :mod:`limits.checking.predict`), :func:`limits.nfd.gia_first_order` (the first-order
    coupled − decoupled GIA gap against finite ResNets of the same depth trained coupled and decoupled;
    :mod:`limits.checking.nfd`). ``widths``: at least three for the rate fit; default 64–512, and for
    predictions three widths inside the asymptotic regime of the problem
    (:func:`limits.checking.predict.default_widths`); ``inits`` ≥ 2 per width (default 256; 64 for
    predictions); ``seed`` fixes every initialisation (per-width streams from
    ``numpy.random.SeedSequence(seed).spawn``). The command line uses these same defaults.
    ``backend="torch"`` (kernel results only; optional extra ``torch``) draws the finite networks as
    ``Model.to_torch`` modules: empirical NNGP from their forward pass, empirical NTK by ``torch.func``
    (:mod:`limits.torch.kernels`), with the same statistics. ``network``: the user's own module
    declared equivalent to the model — a width-taking factory ``factory(N) -> nn.Module`` or a
    :func:`limits.torch.equivalent` result (kernel results; implies ``backend="torch"``). The declaration is
    verified first (shapes, forward and Jacobian at weights copied from ``model.to_torch(N)`` to 1e-10, init
    law; :class:`limits.torch.equivalence.NotEquivalent` naming the tensor otherwise), then the empirical
    read-out NNGP and NTK of the module's own inits are checked (:mod:`limits.torch.equivalence`).

    ``target_power``: the smallest relative error the check should detect with 80 % probability
    (e.g. 0.02). When the first run's power is weaker, it is repeated with inits raised by
    (power/target)² (power ∝ 1/√inits), at most ``max_inits``; the verdict says whether the target
    was met.
    """
    if network is not None:
        if backend not in (None, "torch"):
            raise ValueError(f"check: network= is a torch module; backend={backend!r} cannot run it (omit backend)")
        backend = "torch"
    backend = "numpy" if backend is None else backend
    if backend not in ("numpy", "torch"):
        raise ValueError(f"backend must be 'numpy' or 'torch', got {backend!r}")
    if target_power is not None:
        try:
            target_power = float(target_power)
        except (TypeError, ValueError):
            raise ValueError(f"target_power must be a number in (0, 1), got {target_power!r}") from None
        if not MIN_TARGET_POWER <= target_power < 1:
            raise ValueError(f"target_power must be a relative error in [{MIN_TARGET_POWER:g}, 1), e.g. 0.02, "
                             f"got {target_power}")
    max_inits = positive_int(max_inits, "max_inits", minimum=2)
    kw = dict(model=model, X=X, alpha=alpha, layers=layers, progress=progress, target_power=target_power,
              backend=backend, network=None if network is None else [network])   # a box: verified once
    from ..progress import stage

    quiet = None if progress is None else not progress
    with stage(f"check of {type(result).__name__}", disable=quiet):      # a line within seconds (limits.progress)
        c = _check_once(result, widths, inits, seed, **kw)
    if target_power is not None and c.power > target_power and c.inits < max_inits:
        ratio = c.power / target_power
        more = max_inits if ratio * ratio > max_inits / c.inits else min(max_inits, int(math.ceil(1.1 * c.inits * ratio * ratio)))
        with stage(f"check of {type(result).__name__} with {more} inits (target power {target_power:g})",
                   disable=quiet):
            c = _check_once(result, tuple(int(w) for w in c.widths), more, seed, **kw)
    if target_power is not None:
        c = replace(c, details={**c.details, "target_power": target_power, "max_inits": max_inits})
    return c


def _declared(network, m, widths, X, layers, seed):
    """The verified :class:`limits.torch.equivalence.Equivalence` of ``network`` (before anything is computed)."""
    if layers:
        raise ValueError("check: network= gives the read-out NNGP and NTK of the user's module; its hidden layers "
                         "are not known to limits (layers=True is for Model networks)")
    try:
        from ..torch.equivalence import declare
    except ImportError as exc:
        raise ValueError(f"check: network= needs the optional extra torch (python -m pip install -e \".[torch]\"): "
                         f"{exc}") from None
    network[0] = declare(network[0], m, widths, X=X, seed=seed)       # kept for a repeated run (target_power)
    return network[0]


def _check_once(result, widths, inits, seed, *, model, X, alpha, layers, progress, target_power, backend, network):
    from .._plugins import load_submodules

    load_submodules(__package__)              # the observable modules register themselves on import
    for accepts, check_observable, takes_layers, own_defaults in _OBSERVABLES:
        if own_defaults and accepts(result):  # predictions: widths inside the problem's asymptotic regime
            if backend != "numpy" or network is not None:
                raise ValueError(f"check: backend={backend!r} and network= are available for kernel results, not for "
                                 f"{type(result).__name__}")
            return check_observable(result, widths, inits, seed, model=model, X=X, alpha=alpha, progress=progress,
                                    target_power=target_power)
    widths = normalise_widths(DEFAULT_WIDTHS if widths is None else widths)
    inits = positive_int(DEFAULT_INITS if inits is None else inits, "inits", minimum=2)
    from ..kernels.cross import KernelResult
    from ..kernels.nngp import NNGPResult

    if isinstance(result, KernelResult):
        m = _model_and_inputs(result, model, X)
        X1 = result.X1 if X is None else np.asarray(X, dtype=float)
        if X1 is None:
            raise ValueError("check: pass X= (the inputs of this kernel)")
        X2 = None if result.symmetric else result.X2
        eq = None if network is None else _declared(network, m, widths, X1 if X2 is None else np.vstack([X1, X2]),
                                                    layers, seed)
        parts, secs = _kernel_check(m, X1, X2, result.nngp, result.ntk, widths, inits, seed,
                                    layer_theory=_layer_theory(result, layers), progress=progress, backend=backend,
                                    network=eq)
        return _combine(parts, widths, m, seed, secs, alpha,
                        {"model_text": m.describe(), "observable": "read-out kernels of finite networks", "backend": backend,
                         "P1": X1.shape[0], "P2": None if X2 is None else X2.shape[0], **_network_details(eq)})
    if type(result).__name__ == "SerialKernelResult":       # a composition of limits.layers
        return _serial_check(result, widths, inits, seed, alpha, progress)
    if isinstance(result, NNGPResult):
        m = _model_and_inputs(result, model, X)
        Xr = result.params.get("X") if X is None else np.asarray(X, dtype=float)
        if Xr is None:
            raise ValueError("check: pass X= (the inputs of this NNGP result)")
        Xr = np.asarray(Xr, dtype=float)
        lt = None
        if layers:
            if result.layers is not None:
                lt = {int(l): result.K[i] for i, l in enumerate(result.layers)}
            else:
                lt = {l: result.K[l] for l in range(result.K.shape[0])}
        eq = None if network is None else _declared(network, m, widths, Xr, layers, seed)
        parts, secs = _kernel_check(m, Xr, None, result.K_out, result.Theta_out, widths, inits, seed,
                                    layer_theory=lt, progress=progress, backend=backend, network=eq)
        return _combine(parts, widths, m, seed, secs, alpha,
                        {"model_text": m.describe(), "observable": "empirical kernels of finite networks",
                         "backend": backend, **_network_details(eq)})
    if network is not None:
        raise ValueError(f"check: network= is available for kernel results (limits.kernels.kernel, "
                         f"limits.kernels.nngp), not for {type(result).__name__}")
    if backend != "numpy":
        raise ValueError(f"check: backend={backend!r} is available for kernel results (limits.kernels.kernel, "
                         f"limits.kernels.nngp), not for {type(result).__name__}")
    for accepts, check_observable, takes_layers, own_defaults in _OBSERVABLES:
        if accepts(result):
            extra = {"layers": layers} if takes_layers else {}
            return check_observable(result, widths, inits, seed, model=model, X=X, alpha=alpha, progress=progress,
                                    **extra)
    raise ValueError(f"check: no finite-network observable is known for {type(result).__name__}; supported: "
                     "KernelResult (limits.kernels.kernel), NNGPResult (limits.kernels.nngp with model=), "
                     "ResponseResult (limits.kernels.response with model=), "
                     "KernelFluctuations (limits.kernels.kernel_fluctuations with model=), "
                     "PosteriorResult / GDResult (limits.predict), "
                     "GIAFirstOrder (limits.nfd.gia_first_order), "
                     "DMFTResult (limits.dmft.solve with model=), "
                     "SerialDMFTResult (limits.dmft.solve with model=limits.serial(...))")


def _network_details(eq) -> dict:
    """What the check records of a user's module (none for Model networks)."""
    if eq is None:
        return {}
    f = eq.factory
    return {"network": f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', type(f).__name__)}",
            "equivalence": eq.to_markdown(), "observable": "read-out kernels of the user's module (declared equivalent)"}


def _serial_check(result, widths, inits, seed, alpha, progress=None):
    """Read-out NNGP/NTK of a composition against ``limits.finite.serial`` networks (its module docstring)."""
    from ..finite.serial import kernel_samples
    from ..layers import Serial
    from ..progress import progress as _progress

    m = Serial.from_dict(result.model)
    kinds = [k for k in ("nngp", "ntk") if getattr(result, k) is not None]
    t0 = time.perf_counter()
    bar = _progress(total=len(widths), desc="check composition", disable=None if progress is None else not progress)
    with bar:
        (i, j), samples = kernel_samples(m, result.X1, None if result.symmetric else result.X2, widths, inits, seed,
                                         kinds, progress=bar)
    tag = {"nngp": "K_out", "ntk": "Θ_out"}
    parts = {k: (getattr(result, k)[i, j], samples[k], [f"{tag[k]}[{a},{b}]" for a, b in zip(i, j)]) for k in kinds}
    return _combine(parts, widths, m, seed, time.perf_counter() - t0, alpha,
                    {"model_text": m.describe(), "observable": "read-out kernels of finite compositions"})


def _layer_theory(result, layers):
    if not layers:
        return None
    if result.K is None:
        raise ValueError("check(..., layers=True) needs the per-layer blocks: compute the kernel with layers=True")
    return {l: result.K[l] for l in range(result.K.shape[0])}
