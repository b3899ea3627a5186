"""Theory vs finite networks, with statistics (docs/theory/finite.rst §4).

Component modules ``limits/validate/<component>.py`` (discovered automatically) register cases::

    from limits.validate import Case, register_case

    @register_case("kernels", "residual NNGP per layer, erf, N=500")
    def _(rng, quick):
        ...                      # theory value(s), finite Monte Carlo estimate(s) ± SE
        return Case.from_z(..., theory=t, estimate=e, se=s, rate=fit, rate_expected=-0.5)

``run(["kernels"])`` executes them and returns a :class:`Report`; ``report.to_markdown()`` is
the table of docs/theory/finite.rst §4: case, theory, finite estimate ± SE, z, fitted rate, verdict.
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
from ..stats import RateFit


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
        return cls(component, name, float(t.flat[i]), float(e.flat[i]), float(s.flat[i]), float(z.flat[i]),
                   "pass" if ok else "fail", "statistical",
                   None if rate is None else rate.slope,
                   None if rate is None else (rate.ci_low, rate.ci_high), rate_expected, detail)

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
                   c.rate_expected, f"{detail}; {extra}" if detail else extra)

    @classmethod
    def exact(cls, component, name, reference, value, tol=1e-10, detail=""):
        """Identity check: passes when ``max |value − reference| ≤ tol · max(1, |reference|)``."""
        r = np.atleast_1d(np.asarray(reference, float))
        v = np.atleast_1d(np.asarray(value, float))
        err = np.abs(v - r) / np.maximum(1.0, np.abs(r))
        i = int(np.argmax(err))
        return cls(component, name, float(r.flat[i]), float(v.flat[i]), 0.0, float(err.flat[i]),
                   "pass" if err.flat[i] <= tol else "fail", "exact", detail=detail or f"tol {tol:g}")


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

    def to_markdown(self, title="Validation report") -> str:
        """The verdict table. Deterministic for a given seed: no wall times or dates (they stay in
        ``Case.wall_time_s``), so re-running leaves a committed report unchanged."""
        lines = [f"# {title}", "",
                 f"{sum(c.verdict == 'pass' for c in self.cases)} of {len(self.cases)} cases pass.", "",
                 "| component | case | theory | finite ± SE | z (or rel. err) | fitted rate [CI] | expected | verdict |",
                 "|---|---|---|---|---|---|---|---|"]
        for c in self.cases:
            est = f"{c.estimate:.6g} ± {c.se:.2g}" if c.kind == "statistical" else f"{c.estimate:.12g}"
            z = f"{c.z:+.2f}" if c.kind == "statistical" else f"{c.z:.1e}"
            rate = "" if c.rate is None else f"{c.rate:+.3f} [{c.rate_ci[0]:+.3f}, {c.rate_ci[1]:+.3f}]"
            exp = "" if c.rate_expected is None else f"{c.rate_expected:+.3f}"
            verdict = {"pass": "PASS", "fail": "**FAIL**", "error": "**ERROR**"}[c.verdict]
            lines.append(f"| {c.component} | {c.name} | {c.theory:.6g} | {est} | {z} | {rate} | {exp} | "
                         f"{verdict} |")
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


def write_report(report: Report, path="figures/validation.md", title="Validation report") -> Path:
    """Write the Markdown report atomically (never a partial file); returns its path."""
    return atomic_write_text(path, report.to_markdown(title))
