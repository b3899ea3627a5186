"""Calibration of ``limits.check``: its false-alarm rate on correct predictions (family-wise α = 1 %) and its power on
wrong ones, over independent checks (each its own ``seed``), with the previous rule recomputed on the same samples.
A validation report, not a timing::

    python benchmarks/check_calibration.py --runs 200 --power-runs 40 --json benchmarks/results/calibration/check.json
    python benchmarks/check_calibration.py --only "kernel: erf MLP" --runs 200 --json part.json   # one case
    python benchmarks/check_calibration.py --merge a.json b.json --json benchmarks/results/calibration/check.json
    python benchmarks/check_calibration.py --rows      # the table rows from that file
    python benchmarks/check_calibration.py --write     # put them into docs/workflow.rst ("How far to trust a verdict")

The committed data's parts and their commands: benchmarks/README.md ("Calibration of limits.check").

Cases (each at the check's defaults unless stated): the NNGP posterior of a depth-2 erf MLP with s², σ² fitted
(12 training, 2 test points, 2 outputs; 48 inits, and 24, 12 and 6 inits where the SEs are least precise); a CNN-GP
posterior (a composition on 4×4 images, s², σ² fitted);
the read-out NNGP + NTK of an erf MLP and of a relu ResNet on 4 inputs; the GD ensemble of an erf MLP (3 times;
widths 32–128 and 32 inits — the default widths cost 30 s a check). Wrong posteriors (the MLP task): covariance ×
1.1 and × 1.3, mean × 1.05, and near the detectable bias cov × 1.03, mean × 1.02. The previous rule (each of the verdict's tests at α, normal reference for every ratio
estimate/SE) is recomputed from each check's own numbers (:func:`previous_verdict`); its detectable bias was
(z_{α/2} + z_{0.8})·se(δ∞).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.stats import binom, binomtest, norm

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "results" / "calibration" / "check.json"
ALPHA = 0.01
POSTERIOR = "posterior: erf MLP, s², σ² fitted (48 inits)"
BEGIN = "<!-- check-calibration:begin (python benchmarks/check_calibration.py --write) -->"
END = "<!-- check-calibration:end -->"


def _mlp_posterior():
    import limits

    rng = np.random.default_rng(5)
    m = limits.mlp(3, 2, d_out=2, activation="erf", sigma_w2=1.5, sigma_b2=0.3)
    X = rng.standard_normal((12, 3))
    Y = np.stack([np.sin(2 * X[:, 0]), np.cos(X[:, 1])], 1) * 0.3 + 0.05 * rng.standard_normal((12, 2))
    return limits.predict.nngp_posterior(m, X, Y, rng.standard_normal((2, 3)), noise="auto")


def _cnn_posterior():
    import limits

    L = limits.layers
    rng = np.random.default_rng(2)
    X = rng.standard_normal((15, 4, 4, 1))
    Y = np.tanh(X.mean(axis=(1, 2, 3)))[:, None] * 3.0
    cnn = limits.serial(L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.05), L.Activation("relu"), L.GlobalAvgPool(),
                        L.Dense(sigma_w2=1.0, sigma_b2=0.05))
    return limits.predict.nngp_posterior(cnn, X[:12], Y[:12], X[12:], noise="auto")


def _kernel(model):
    import limits

    X = np.random.default_rng(0).standard_normal((4, 3))
    return limits.kernels.kernel(model, X)


def _gd():
    import limits

    rng = np.random.default_rng(0)
    m = limits.mlp(3, 1, activation="erf", sigma_w2=1.5, sigma_b2=0.1, lr=0.5)
    X = rng.standard_normal((8, 3))
    return limits.predict.gradient_descent(m, X, np.sin(X[:, 0]), rng.standard_normal((3, 3)), t=[1, 5, 20],
                                           flow=False, learning_rate=0.2)


def cases():
    """{name: (build() -> result, check keywords)}; the first one is also checked with the WRONG posteriors."""
    import limits

    return {
        POSTERIOR: (_mlp_posterior, {"inits": 48}),
        "posterior: erf MLP, s², σ² fitted (24 inits)": (_mlp_posterior, {"inits": 24}),
        "posterior: erf MLP, s², σ² fitted (12 inits)": (_mlp_posterior, {"inits": 12}),
        "posterior: erf MLP, s², σ² fitted (6 inits)": (_mlp_posterior, {"inits": 6}),
        "posterior: CNN-GP on 4×4 images (composition), s², σ² fitted": (_cnn_posterior, {}),
        "kernel: erf MLP, NNGP + NTK": (lambda: _kernel(limits.mlp(3, 2, activation="erf", sigma_w2=1.5, sigma_b2=0.3)), {}),
        "kernel: relu ResNet, NNGP + NTK": (lambda: _kernel(limits.resnet(3, 2, activation="relu")), {}),
        "GD ensemble: erf MLP (widths 32–128, 32 inits)": (_gd, {"widths": (32, 64, 128), "inits": 32}),
    }


WRONG = {"cov × 1.1": lambda p: replace(p, cov=1.1 * p.cov, var=1.1 * p.var),
         "cov × 1.3": lambda p: replace(p, cov=1.3 * p.cov, var=1.3 * p.var),
         "mean × 1.05": lambda p: replace(p, mean=1.05 * p.mean),
         "cov × 1.03": lambda p: replace(p, cov=1.03 * p.cov, var=1.03 * p.var),
         "mean × 1.02": lambda p: replace(p, mean=1.02 * p.mean)}
MARGINAL = ("cov × 1.03", "mean × 1.02")      # near the stated detectable bias: power measured, not required


# ---------------------------------------------------------------------------------------------- previous rule
def _old_tests(theory, extrap, se, dinf, dse, widths, rms, rms_se, alpha):
    """The previous tests of one analysis, each at α: entries (Bonferroni, normal), bias (|δ∞/se| > z_{α/2}), rate
    (99 % CI); {test: failed}."""
    from limits.stats import loglog_fit

    z = np.abs((np.asarray(extrap) - np.asarray(theory)) / np.maximum(se, 1e-300))
    out = {"entries": bool(np.max(z) > norm.isf(alpha / (2 * z.size))), "bias": bool(abs(dinf / dse) > norm.isf(alpha / 2))}
    if len(widths) >= 3 and np.all(np.asarray(rms) > 0):
        out["rate"] = not loglog_fit(widths, np.asarray(rms), yerr=np.asarray(rms_se), level=0.99).contains(-0.5)
    return out


def previous_tests(c, alpha=ALPHA) -> dict:
    """{analysis: {test: failed}} of the rule before this calibration, from the numbers of a CheckResult ``c``
    ("all" the whole check; for checks with blocks also each block)."""
    w = [int(n) for n in c.widths]
    out = {"all": _old_tests(c.theory, c.extrapolated, c.extrapolated_se, c.scale_bias, c.scale_bias_se, w, c.rms,
                             c.rms_se, alpha)}
    start = 0
    for name, b in (c.details.get("blocks") or {}).items():
        sl = slice(start, start + b["entries"])
        start += b["entries"]
        out[name] = _old_tests(c.theory[sl], c.extrapolated[sl], c.extrapolated_se[sl], b["scale_bias"],
                               b["scale_bias_se"], w, b["rms"], b["rms_se"], alpha)
    return out


def previous_verdict(c, alpha=ALPHA, tests=None) -> str:
    """The verdict of the rule before this calibration: every test at α, the studentised ratios against the normal
    distribution; for checks with blocks (predictions) each block's tests and the combination's, a failing block
    outside the asymptotic regime being inconclusive."""
    tests = previous_tests(c, alpha) if tests is None else tests
    comb = any(tests["all"].values())
    blocks = c.details.get("blocks")
    if not blocks:
        return "fail" if comb else "pass"
    verdicts = ["pass" if not any(tests[name].values()) else ("fail" if b["regime"]["level"] == "inside" else "inconclusive")
                for name, b in blocks.items()]
    if "fail" in verdicts or (comb and "inconclusive" not in verdicts):
        return "fail"
    return "inconclusive" if "inconclusive" in verdicts else "pass"


def previous_power(c) -> float:
    return float((norm.isf(ALPHA / 2) + norm.isf(0.2)) * c.scale_bias_se)


# ---------------------------------------------------------------------------------------------- runs
def _record(c, seed, cpu):
    """One check: both verdicts, the previous rule's tests that fired ("analysis: test"), and how many entries have
    |ratio| > 3 as estimate/SE (``tail_ratio``) and as the check's normal equivalent (``tail_z``), of ``entries``."""
    tests = previous_tests(c)
    z_raw = np.abs((c.extrapolated - c.theory) / c.extrapolated_se)
    untested = [f"all: {k}" for k in c.not_tested] + [f"{name}: {k}" for name, b in (c.details.get("blocks") or {}).items()
                                                      for k in (b.get("not_tested") or {})]
    out = {"seed": seed, "verdict": c.verdict, "not_tested": untested,
           "previous": previous_verdict(c, tests=tests), "previous_fired": [f"{an}: {t}" for an, ts in tests.items() for t, f in ts.items() if f],
           "worst_z": round(c.worst_z, 3), "scale_z": round(c.scale_z, 3), "tail_ratio": int(np.sum(z_raw > 3)),
           "tail_z": int(np.sum(np.abs(c.z_inf) > 3)), "entries": int(z_raw.size),
           "power": round(c.power, 5), "previous_power": round(previous_power(c), 5), "cpu": round(cpu, 2)}
    if c.verdict != "pass":
        out["reasons"] = list(c.reasons)[:3]
    return out


