"""Validation of the DMFT of compositions (``limits.dmft.solve(X, y, model=limits.serial(...))``, docs/theory/dmft.rst
§6) against finite mean-field compositions trained by the same GD at widths 64–1024 — the statistics of
``limits.check`` (:mod:`limits.checking.dmft_serial`: f(t), the loss and the position-averaged feature-kernel changes,
N → ∞ extrapolation, z, finite-size rate, power) — per case:

* ``main``: the check of the DMFT (seed 0) and, per quantity and time, the same statistics on that row alone;
* ``wrong``: the same finite samples against wrong DMFTs — γ0 scaled by 1.1 (solved at 1.1·γ0, labelled γ0), a
  dropped spatial index (the feature-learning terms with position-averaged kernels, ``ablate="spatial"``) and, with a
  LayerNorm, its backward without the projection;
* ``calibration``: ``--repeats`` independent repetitions (new DMFT replicas and new finite networks): the false-alarm
  rate of the check on the correct DMFT and its rejection rate (power) of the wrong ones;
* ``lazy``: the DMFT at γ0 = 1e-4 against ``limits.predict.gradient_descent`` on the composition's NTK (max |z|).

A validation report, not a timing (CPU seconds are recorded; the costs below are measured, in one session on a
shared machine)::

    nice -n 10 python benchmarks/dmft_serial_validation.py --case A --repeats 20   # 22 CPU-s + 21 per repetition
    nice -n 10 python benchmarks/dmft_serial_validation.py --case D --repeats 10   # 26 CPU-s + 29 per repetition
    nice -n 10 python benchmarks/dmft_serial_validation.py --case B --repeats 4    # 136 CPU-s + more per repetition
    nice -n 10 python benchmarks/dmft_serial_validation.py --case C --repeats 20   # > 150 CPU-s before a repetition
    nice -n 10 python benchmarks/dmft_serial_validation.py --cost                  # estimate vs measured
    python benchmarks/dmft_serial_validation.py --table --write                    # the docs' tables

(the recorded run: A 8 and D 6 repetitions, B none, C unfinished — docs/theory/dmft.rst §6.5). Run cases in
parallel with ``--out FILE`` each and copy them in with ``--merge FILE``; a case is saved after its seed-0 part and
after every repetition, so an interrupted run keeps what it measured.

writes ``benchmarks/results/dmft/dmft_serial_validation.json`` (cases are replaced one by one).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "dmft" / "dmft_serial_validation.json"
INC = ROOT / "docs" / "theory" / "dmft_serial_validation.inc"
WIDTHS = (64, 128, 256, 512, 1024)


def digits(a=3, b=8, n=8):
    """The first ``n`` images of digits a and b of scikit-learn's bundled 8×8 digits (pixels/16 − 0.3), y = ±1."""
    from sklearn.datasets import load_digits

    d = load_digits()
    idx = np.flatnonzero(np.isin(d.target, [a, b]))[:n]
    return (d.images[idx] / 16.0 - 0.3)[..., None], np.where(d.target[idx] == a, 1.0, -1.0)


def standardised(X):
    """Each image with zero mean and unit variance over its pixels."""
    return (X - X.mean(axis=(1, 2), keepdims=True)) / X.std(axis=(1, 2), keepdims=True)


