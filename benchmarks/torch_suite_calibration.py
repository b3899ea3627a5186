"""Calibration of ``limits.torch.parameterise`` + ``limits.torch.coord_check`` together on the held-out-style modules
of ``limits.torch.suite`` (a Llama, a GQA block, a tied GPT-2, a ViT, a ConvNeXt, an MLP-Mixer, a U-Net, a residual
MLP for Depth-μP): per module, μP accepted or refused (by name); the false-alarm rate of limits' own check on
limits' own μP over independent checks (each its own ``seed``: 4 seeds inside, widths 32–256, Adam lr 1e-2, 3
steps, family-wise α = 0.05) with its exact (Clopper–Pearson) 95 % interval; for each of its three injected bugs,
the rate flagged and the rate with the culprit named first (its exact interval: the power). A validation report, not a timing; CPU seconds are process time::

    nice -n 10 python benchmarks/torch_suite_calibration.py --checks 20 --bug-checks 5     # resumes where it stopped
    python benchmarks/torch_suite_calibration.py --table                                   # the table from the data
    python benchmarks/torch_suite_calibration.py --write                                   # into docs/torch_calibration.rst

Every finished check is written to ``benchmarks/results/calibration/torch_suite.json`` at once (atomically), so an
interrupted run resumes with the next check; ``--only NAME`` runs one module.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "results" / "calibration" / "torch_suite.json"
DOC = ROOT / "docs/torch_calibration.rst"
SETTINGS = dict(lr=1e-2, steps=3, seeds=4)
ALPHA = 0.05
BEGIN = ".. torch-suite-table:begin (python benchmarks/torch_suite_calibration.py --write)"
END = ".. torch-suite-table:end"


def parameterised(case):
    """(the μP Parameterised of a suite case — the width rules at the base depth for a Depth-μP module — or None,
    the refusal's text, CPU seconds)."""
    from limits.torch import parameterise

    X, _ = case.data()
    t = time.process_time()
    try:
        if case.depths:
            P = parameterise(case.factory, "depth-muP", widths=case.widths, example_inputs=(X,), depths=case.depths)
            P = P.at_depth(P.base_depth)
        else:
            P = parameterise(case.factory, "muP", widths=case.widths, example_inputs=(X,), roles=dict(case.roles))
        return P, None, time.process_time() - t
    except ValueError as exc:
        return None, str(exc), time.process_time() - t


def one(P, case, seed):
    from limits.torch import coord_check

    r = coord_check(P, case.widths, case.data(), seed=seed, alpha=ALPHA, **SETTINGS)
    return {"seed": seed, "passed": bool(r.passed), "failing": r.failing_tensors()[:4], "tests": r.tests,
            "cpu": r.cpu_seconds}


def _save(data, path):
    from limits.results import atomic_write_text

    atomic_write_text(path, json.dumps(data, indent=1))


def run(checks, bug_checks, only=None, path=DATA, progress=print):
    """Run what ``path`` does not hold yet (module docstring); returns the data."""
    from limits.torch import suite

    data = json.loads(Path(path).read_text()) if Path(path).exists() else {}
    data.setdefault("settings", dict(SETTINGS, alpha=ALPHA))
    mods = data.setdefault("modules", {})
    for name, case in suite.CASES.items():
        if only and only != name:
            continue
        m = mods.setdefault(name, {"title": case.name, "widths": list(case.widths), "correct": [], "bugs": {}})
        P, refused, cpu = parameterised(case)
        m["refused"], m["parameterise_cpu"] = refused, cpu
        if P is None:
            progress(f"{name}: refused — {refused}")
            _save(data, path)
            continue
        done = {r["seed"] for r in m["correct"]}
        for s in range(checks):
            if 1000 + s not in done:
                m["correct"].append(one(P, case, 1000 + s))
                _save(data, path)
        k = sum(not r["passed"] for r in m["correct"])
        progress(f"{name}: {k}/{len(m['correct'])} false alarms")
        for bug in case.bugs:
            b = m["bugs"].setdefault(bug.name, {"what": bug.what, "culprit": bug.culprit, "runs": []})
            done = {r["seed"] for r in b["runs"]}
            Pb = suite.inject(P, bug)
            for s in range(bug_checks):
                if 2000 + s not in done:
                    b["runs"].append(one(Pb, case, 2000 + s))
                    _save(data, path)
            progress(f"{name} / {bug.name}: flagged {sum(not r['passed'] for r in b['runs'])}/{len(b['runs'])}, "
                     f"culprit first {sum(culprit_first(r, bug.culprit) for r in b['runs'])}")
    data["torch"] = __import__("torch").__version__
    _save(data, path)
    return data


def culprit_first(run_, culprit) -> bool:
    from fnmatch import fnmatchcase

    return bool(run_["failing"]) and any(fnmatchcase(run_["failing"][0].split(" (")[0], p) for p in culprit.split("|"))


def rate(k, n):
    """(k/n, its binomial SE floored at the one-event level)."""
    p = k / n
    return p, math.sqrt(max(p * (1 - p), 1.0 / n) / n)


def exact(k, n):
    """The exact (Clopper–Pearson) 95 % interval of a rate k/n."""
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(0.95, method="exact")
    return float(ci.low), float(ci.high)


def summary(data) -> dict:
    """Per module: accepted, checks, false alarms, rate ± SE, P(≥ k | α), bugs (flagged, culprit first, n),
    median CPU per check."""
    from scipy.stats import binom

    out = {}
    a = data["settings"]["alpha"]
    for name, m in data["modules"].items():
        runs = m["correct"]
        n, k = len(runs), sum(not r["passed"] for r in runs)
        bugs = {b: (sum(not r["passed"] for r in v["runs"]), sum(culprit_first(r, v["culprit"]) for r in v["runs"]),
                    len(v["runs"]), v["what"]) for b, v in m["bugs"].items()}
        cpu = sorted(r["cpu"] for r in runs + [x for v in m["bugs"].values() for x in v["runs"]])
        out[name] = {"title": m["title"], "accepted": m["refused"] is None, "refused": m["refused"], "checks": n,
                     "false_alarms": k, "rate": rate(k, n) if n else (math.nan, math.nan),
                     "interval": exact(k, n) if n else (math.nan, math.nan),
                     "p_at_alpha": float(binom.sf(k - 1, n, a)) if n else math.nan, "bugs": bugs,
                     "cpu_median": cpu[len(cpu) // 2] if cpu else math.nan, "cpu_total": sum(cpu)}
    return out


def table(data) -> list:
    """The reStructuredText table of the docs page (module docstring)."""
    s = summary(data)
    a = data["settings"]["alpha"]
    lines = [".. list-table::", "   :header-rows: 1", "",
             "   * - module", "     - ``parameterise(…, \"muP\")``",
             f"     - false alarms of its own check (nominal ≤ {a:g}) [exact 95 % interval]",
             "     - power per injected bug: flagged, and with the culprit named first [exact 95 % interval]",
             "     - CPU per check (all checks)"]
    for name, v in s.items():
        acc = "accepted" if v["accepted"] else f"refused: {v['refused'][:120]}"
        if v["checks"]:
            p, (lo, hi) = v["rate"][0], v["interval"]
            fa = f"{v['false_alarms']}/{v['checks']} = {p:.2f} [{lo:.2f}, {hi:.2f}] (P(≥ {v['false_alarms']} at α) = " \
                 f"{v['p_at_alpha']:.2f})"
        else:
            fa = "—"
        bugs = "; ".join(f"{w}: flagged {f}/{n}, culprit first {c}/{n} [{exact(c, n)[0]:.2f}, {exact(c, n)[1]:.2f}]"
                         for f, c, n, w in v["bugs"].values()) or "—"
        lines += [f"   * - {v['title']} (``{name}``)", f"     - {acc}", f"     - {fa}", f"     - {bugs}",
                  f"     - {v['cpu_median']:.1f} s ({v['cpu_total'] / 60:.0f} min)"]
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checks", type=int, default=20, help="independent checks of each correct module")
    ap.add_argument("--bug-checks", type=int, default=5, help="independent checks of each injected bug")
    ap.add_argument("--only", help="one module of limits.torch.suite.CASES")
    ap.add_argument("--json", default=str(DATA), help="the data file (read to resume, written after every check)")
    from _tables import add_table_options, show_or_write

    add_table_options(ap, show_help="print the docs table from the data",
                      write_help="write the docs table into docs/torch_calibration.rst")
    a = ap.parse_args(argv)
    if show_or_write(a, a.json, DOC, (BEGIN, END), table, table):
        return 0
    import torch

    torch.set_num_threads(1)
    run(a.checks, a.bug_checks, a.only, Path(a.json), progress=lambda s: print(s, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