def run_case(result, kw, runs, first_seed=1000, progress=None):
    import limits

    out = []
    for s in range(runs):
        t = time.process_time()
        c = limits.check(result, seed=first_seed + s, progress=False, **kw)
        out.append(_record(c, first_seed + s, time.process_time() - t))
        if progress is not None:
            progress.update(1)
    return out


def run(n_runs, power_runs, only=None, save=None):
    import limits
    from limits.progress import progress as bar

    data = {"alpha": ALPHA, "limits_commit": _commit(), "command": "python benchmarks/check_calibration.py " + " ".join(
        sys.argv[1:]), "cases": {}, "wrong": {}}
    chosen = {k: v for k, v in cases().items() if not only or only in k}
    total = n_runs * len(chosen) + (power_runs * len(WRONG) if POSTERIOR in chosen else 0)
    pb = bar(total=total, desc="check calibration")
    for name, (build, kw) in chosen.items():
        r = build()
        c0 = limits.check(r, seed=0, progress=False, **kw)
        data["cases"][name] = {"check": {k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()},
                               "widths": [int(w) for w in c0.widths], "inits": c0.inits, "entries": int(c0.theory.size),
                               "runs": run_case(r, kw, n_runs, progress=pb)}
        data["cases"][name]["cpu_seconds"] = round(sum(x["cpu"] for x in data["cases"][name]["runs"]), 1)
        if save:
            save(data)
        if name == POSTERIOR and power_runs:
            for wname, f in WRONG.items():
                w = run_case(f(r), kw, power_runs, first_seed=5000, progress=pb)
                data["wrong"][wname] = {"case": name, "runs": w, "cpu_seconds": round(sum(x["cpu"] for x in w), 1)}
                if save:
                    save(data)
    pb.close()
    return data