def cases():
    """{name: settings}: digits 3 vs 8 pooled to 4×4 by the composition's first layer (case A: standardised images)."""
    import limits

    L = limits.layers
    X, y = digits()
    Z = standardised(X)
    pool = L.AvgPool((2, 2))
    return {
        "A": dict(text="AvgPool 2×2 → Conv 3×3 SAME (σ_w² 2, σ_b² 0.05) → relu → GlobalAvgPool → Dense; 6 + 2 test "
                       "images (standardised)",
                  comp=limits.serial(pool, L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.05), L.Activation("relu"),
                                     L.GlobalAvgPool(), L.Dense()),
                  X=Z[:6], y=y[:6], X_test=Z[6:8], gamma0=1.0, dt=0.5, steps=8, M=4000, replicas=32, inits=256),
        "B": dict(text="AvgPool 2×2 → Conv 3×3 SAME (σ_b² 0.05) → tanh → Conv 2×2 VALID stride 2 → tanh → "
                       "GlobalAvgPool → Dense; 4 images",
                  comp=limits.serial(pool, L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.05), L.Activation("tanh"),
                                     L.Conv((2, 2), "VALID", strides=(2, 2), sigma_w2=2.0), L.Activation("tanh"),
                                     L.GlobalAvgPool(), L.Dense()),
                  X=X[:4], y=y[:4], X_test=None, gamma0=1.0, dt=0.5, steps=5, M=150, replicas=32, inits=128),
        "C": dict(text="AvgPool 2×2 → Conv 3×3 stride 2 SAME → erf → Flatten → Dense (σ_b² 0.1) → erf → Dense; "
                       "5 images",
                  comp=limits.serial(pool, L.Conv((3, 3), "SAME", strides=(2, 2), sigma_w2=2.0), L.Activation("erf"),
                                     L.Flatten(), L.Dense(sigma_w2=1.5, sigma_b2=0.1), L.Activation("erf"), L.Dense()),
                  X=X[:5], y=y[:5], X_test=None, gamma0=1.0, dt=0.3, steps=6, M=2000, replicas=32, inits=256),
        "D": dict(text="AvgPool 2×2 → Conv 3×3 SAME (σ_w² 2, σ_b² 0.05) → LayerNorm → relu → GlobalAvgPool → Dense; 6 "
                       "images (standardised)",
                  comp=limits.serial(pool, L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.05), L.LayerNorm(),
                                     L.Activation("relu"), L.GlobalAvgPool(), L.Dense()),
                  X=Z[:6], y=y[:6], X_test=None, gamma0=1.0, dt=0.5, steps=8, M=4000, replicas=32, inits=256),
    }


def _solve(c, seed, gamma0=None, ablate=None):
    from limits.dmft.serial import solve_serial

    return solve_serial(c["X"], c["y"], comp=c["comp"], gamma0=gamma0 or c["gamma0"], dt=c["dt"], steps=c["steps"],
                        M=c["M"], replicas=c["replicas"], seed=seed, X_test=c["X_test"], ablate=ablate)


def wrong_variants(c, seed):
    """{name: DMFT result}: γ0 × 1.1 (relabelled γ0), a dropped spatial index and, with a LayerNorm, its backward
    without the projection onto the normalised field (s⁻¹w instead of s⁻¹(w − ⟨w⟩ − a⟨a w⟩))."""
    g = _solve(c, seed, gamma0=1.1 * c["gamma0"])
    out = {"gamma0 x 1.1": dataclasses.replace(g, gamma0=c["gamma0"]),
           "no spatial index": _solve(c, seed, ablate="spatial")}
    if any(type(l).__name__ == "LayerNorm" for l in c["comp"].layers):
        out["LayerNorm without projection"] = _without_projection(c, seed)
    return out


def _without_projection(c, seed):
    import limits.dmft.serial.fields as F

    keep = F.Psi.backward

    def backward(self, z, a, t=None, frozen=False):
        lead = z.shape[:-1]
        w = self.dphi(a) * F._mat(z.reshape(lead + (self.P, self.b.S_x)), self.b.Mb, transpose=True)
        if self.ln is not None:
            w = w * self.stats[t]["inv"]
        return F._mat(w, self.b.Ma, transpose=True).reshape(lead + (-1,))

    F.Psi.backward = backward
    try:
        return _solve(c, seed)
    finally:
        F.Psi.backward = keep


def _summary(chk):
    """The check's verdict ('pass', 'fail' or 'inconclusive'; ``passed`` True, False or None) and statistics."""
    return {"passed": chk.passed, "verdict": chk.verdict, "scale_z": float(chk.details["scale_z"]),
            "worst_z": chk.worst_z, "power": chk.power, "scale_bias": chk.scale_bias,
            "scale_bias_se": chk.scale_bias_se, "rate": chk.rate, "rate_ci": list(chk.rate_ci), "z_crit": chk.z_crit,
            "reasons": list(chk.reasons)}


