"""Calibration of the init-law test of ``limits.torch.equivalent`` (:mod:`limits.torch.init_law`). A validation
report, not a timing::

    nice -n 10 python benchmarks/equivalence_init_law.py --json benchmarks/results/calibration/equivalence_init_law.json
    python benchmarks/equivalence_init_law.py --rows        # its tables (--rst: as in docs/torch_checks.rst)

1. **Size of each statistic** under the null (v i.i.d. N(0, 1), n pooled entries; Monte Carlo, ``--reps`` samples
   per n): the rate of |z| > z_crit = 3.53 (the Bonferroni threshold of 8 tensors × 3 moments at α = 0.01; nominal
   4.16e-4) for the previous statistics — (m̂ − μ)/SÊ with sample SEs, SÊ of the fourth moment from m̂₈ — and for
   the new ones (exact normal and χ² for mean and variance, Anscombe–Glynn for the kurtosis).
2. **False refusals of correct modules**: ``equivalent()`` on the test suite's hand-written erf MLP and tanh
   ResNet and the model's own ``to_torch`` module, widths 16–64, at ``max_draws`` 64 and 2048, ``--calls`` seeds
   each (issue 42 reported 2 of 20 refused at 64 before this change; reproduced: 2/20, 2/20, 0/20 at seeds 0–19).
3. **Power**: the same erf MLP with one tensor drawn wrongly — uniform U(−√3, √3) (variance right, kurtosis 1.8),
   init std × 0.95 and × 1.05 — refused in how many of ``--calls`` seeds.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))          # _tables
BEGIN = ".. equivalence-init-law:begin (python benchmarks/equivalence_init_law.py --rst)"
END = ".. equivalence-init-law:end"
DATA = ROOT / "benchmarks" / "results" / "calibration" / "equivalence_init_law.json"
Z_CRIT = 3.53
NS = (112, 448, 1000, 3000, 10000)


def old_z(v):
    """The previous statistics on rows of samples v (reps, n): (m̂ − μ)/SÊ, SEs from the sample moments."""
    n = v.shape[1]
    v2 = v * v
    m1, m2, m4, m8 = v.mean(1), v2.mean(1), (v2 * v2).mean(1), (v2 ** 4).mean(1)
    se = [np.sqrt(np.maximum(a, 0) / (n - 1)) for a in (m2 - m1 ** 2, m4 - m2 ** 2, m8 - m4 ** 2)]
    return np.stack([m1 / se[0], (m2 - 1) / se[1], (m4 - 3) / se[2]], axis=1)


def new_z(v):
    from limits.torch.init_law import law_z, moment_sums

    return np.array([law_z(moment_sums(row))[2] for row in v])


def size(reps, rng, progress=print):
    out = {}
    for n in NS:
        k_old, k_new, lower_old = np.zeros(3), np.zeros(3), 0
        c = time.process_time()
        for start in range(0, reps, 1000):
            v = rng.standard_normal((min(1000, reps - start), n))
            zo, zn = old_z(v), new_z(v)
            k_old += np.sum(np.abs(zo) > Z_CRIT, axis=0)
            k_new += np.sum(np.abs(zn) > Z_CRIT, axis=0)
            lower_old += int(np.sum(zo[:, 2] < -Z_CRIT))
        out[n] = {"reps": reps, "old": (k_old / reps).tolist(), "new": (k_new / reps).tolist(),
                  "old_fourth_lower_tail": lower_old / reps, "cpu": time.process_time() - c}
        progress(f"n = {n}: old {out[n]['old']}, new {out[n]['new']}")
    return out


def _test_module():
    spec = importlib.util.spec_from_file_location("_teq", ROOT / "tests" / "torch_bridge" / "test_torch_equivalence.py")
    t = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(t)
    return t


def refusals(calls, progress=print):
    import functools

    import limits
    from limits.torch import NotEquivalent, equivalent

    t = _test_module()
    resnet = limits.resnet(3, 2, activation="tanh", rho=0.5, sigma_b2=0.2)
    correct = {"erf MLP by hand": (t.UserMLP, t.MODEL), "tanh ResNet by hand": (t.UserResNet, resnet),
               "the model's own to_torch module": (lambda w: t.MODEL.to_torch(w), t.MODEL)}
    wrong = {"hidden weight uniform U(−√3, √3)": functools.partial(t.UserMLP, uniform=True),
             "hidden.0 weight std × 0.95": functools.partial(t.UserMLP, std=0.95, which=1),
             "hidden.0 weight std × 1.05": functools.partial(t.UserMLP, std=1.05, which=1)}
    out = {"correct": {}, "wrong": {}}
    for max_draws in (64, 2048):
        for group, cases in (("correct", correct), ("wrong", wrong)):
            for name, case in cases.items():
                f, model = case if group == "correct" else (case, t.MODEL)
                refused, reasons, c = 0, [], time.process_time()
                for s in range(calls):
                    try:
                        equivalent(f, model, widths=(16, 32, 64), seed=s, max_draws=max_draws)
                    except NotEquivalent as exc:
                        refused += 1
                        reasons.append(str(exc)[:200])
                out[group].setdefault(name, {})[str(max_draws)] = {
                    "calls": calls, "refused": refused, "reasons": reasons[:3], "cpu": time.process_time() - c}
                progress(f"{group} {name} max_draws {max_draws}: refused {refused}/{calls}")
    return out


def tables(data) -> list:
    """[(caption, header, rows)] of the docs from the committed data."""
    from scipy.stats import norm

    nominal = 2 * norm.sf(Z_CRIT)
    size = [[str(n)] + [f"{o:.1e} / {w:.1e}" for o, w in zip(d["old"], d["new"])] for n, d in data["size"].items()]
    mods = [[("correct: " if g == "correct" else "wrong: ") + name] + [f"{d[k]['refused']}/{d[k]['calls']}"
                                                                        for k in ("64", "2048")]
            for g in ("correct", "wrong") for name, d in data["modules"][g].items()]
    return [(f"Rate of |z| > {Z_CRIT} under the model's law (nominal {nominal:.1e}), previous / calibrated statistic",
             ["pooled entries n", "mean", "variance", "fourth moment (kurtosis)"], size),
            ("equivalent() on correct and wrong modules, widths 16–64", ["module", "refused at max_draws 64",
                                                                         "at max_draws 2048"], mods)]


def rows(data) -> list:
    """Markdown lines (console) of :func:`tables`."""
    from _tables import markdown_lines

    return markdown_lines(tables(data))


def rst(data) -> list:
    """reST lines (docs/torch_checks.rst) of :func:`tables`."""
    from _tables import rst_lines

    return rst_lines(tables(data))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200_000)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--rows", action="store_true", help="print the tables from the committed data")
    ap.add_argument("--rst", dest="as_rst", action="store_true",
                    help="print the docs' reST tables from the committed data")
    a = ap.parse_args(argv)
    if a.rows or a.as_rst:
        print("\n".join((rst if a.as_rst else rows)(json.loads(DATA.read_text()))))
        return 0
    c = time.process_time()
    out = {"z_crit": Z_CRIT, "seed": a.seed, "size": size(a.reps, np.random.default_rng(a.seed)),
           "modules": refusals(a.calls)}
    out["cpu_seconds"] = time.process_time() - c
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    print("\n".join(rows(json.loads(json.dumps(out)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