def _commit():
    import subprocess

    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def dumps(data) -> str:
    """The data as JSON with one check per line (readable diffs, a tenth of the size of an indented dump)."""
    tokens, runs = {}, {}
    shallow = {k: v for k, v in data.items() if k not in ("cases", "wrong")}
    for group in ("cases", "wrong"):
        shallow[group] = {}
        for name, d in data.get(group, {}).items():
            tok = f"@@runs {group} {len(tokens)}@@"
            tokens[tok] = d["runs"]
            shallow[group][name] = dict(d, runs=tok)
    text = json.dumps(shallow, indent=1, ensure_ascii=False)
    for tok, rs in tokens.items():
        runs[tok] = "[\n" + ",\n".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in rs) + "\n]"
        text = text.replace(json.dumps(tok), runs[tok], 1)
    return text + "\n"


def _only(command):
    """The ``--only`` substring of a recorded command (None without one)."""
    import re

    m = re.search(r"--only (.+?)(?: --|$)", command or "")
    return m.group(1) if m else None


def merge(parts):
    """One data set from partial runs (each case from the last part that has it); the parts' commands, commits and
    CPU seconds are kept. A merged file may itself be a part (re-running some cases of the committed data): its
    recorded parts are kept, except those whose ``--only`` case a later part replaces."""
    out = dict(parts[0], cases={}, wrong={}, parts=[])
    for p in parts:
        new = {k: v for k, v in p["cases"].items() if v["runs"]}                    # --runs 0: wrong posteriors only
        out["parts"] = [q for q in out["parts"] if not (_only(q["command"]) and any(_only(q["command"]) in k
                                                                                    for k in new))]
        out["cases"].update(new)
        out["wrong"].update(p["wrong"])
        out["parts"] += p.get("parts") or [{k: p.get(k) for k in ("command", "limits_commit", "cpu_seconds")}]
    out["cpu_seconds"] = round(sum(q.get("cpu_seconds") or 0 for q in out["parts"]), 1)
    return out


# ---------------------------------------------------------------------------------------------- rows
def rate(k, n, alpha=ALPHA):
    """k/n, its exact (Clopper–Pearson) 95 % interval and the one-sided p-value P(K ≥ k) of k or more false alarms
    at the nominal level α."""
    lo, hi = binomtest(k, n).proportion_ci(0.95, method="exact")
    return k / n, (float(lo), float(hi)), float(binom.sf(k - 1, n, alpha))


def _pct(x):
    return f"{100 * x:.2f}"