def rows(res, widths, samples):
    """Per (quantity, time): the check's statistics on that row's entries alone."""
    from limits.checking.dmft_serial import analyse_samples, theory_blocks

    from limits.checking.dmft_serial import kernel_steps

    keep = {round(float(res.t[k]), 9) for k in kernel_steps(int(res.t.size - 1))}
    out, start = [], 0
    for name, th, se, labels in theory_blocks(res):
        groups = {}
        for j, lab in enumerate(labels):
            q = lab.split("(t=")[0]
            t = float(lab.split("(t=")[1].split(",")[0].split(")")[0])
            groups.setdefault((q if name != "f_test" else "f (test)", t), []).append(start + j)
        for (q, t), cols in groups.items():
            if round(t, 9) not in keep:
                continue
            chk = analyse_samples(res, widths, samples, columns=cols)
            w = int(np.argmax(np.abs(chk.z_inf)))
            out.append({"quantity": q, "t": t, "entries": len(cols), "theory": float(chk.theory[w]),
                        "theory_se": float(se[cols[w] - start]), "extrapolated": float(chk.extrapolated[w]),
                        "extrapolated_se": float(chk.extrapolated_se[w]), "worst_entry": chk.labels[w],
                        "z": float(chk.z_inf[w]), "scale_bias": chk.scale_bias, "scale_bias_se": chk.scale_bias_se,
                        "power": chk.power, "rate": chk.rate, "passed": bool(chk.passed)})
        start += th.size
    return out


def lazy_agreement(c):
    import limits
    from limits.dmft.serial import solve_serial

    d = solve_serial(c["X"], c["y"], comp=c["comp"], gamma0=1e-4, dt=c["dt"], steps=c["steps"], M=c["M"],
                     replicas=c["replicas"], seed=11)
    g = limits.predict.gradient_descent(c["comp"], c["X"], c["y"], c["X"], t=np.arange(c["steps"] + 1),
                                        learning_rate=c["dt"], flow=False).mean_train[..., 0]
    z = np.abs(d.f[1:] - g[1:]) / d.f_se[1:]
    zk = np.abs(d.ntk[0] - d.ntk_lazy) / np.maximum(d.ntk_se[0], 1e-300)
    return {"max_z_f": float(z.max()), "max_z_ntk0": float(zk.max()), "entries": int(z.size),
            "rel_se_f": float(np.sqrt(np.mean(d.f_se[1:] ** 2) / np.mean(g[1:] ** 2)))}


def run_case(name, c, repeats, widths, save=None):
    from limits.checking.dmft_serial import analyse_samples, finite_samples

    t0 = time.process_time()
    res = _solve(c, 0)
    samples = finite_samples(res, widths, c["inits"], seed=1000)
    main = analyse_samples(res, widths, samples)
    out = {"text": c["text"], "composition": c["comp"].to_dict(), "chain": res.chain, "widths": list(widths),
           "inits": c["inits"], "gamma0": c["gamma0"], "dt": c["dt"], "steps": c["steps"], "M": c["M"],
           "replicas": c["replicas"], "P": res.P, "P_test": 0 if c["X_test"] is None else len(c["X_test"]),
           "main": _summary(main), "rows": rows(res, widths, samples),
           "wrong": {k: _summary(analyse_samples(w, widths, samples)) for k, w in wrong_variants(c, 0).items()},
           "dmft_cpu_seconds": float(res.cost["cpu_seconds"]), "estimate_seconds": float(res.cost["estimate_seconds"])}
    cal = {"repeats": 0, "false_alarms": 0, "inconclusive": 0, "rejected": {k: 0 for k in out["wrong"]},
           "wrong_inconclusive": {k: 0 for k in out["wrong"]}, "runs": []}
    out["calibration"] = cal
    out["lazy"] = lazy_agreement(c)
    out["cpu_seconds"] = time.process_time() - t0
    if save is not None:                          # partial results survive an interrupted run
        save(out)
    for r in range(1, repeats + 1):
        _repeat(c, cal, 100 + r, 1000 + r, widths)
        print(f"  {name}: repeat {r}/{repeats}: false alarms {cal['false_alarms']} (inconclusive "
              f"{cal['inconclusive']}), rejected {cal['rejected']}", file=sys.stderr, flush=True)
        out["cpu_seconds"] = time.process_time() - t0
        if save is not None:
            save(out)
    return out


