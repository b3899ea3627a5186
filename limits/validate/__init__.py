"""Theory vs finite networks, with statistics (docs/theory/finite.rst §4).

Component modules ``limits/validate/<component>.py`` (discovered automatically) register cases::

    from limits.validate import Case, register_case

    @register_case("kernels", "residual NNGP per layer, erf, N=500")
    def _(rng, quick):
        ...                      # theory value(s), finite Monte Carlo estimate(s) ± SE
        return Case.from_z(..., theory=t, estimate=e, se=s, rate=fit, rate_expected=-0.5)

``run(["kernels"])`` executes them and returns a :class:`Report`; ``report.to_markdown()`` is
the table of docs/theory/finite.rst §4: case, theory, finite estimate ± SE, z, fitted rate, verdict and the
**detectable bias**: the smallest bias of the theory the case detects with 80 % probability,
``(z_crit + z_0.8)·SE/|theory|`` (z_crit = 4 by default, so ``4.84·SE/|theory|``; the best-resolved entry
of an entrywise comparison), or ``limits.check``'s own power for cases built from a check. For
tests of a fitted slope or of a value predicted to be 0 it is the absolute difference detected; for
cases judged by a fitted rate's confidence interval alone, the slope error detected (CI half-width
+ z_0.8·SE).
Only this package and ``limits.gallery`` import both theory and finite simulators.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..results import Result, atomic_write_text
from ..stats import RateFit, signed


@dataclass(frozen=True)
class Case(Result):
    """One validated statement. ``theory``/``estimate``/``se``/``z`` summarise the worst entry."""

    component: str
    name: str
    theory: float
    estimate: float
    se: float
    z: float
    verdict: str                      # "pass" | "fail" | "error"
    kind: str = "statistical"         # "statistical" | "exact"
    rate: float | None = None         # fitted log–log slope of the finite-size error
    rate_ci: tuple | None = None      # (low, high)
    rate_expected: float | None = None
    detail: str = ""
    wall_time_s: float = 0.0
    detectable: float | None = None  # smallest bias detected with 80 % probability (module docstring)
    detectable_relative: bool = True  # False: an absolute difference (slopes, predictions of 0)

    @classmethod
    def statistical(cls, component, name, theory, estimate, se, z_crit=4.0, rate: RateFit | None = None,
                    rate_expected=None, detail=""):
        """Compare arrays entrywise; report the entry with the largest ``|z|``. Passes when every
        ``|z| ≤ z_crit`` and (if given) the expected rate lies in the fitted rate's CI."""
        t = np.atleast_1d(np.asarray(theory, float))
        e = np.atleast_1d(np.asarray(estimate, float))
        s = np.atleast_1d(np.asarray(se, float))
        t, e, s = np.broadcast_arrays(t, e, s)
        z = (e - t) / np.maximum(s, 1e-300)
        i = int(np.argmax(np.abs(z)))
        ok = bool(np.all(np.abs(z) <= z_crit))
        if rate is not None and rate_expected is not None:
            ok = ok and rate.contains(rate_expected)
        has_rate = rate is not None and rate_expected is not None
        if 0 < z_crit < Z_CRIT_DISABLED:
            det, rel = _detectable(t, s, z_crit, slope=has_rate and t.size == 1
                                   and float(t.flat[0]) == float(rate_expected))
        elif z_crit >= Z_CRIT_DISABLED and has_rate:
            # verdict from the rate CI alone: it detects a slope off by the CI half-width, with 80 %
            # probability when off by that plus z_0.8 standard errors
            det, rel = 0.5 * (rate.ci_high - rate.ci_low) + _z_power() * rate.slope_se, False
        else:                         # no test to size (e.g. a forced failure, z_crit = 0)
            det, rel = float("nan"), True
        return cls(component, name, float(t.flat[i]), float(e.flat[i]), float(s.flat[i]), float(z.flat[i]),
                   "pass" if ok else "fail", "statistical",
                   None if rate is None else rate.slope,
                   None if rate is None else (rate.ci_low, rate.ci_high), rate_expected, detail,
                   detectable=det, detectable_relative=rel)

    @classmethod
    def from_check(cls, component, name, c, detail=""):
        """A case from a :class:`limits.checking.CheckResult` (``limits.check``): the worst entry of
        the N → ∞ extrapolation, the finite-size rate, and the check's own verdict (which also
        includes the scale test)."""
        i = int(np.argmax(np.abs(c.z_inf)))
        extra = (f"widths {[int(n) for n in c.widths]}, {c.inits} inits each; worst |z∞| {c.worst_z:.2f} "
                 f"(threshold {c.z_crit:.2f}); δ∞ = {c.scale_bias:+.4f} ± {c.scale_bias_se:.4f}; "
                 f"power {c.power:.2%}" + ("; " + "; ".join(c.reasons) if c.reasons else ""))
        return cls(component, name, float(c.theory[i]), float(c.extrapolated[i]), float(c.extrapolated_se[i]),
                   float(c.z_inf[i]), "pass" if c.passed else "fail", "statistical", c.rate, tuple(c.rate_ci),
                   c.rate_expected, f"{detail}; {extra}" if detail else extra, detectable=float(c.power))

    @classmethod
    def exact(cls, component, name, reference, value, tol=1e-10, detail=""):
        """Identity check: passes when ``max |value − reference| ≤ tol · max(1, |reference|)``."""
        r = np.atleast_1d(np.asarray(reference, float))
        v = np.atleast_1d(np.asarray(value, float))
        err = np.abs(v - r) / np.maximum(1.0, np.abs(r))
        i = int(np.argmax(err))
        return cls(component, name, float(r.flat[i]), float(v.flat[i]), 0.0, float(err.flat[i]),
                   "pass" if err.flat[i] <= tol else "fail", "exact", detail=detail or f"tol {tol:g}")