def _fa(runs, key, alpha=ALPHA, pvalue=True):
    k = sum(r[key] == "fail" for r in runs)
    p, (lo, hi), pv = rate(k, len(runs), alpha)
    return f"{k}/{len(runs)} = {_pct(p)} % [{_pct(lo)}, {_pct(hi)}]" + (f", p = {pv:.2g}" if pvalue else "")


def _inconclusive(runs):
    """k/n inconclusive and, per criterion not tested, in how many checks (e.g. "gd cov: bias 400"; the rate, not
    required, is counted too)."""
    if not any("not_tested" in r for r in runs):
        return "not recorded (runs before the rule)"
    k = sum(r["verdict"] == "inconclusive" for r in runs)
    counts = {}
    for r in runs:
        for t in r.get("not_tested", []):
            counts[t] = counts.get(t, 0) + 1
    what = ", ".join(f"{t} {v}" for t, v in sorted(counts.items()))
    return f"{k}/{len(runs)}" + (f" ({what})" if what else "")


def rows(data) -> list:
    """The rows (Markdown table lines) of docs/workflow.rst from the calibration data."""
    a = data["alpha"]
    data = dict(data, cases={k: v for k, v in data["cases"].items() if v["runs"]})
    lines = [f"| correct prediction (widths; inits) | false alarms now: k/n = rate [exact 95 % CI], one-sided p vs "
             f"α = {a:g} | inconclusive now (criteria not tested) | previous rule, same checks | detectable bias now / "
             "before (median) |",
             "|---|---|---|---|---|"]
    for name, d in data["cases"].items():
        runs = d["runs"]
        ws = d["widths"]
        lines.append(f"| {name} ({ws[0]}–{ws[-1]}; {d['inits']}) | {_fa(runs, 'verdict', a)} | {_inconclusive(runs)} | "
                     f"{_fa(runs, 'previous', a)} | {np.median([r['power'] for r in runs]):.2%} / "
                     f"{np.median([r['previous_power'] for r in runs]):.2%} |")
    lines += ["", "| correct prediction: where the previous rule's false alarms came from | tests that fired (analysis: test "
                  "× checks) | entries with \\|ratio\\| > 3: as estimate/SE vs N(0, 1) → now (t → normal) |", "|---|---|---|"]
    for name, d in data["cases"].items():
        runs = d["runs"]
        fired = {}
        for r in runs:
            for test in r["previous_fired"]:
                fired[test] = fired.get(test, 0) + 1
        n = sum(r["entries"] for r in runs)
        tr, tz = sum(r["tail_ratio"] for r in runs) / n, sum(r["tail_z"] for r in runs) / n
        lines.append(f"| {name} | {', '.join(f'{k} {v}' for k, v in fired.items() if v) or 'none'} | "
                     f"{tr:.4f} vs {2 * norm.sf(3):.4f} → {tz:.4f} ({n} entries) |")
    if data["wrong"]:
        lines += ["", "| wrong posterior (erf MLP task, 48 inits) | power now: flagged k/n = rate [exact 95 % CI] | "
                      "inconclusive now | flagged by the previous rule |", "|---|---|---|---|"]
        for name, d in data["wrong"].items():
            lines.append(f"| {name} | {_fa(d['runs'], 'verdict', pvalue=False)} | {_inconclusive(d['runs'])} | "
                         f"{_fa(d['runs'], 'previous', pvalue=False)} |")
    return lines


PAGE = ROOT / "docs/workflow.rst"          # the page whose marked block holds the rows (rendered by docs/_ext)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=40, help="independent checks per correct prediction")
    ap.add_argument("--power-runs", type=int, default=20, help="independent checks per wrong posterior")
    ap.add_argument("--only", help="a substring of one case's name (partial runs, merged with --merge)")
    ap.add_argument("--json", help="write the data here")
    ap.add_argument("--merge", nargs="+", help="merge partial JSON files into --json")
    from _tables import add_table_options, show_or_write

    add_table_options(ap, "--rows", "print the table rows from the data", "write the table rows into docs/workflow.rst")
    a = ap.parse_args(argv)
    from limits.results import atomic_write_text

    if a.merge:
        atomic_write_text(a.json or DATA, dumps(merge([json.loads(Path(p).read_text()) for p in a.merge])))
        return 0
    if show_or_write(a, a.json or DATA, PAGE, (BEGIN, END), rows, rows, show="rows"):
        return 0

    def save(d):
        if a.json:
            atomic_write_text(a.json, dumps(d))

    t = time.process_time()
    data = run(a.runs, a.power_runs, a.only, save=save)
    data["cpu_seconds"] = time.process_time() - t
    save(data)
    print("\n".join(rows(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