def _repeat(c, cal, dmft_seed, finite_seed, widths):
    """One calibration repetition (new DMFT replicas, new finite networks): a false alarm is a ``fail`` of the
    correct DMFT, a rejection a ``fail`` of a wrong one; ``inconclusive`` verdicts are counted apart (neither)."""
    from limits.checking.dmft_serial import analyse_samples, finite_samples

    res = _solve(c, dmft_seed)
    samples = finite_samples(res, widths, c["inits"], seed=finite_seed)
    run = {"dmft_seed": dmft_seed, "finite_seed": finite_seed, "correct": _brief(analyse_samples(res, widths, samples)),
           "wrong": {k: _brief(analyse_samples(w, widths, samples)) for k, w in wrong_variants(c, dmft_seed).items()}}
    cal["repeats"] += 1
    cal["false_alarms"] += run["correct"]["verdict"] == "fail"
    cal["inconclusive"] += run["correct"]["verdict"] == "inconclusive"
    for k, w in run["wrong"].items():
        cal["rejected"][k] += w["verdict"] == "fail"
        cal["wrong_inconclusive"][k] += w["verdict"] == "inconclusive"
    cal["runs"].append(run)


def _brief(chk):
    return {"verdict": chk.verdict, "worst_z": float(chk.worst_z), "scale_z": float(chk.details["scale_z"]),
            "scale_bias": float(chk.scale_bias), "rate": float(chk.rate), "reasons": list(chk.reasons)}


def cost_study():
    """Estimated vs measured CPU seconds of a few solves (one and two hidden stages)."""
    from limits.dmft.serial import build_chain, estimate

    out = []
    cs = cases()
    for name, n_t, M in (("A", 9, 4000), ("C", 7, 2000), ("B", 6, 150)):
        c = cs[name]
        Xa = c["X"] if c["X_test"] is None else np.concatenate([c["X"], c["X_test"]])
        est = estimate(build_chain(c["comp"], Xa), n_t, M, c["replicas"])
        t0 = time.process_time()
        _solve(c, 0)
        out.append({"case": name, "n_t": n_t, "M": M, "replicas": c["replicas"], "estimate_flops": est["flops"],
                    "estimate_bytes": est["bytes"], "cpu_seconds": time.process_time() - t0})
    return out


def _rst(header, rows):
    """An RST csv-table (docs) from a header and rows of cells."""
    q = lambda c: '"' + str(c).replace('"', '""').replace("|", "\\|") + '"'  # noqa: E731  (| is RST markup)
    out = [".. csv-table::", "   :header: " + ", ".join(q(h) for h in header), ""]
    out += ["   " + ", ".join(q(c) for c in r) for r in rows]
    return "\n".join(out) + "\n"