# Why a full-size case above the 2 % target was not raised (the cost of the samples it would need, measured
# on the 2-core machine the full report was run on, or why its relative power is not the right yardstick).
NOT_RAISED = {
    ("kernels", "Var(C^l)"): "each init is a full network; the variance of a variance needs ~18× the inits "
                             "(≈ 1 CPU-hour) — its claim is checked at the 8 % level",
    ("nfd", "NFD particles (M = n)"): "a ~700 s SGD run per size; 738× would take weeks",
    ("nfd", "decoupled finite networks vs NFD particles"): "a ~700 s SGD run per size; 100–500× is out of reach",
    ("nfd", "coupled finite networks vs particles"): "a ~700 s SGD run per size; 100–500× is out of reach",
    ("nfd", "GIA at infinite width"): "62× the particles ≈ 2.4 CPU-hours; the claim (no decay in L) is a slope, "
                                      "and limits.check tests the first-order gap against finite ResNets at 2.9 %",
    ("params", "E[s(θ)] − 1 at N = 128"): "affordable (47× a ~10 s case) and still to do: the next full run should raise it",
    ("params", "PC NTK-type"): "the claim is an exponent in N (the fitted rate), not this value",
    ("pc", "1 − cos(∇F*, ∇MSE) ∝ 1/N²"): "84× ≈ 3.8 CPU-hours; the claim is the 1/N² rate, which the CI tests",
    ("pc", "seed 003, M_L = 1"): "the claim is 'no decay in M' (a slope) and a value 19 SE above 0; 291× would "
                                 "not change the verdict",
}


def _weak_line(c, d, target) -> str:
    """One line of the 'exceeds the target' section, with the reason it was not raised when known."""
    why = next((w for (comp, prefix), w in NOT_RAISED.items() if c.component == comp and c.name.startswith(prefix)),
               None)
    return (f"- **{c.component} / {c.name}**: {d:.2%}; {target:.0%} needs {(d / target) ** 2:.3g}× its samples"
            + (f" — not raised: {why}" if why else ""))


Z_CRIT_DEFAULT = 4.0
Z_CRIT_DISABLED = 1e6                  # z_crit at or above this: the entrywise test is switched off


def _z_power():
    from ..checking import Z_POWER

    return Z_POWER


def _detectable(theory, se, z_crit=Z_CRIT_DEFAULT, slope=False):
    """(smallest bias detected with 80 % probability, relative?) for an entrywise |z| ≤ z_crit test:
    a relative bias δ moves entry i by δ·t_i, so the best-resolved entry decides,
    δ = min_i (z_crit + z_0.8)·se_i/|t_i|. Slope tests and predictions of 0: the absolute difference
    (z_crit + z_0.8)·min se."""
    from ..checking import Z_POWER

    t = np.abs(np.atleast_1d(np.asarray(theory, float))).ravel()
    s = np.atleast_1d(np.asarray(se, float)).ravel()
    t, s = np.broadcast_arrays(t, s)
    k = z_crit + Z_POWER
    ok = np.isfinite(s) & np.isfinite(t)
    if not np.any(ok):
        return None, True
    t, s = t[ok], s[ok]
    if slope or not np.any(t > 0):
        return float(k * np.min(s)), False
    return float(np.min(k * s[t > 0] / t[t > 0])), True


def _detectable_text(c) -> str:
    if c.kind != "statistical":
        return ""
    det, rel = c.detectable, c.detectable_relative
    if det is None:                   # a case built directly: its reported (worst) entry
        det, rel = _detectable(c.theory, c.se, Z_CRIT_DEFAULT,
                               slope=c.rate is not None and c.rate_expected is not None
                               and c.theory == c.rate_expected)
    if det is None or not np.isfinite(det):
        return ""
    return f"{det:.2%}" if rel else f"±{det:.3g} (abs.)"


@dataclass(frozen=True)
class _Registered:
    component: str
    name: str
    fn: Callable
    slow: bool


_CASES: list[_Registered] = []


def register_case(component: str, name: str, slow: bool = False):
    def deco(fn):
        _CASES.append(_Registered(component, name, fn, slow))
        return fn

    return deco


def _load_all():
    from .._plugins import load_submodules

    load_submodules(__name__)


def components() -> list[str]:
    _load_all()
    return sorted({c.component for c in _CASES})


@dataclass(frozen=True)
class Report:
    cases: tuple

    @property
    def passed(self) -> bool:
        return all(c.verdict == "pass" for c in self.cases)

    def to_markdown(self, title="Validation report", power_target: float | None = None) -> str:
        """The verdict table. Deterministic for a given seed: no wall times or dates (they stay in
        ``Case.wall_time_s``), so re-running leaves a committed report unchanged. ``power_target``
        (e.g. 0.02): also list the cases whose relative detectable bias exceeds it, with the factor
        (detectable/target)² by which their sample size would have to grow (SE ∝ samples^-1/2)."""
        lines = [f"# {title}", "",
                 f"{sum(c.verdict == 'pass' for c in self.cases)} of {len(self.cases)} cases pass.", "",
                 "Detectable bias: the smallest bias of the theory a statistical case detects with 80 % "
                 "probability — (z_crit + 0.84)·SE/|theory| with z_crit = 4 (relative, %), or for slopes and "
                 "predictions of 0 the absolute difference (abs.; for cases judged by a rate's CI alone, the "
                 "slope error CI half-width + 0.84·SE); for cases run through `limits.check`, its power (α = 0.01).",
                 "",
                 "| component | case | theory | finite ± SE | z (or rel. err) | fitted rate [CI] | expected | "
                 "detectable bias | verdict |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for c in self.cases:
            est = f"{c.estimate:.6g} ± {c.se:.2g}" if c.kind == "statistical" else f"{c.estimate:.12g}"
            z = f"{c.z:+.2f}" if c.kind == "statistical" else f"{c.z:.1e}"
            rate = "" if c.rate is None else \
                f"{signed(c.rate, 3)} [{signed(c.rate_ci[0], 3)}, {signed(c.rate_ci[1], 3)}]"
            exp = "" if c.rate_expected is None else f"{signed(c.rate_expected, 3)}"
            verdict = {"pass": "PASS", "fail": "**FAIL**", "error": "**ERROR**"}[c.verdict]
            lines.append(f"| {c.component} | {c.name} | {c.theory:.6g} | {est} | {z} | {rate} | {exp} | "
                         f"{_detectable_text(c)} | {verdict} |")
        if power_target is not None:
            weak = [(c, c.detectable) for c in self.cases if c.kind == "statistical" and c.detectable is not None
                    and c.detectable_relative and np.isfinite(c.detectable) and c.detectable > power_target]
            lines += ["", f"## Cases whose detectable bias exceeds {power_target:.0%}", ""]
            if not weak:
                lines.append(f"None: every relative case detects a {power_target:.0%} bias.")
            lines += [_weak_line(c, d, power_target) for c, d in weak]
            n_abs = sum(1 for c in self.cases if c.kind == "statistical" and not c.detectable_relative)
            if n_abs:
                lines += ["", f"{n_abs} statistical case(s) test a slope or a prediction of 0: their detectable "
                              "bias is an absolute difference (abs.), not judged against the relative target."]
        details = [c for c in self.cases if c.detail]
        if details:
            lines += ["", "## Notes", ""]
            lines += [f"- **{c.component} / {c.name}**: {c.detail}" for c in details]
        return "\n".join(lines) + "\n"


def run(components_: list[str] | None = None, quick: bool = True, seed: int = 0, include_slow=True,
        progress_bar=True) -> Report:
    """Run the registered cases of the given components (all when None)."""
    from ..checks import positive_int

    positive_int(seed, "seed", minimum=0)
    _load_all()
    known = {c.component for c in _CASES}
    if components_:
        unknown = set(components_) - known
        if unknown:
            raise ValueError(f"unknown component(s) {sorted(unknown)}; available: {sorted(known)}")
    todo = [c for c in _CASES if (not components_ or c.component in components_)
            and (include_slow or not c.slow)]
    from ..progress import progress

    out = []
    for i, c in enumerate(progress(todo, desc="validate", disable=None if progress_bar else True)):
        rng = np.random.default_rng([seed, i])
        t0 = time.perf_counter()
        try:
            res = c.fn(rng, quick)
            res = list(res) if isinstance(res, (list, tuple)) else [res]
        except Exception as exc:  # a crashing case is a failed case, reported, not hidden
            res = [Case(c.component, c.name, float("nan"), float("nan"), float("nan"), float("nan"),
                        "error", detail=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")]
        dt = time.perf_counter() - t0
        out += [Case(**{**r.__dict__, "wall_time_s": dt / len(res)}) for r in res]
    return Report(tuple(out))


def write_report(report: Report, path="figures/validation.md", title="Validation report",
                 power_target: float | None = None) -> Path:
    """Write the Markdown report atomically (never a partial file); returns its path."""
    return atomic_write_text(path, report.to_markdown(title, power_target=power_target))


FULL_POWER_TARGET = 0.02              # full-size reports list the cases that cannot detect a 2 % bias