def fits_table():
    """Markdown: estimated memory and CPU time (limits.dmft.serial.estimate) of typical sizes, paths M·R = 8000."""
    import limits
    from limits.dmft.serial import build_chain, estimate
    from limits.progress import format_seconds
    from limits.readfile import human

    L = limits.layers
    one = limits.serial(L.Conv((3, 3), "SAME"), L.Activation("relu"), L.GlobalAvgPool(), L.Dense())
    two = limits.serial(L.Conv((3, 3), "SAME"), L.Activation("tanh"), L.GlobalAvgPool(), L.Dense(), L.Activation("tanh"),
                        L.Dense())
    convs = limits.serial(L.Conv((3, 3), "SAME"), L.Activation("tanh"), L.Conv((2, 2), "VALID", strides=(2, 2)),
                          L.Activation("tanh"), L.GlobalAvgPool(), L.Dense())
    rows = []
    for label, comp, side, Ps, steps in (("Conv → relu → GAP → Dense (one stage)", one, 8, (20, 50, 100), (20, 50)),
                                         ("Conv → relu → GAP → Dense (one stage)", one, 4, (100, 300), (50,)),
                                         ("Conv → tanh → GAP → Dense → tanh → Dense", two, 4, (12, 24), (12, 24)),
                                         ("Conv → tanh → Conv 2×2/2 → tanh → GAP → Dense", convs, 4, (4, 8), (6, 12))):
        for P in Ps:
            for n in steps:
                ch = build_chain(comp, np.zeros((P, side, side, 1)))
                e = estimate(ch, n + 1, 500, 16)
                rows.append((label, f"{side}×{side}", P, n, human(e["bytes"]), format_seconds(e["seconds"])))
    return _rst(("network", "image", "P (train + test)", "steps", "memory", "estimated CPU"), rows)


def _load(path=None):
    path = Path(path or OUT)
    return json.loads(path.read_text()) if path.exists() else {"cases": {}}


def _save_case(name, value, path=None):
    """Store one case (re-reading the file first: runs of other cases may have written it meanwhile)."""
    from limits.results import atomic_write_text

    data = _load(path)
    data["cases"][name] = value
    atomic_write_text(Path(path or OUT), json.dumps(data, indent=1, sort_keys=True) + "\n")


def merge(path):
    """Copy the cases of another result file (a run with --out) into the committed one."""
    for name, value in _load(path)["cases"].items():
        _save_case(name, value)


def rate_ci(k, n):
    """k/n and its exact (Clopper–Pearson) 95 % interval."""
    from scipy.stats import binomtest

    if n == 0:
        return float("nan"), (float("nan"), float("nan"))
    ci = binomtest(int(k), int(n)).proportion_ci(0.95, method="exact")
    return k / n, (float(ci.low), float(ci.high))


def _kn(k, n):
    p, (lo, hi) = rate_ci(k, n)
    return f"{k}/{n} = {100 * p:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]" if n else "not run"


def _verdict(s):
    return s.get("verdict") or {True: "pass", False: "fail", None: "inconclusive"}[s["passed"]]


def _rows_table(data):
    rows = []
    for name, c in sorted(data["cases"].items()):
        for r in c["rows"]:
            rows.append((name, r["quantity"], f"{r['t']:g}", f"{r['extrapolated']:.4g} ± {r['extrapolated_se']:.2g}",
                         f"{r['theory']:.4g} ± {r['theory_se']:.1g}", f"{r['z']:+.2f}",
                         f"{r['scale_bias']:+.2%} ± {r['scale_bias_se']:.2%}", f"{r['power']:.1%}"))
    return _rst(("case", "quantity", "t", "N → ∞ extrapolation (worst entry)", "DMFT", "z", "relative bias δ∞",
                 "power"), rows)


def _z(s):
    """The larger of the worst entry's |z| and the relative bias's |z|."""
    return max(abs(s["worst_z"]), abs(s.get("scale_z", s["scale_bias"] / s["scale_bias_se"])))


def _seed0_table(data):
    rows = []
    for name, c in sorted(data["cases"].items()):
        m, lazy = c["main"], c["lazy"]
        wrong = "; ".join(f"{k}: {_verdict(w)} (|z| {_z(w):.0f})" for k, w in c["wrong"].items())
        rows.append((name, f"{_verdict(m)}: worst |z| {m['worst_z']:.2f} (< {m['z_crit']:.2f}), "
                           f"δ∞ {m['scale_bias']:+.2%} ± {m['scale_bias_se']:.2%}",
                     f"{m['rate']:+.2f} [{m['rate_ci'][0]:+.2f}, {m['rate_ci'][1]:+.2f}]", f"{m['power']:.1%}", wrong,
                     f"{lazy['max_z_f']:.2f} ({lazy['entries']} entries); NTK(0) {lazy['max_z_ntk0']:.2f}",
                     f"{c['cpu_seconds'] / 60:.1f} min"))
    return _rst(("case", "check (seed 0)", "rate [99.75 % CI]", "power", "wrong variants (seed 0)",
                 "γ0 = 1e-4 vs GD on the NTK: max |z| of f", "CPU (with repeats)"), rows)


def _null_z(cal, z_crit):
    """Over the repetitions, the correct DMFT's bias z (mean ± SD; N(0, 1) when calibrated exactly, narrower when
    conservative) and its largest worst-entry |z| against the entries' threshold."""
    runs = cal.get("runs") or []
    if not runs:
        return "—"
    z = np.array([r["correct"]["scale_z"] for r in runs])
    sd = f" ± {z.std(ddof=1):.2f}" if z.size > 1 else ""
    return (f"bias z {z.mean():+.2f}{sd}; worst |z| ≤ {max(r['correct']['worst_z'] for r in runs):.2f} "
            f"(threshold {z_crit:.2f})")


def _calibration_table(data):
    rows, tot = [], [0, 0, 0]
    for name, c in sorted(data["cases"].items()):
        cal = c["calibration"]
        n = cal["repeats"]
        tot[0] += cal["false_alarms"]
        tot[1] += n
        tot[2] += cal.get("inconclusive", 0)
        first = (name, _kn(cal["false_alarms"], n), str(cal.get("inconclusive", "—")) if n else "—",
                 _null_z(cal, c["main"]["z_crit"]))
        for i, k in enumerate(c["wrong"]):
            wi = str(cal.get("wrong_inconclusive", {}).get(k, "—")) if n else "—"
            rows.append((first if i == 0 else ("", "", "", "")) + (k, _kn(cal["rejected"][k], n), wi))
    rows.append(("all", _kn(tot[0], tot[1]), str(tot[2]), "", "", "", ""))
    return _rst(("case", "false alarms (correct DMFT), 95 % CI", "inconclusive", "correct DMFT over the repetitions",
                 "wrong variant", "rejected, 95 % CI", "inconclusive"), rows)


def table(data):
    """RST tables of docs/theory/dmft.rst §6.5 (docs/theory/dmft_serial_validation.inc): per case, quantity and
    time; per case the seed-0 verdicts and the γ0 → 0 limit; the calibration (false alarms, rejections, 95 %
    Clopper–Pearson intervals)."""
    return "\n".join((_rows_table(data), _seed0_table(data), _calibration_table(data)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", nargs="*", default=["A", "B", "C"])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--widths", type=int, nargs="*", default=list(WIDTHS))
    ap.add_argument("--cost", action="store_true")
    ap.add_argument("--table", action="store_true", help="print the docs' tables (with --write: into " + INC.name + ")")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--fits", action="store_true", help="print the table of sizes that fit (estimates)")
    ap.add_argument("--out", default=None, help="write the cases to this file instead (merge later with --merge)")
    ap.add_argument("--merge", default=None, help="copy the cases of this file into the committed one")
    a = ap.parse_args(argv)
    if a.merge:
        merge(a.merge)
        return 0
    data = _load()
    if a.table:
        text = table(data)
        if a.write:
            from limits.results import atomic_write_text

            atomic_write_text(INC, text)
        print(text)
        return 0
    if a.fits:
        print(fits_table())
        return 0
    if a.cost:
        from limits.results import atomic_write_text

        data = _load()
        data["cost"] = cost_study()
        atomic_write_text(OUT, json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(json.dumps(data["cost"], indent=1))
        return 0
    cs = cases()
    for name in a.case:
        print(f"case {name}: {cs[name]['text']}", file=sys.stderr, flush=True)
        value = run_case(name, cs[name], a.repeats, tuple(a.widths),
                         save=lambda v, name=name: _save_case(name, v, a.out))
        print(json.dumps({k: v for k, v in value.items() if k != "rows"}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
