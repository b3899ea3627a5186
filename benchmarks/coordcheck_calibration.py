"""Calibration of ``limits.torch.coord_check``: its false-alarm rate on correct μP modules and its power on injected
bugs, over independent checks (each check: its own ``seed``, 4 seeds inside, widths 32–256 — the byte-level GPT also
at coord_check's default 64–512 — Adam lr 1e-2, 3 steps, family-wise α = 0.05). A validation report, not a timing::

    python benchmarks/coordcheck_calibration.py --checks 40 --bug-checks 20 --equivalence 20 --json benchmarks/results/calibration/coordcheck.json
    python benchmarks/coordcheck_calibration.py --rows      # the rows of docs/torch.rst from that file
    python benchmarks/coordcheck_calibration.py --write     # put them into docs/torch.rst

Correct modules: the demo MLP and a GPT with ``nn.MultiheadAttention`` parameterised by ``limits.torch.parameterise``
(limits' own μP), and the hand-written μP GPTs of :mod:`limits.torch.handwritten` checked as-is (packed qkv +
``F.scaled_dot_product_attention``; the same byte-level, 256 tokens × 32 positions, where the read-out's first step has
the largest N^{-1/2} correction). For each the rate of checks that fail (± binomial SE; the one-sided binomial probability of at least that many
at the nominal α) with the previous verdict
(plain log-log slope, 95 % CI widened by 0.1, module rows only) recomputed on the same samples. Bugs: each of
``limits.torch.handwritten.BUGS`` injected into the SDPA GPT; the rate flagged and the rate whose first named row
is the culprit. And the false-refusal rate of ``limits.torch.equivalent`` on correct user modules at its default
draws (family-wise α = 0.01), widths 16–64 (its cost is the 2048 init draws, not the width).
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "results" / "calibration" / "coordcheck.json"
WIDTHS = (32, 64, 128, 256)          # the default 64–512 costs 4× more CPU; corrections here are √2× larger
DEFAULT_WIDTHS = (64, 128, 256, 512)  # coord_check's own default
SETTINGS = dict(lr=1e-2, steps=3, seeds=4)
BEGIN = "<!-- coordcheck-calibration:begin (python benchmarks/coordcheck_calibration.py --write) -->"
END = "<!-- coordcheck-calibration:end -->"


def correct_modules():
    """{name: (factory or Parameterised, expect, data, widths)}. The byte-level GPT is checked at both width sets:
    at 32–256 its final LayerNorm gain is outside the asymptotic regime (``docs``: the read-out's self-interaction
    in the gain's first gradient, relative size ∝ √tokens/N; see the calibration note in docs/torch.rst)."""
    from limits.torch import demos, handwritten as hw, parameterise

    byte = (hw.byte_gpt, "muP", hw.gpt_data(8, vocab=256, seq=32))
    return {
        "MLP (demo, limits' μP)": (parameterise(demos.mlp, "muP", widths=WIDTHS[:2]), None, demos.mlp_data(), WIDTHS),
        "GPT, nn.MultiheadAttention (limits' μP)": (parameterise(hw.plain_mha_gpt, "muP", widths=WIDTHS[:2]), None,
                                                   hw.gpt_data(), WIDTHS),
        "GPT, packed qkv + SDPA (μP by hand)": (hw.sdpa_gpt, "muP", hw.gpt_data(), WIDTHS),
        "GPT byte-level, SDPA (μP by hand)": byte + (WIDTHS,),
        "GPT byte-level, SDPA (μP by hand; default widths)": byte + (DEFAULT_WIDTHS,),
    }


def old_verdict(r, tol=0.1):
    """The previous rule on the same samples: module/logits rows, plain slope CI ± tol meets the prediction."""
    bad = False
    for i, kind in enumerate(r.kinds):
        if kind == "tensor":
            continue
        for t in range(r.steps + 1):
            for q in (0, 1):
                p, lo = r.predicted[i, t, q], r.predicted_low[i, t, q]
                if not np.isfinite(p) or not np.isfinite(r.slope[i, t, q]):
                    continue
                if not (r.ci_low[i, t, q] - tol <= p and lo <= r.ci_high[i, t, q] + tol):
                    bad = True
    return not bad


SAMPLES = None          # a folder: every check's result is saved there too (--samples)


def _tag(tag):
    return "".join(c if c.isalnum() else "_" for c in tag)


def _summary(r, seed):
    return {"seed": seed, "passed": bool(r.passed), "old_passed": bool(old_verdict(r)), "tests": r.tests,
            "failing": r.failing_tensors()[:5], "cpu": r.cpu_seconds}


def one(factory, expect, data, seed, tag="", widths=WIDTHS):
    from limits.torch import coord_check

    r = coord_check(factory, widths, data, expect=expect, seed=seed, **SETTINGS)
    if SAMPLES:
        r.save(Path(SAMPLES) / _tag(tag) / str(seed))
    return _summary(r, seed)


def rejudge_all(data, folder):
    """Every run's verdict recomputed from its saved samples (``--samples``) by the current exponent test."""
    from limits.torch.coordcheck import TorchCoordCheck, rejudge

    groups = [(name, runs) for name, runs in data["correct"].items()]
    groups += [(bug, b["runs"]) for bug, b in data["bugs"].items()]
    for tag, runs in groups:
        for i, run_ in enumerate(runs):
            r = rejudge(TorchCoordCheck.load(Path(folder) / _tag(tag) / str(run_["seed"])))
            runs[i] = dict(_summary(r, run_["seed"]), cpu=run_["cpu"])
    return data


def culprit_first(run, pattern):
    """The first row a failing check names matches the bug's culprit pattern (``limits.torch.handwritten.BUGS``)."""
    from fnmatch import fnmatchcase

    return bool(run["failing"]) and any(fnmatchcase(run["failing"][0].split(" (")[0], p) for p in pattern.split("|"))


def _rate(k, n):
    p = k / n
    return p, math.sqrt(max(p * (1 - p), 1.0 / n) / n)     # SE floored at the one-event level


def run(checks, bug_checks, only=None, progress=print, save=None):
    """Calibration data; ``save(data)`` is called after every check (a partial run keeps what it measured)."""
    from limits.torch import handwritten as hw

    out = {"widths": WIDTHS, "settings": SETTINGS, "alpha": 0.05, "correct": {}, "bugs": {}, "module_widths": {}}
    for name, (f, expect, data, widths) in correct_modules().items():
        if (only and only not in name) or not checks:
            continue
        runs = out["correct"][name] = []
        out["module_widths"][name] = list(widths)
        for s in range(checks):
            runs.append(one(f, expect, data, 1000 + s, name, widths))
            if save:
                save(out)
        progress(f"{name}: {sum(not r['passed'] for r in runs)}/{checks} false alarms "
                 f"(previous rule {sum(not r['old_passed'] for r in runs)})")
    for bug, (culprit, what) in hw.BUGS.items():
        if (only and only not in bug) or not bug_checks:
            continue
        f = functools.partial(hw.gpt, bug=bug)
        runs = out["bugs"].setdefault(bug, {"culprit": culprit, "what": what, "runs": []})["runs"]
        for s in range(bug_checks):
            runs.append(one(f, "muP", hw.gpt_data(), 2000 + s, bug))
            if save:
                save(out)
        progress(f"{bug}: flagged {sum(not r['passed'] for r in runs)}/{bug_checks}, culprit first "
                 f"{sum(culprit_first(r, culprit) for r in runs)}")
    return out


def equivalence_modules():
    """{name: (factory, model)}: correct user modules of ``limits.torch.equivalent`` (the test suite's hand-written
    erf MLP and tanh ResNet, and the model's own ``to_torch`` module)."""
    import importlib.util

    import limits

    spec = importlib.util.spec_from_file_location("_teq", ROOT / "tests" / "torch_bridge" / "test_torch_equivalence.py")
    t = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(t)
    resnet = limits.resnet(3, 2, activation="tanh", rho=0.5, sigma_b2=0.2)
    return {"erf MLP by hand (NTK, biases)": (t.UserMLP, t.MODEL),
            "tanh ResNet by hand": (t.UserResNet, resnet),
            "the model's own to_torch module": (lambda w: t.MODEL.to_torch(w), t.MODEL)}


def run_equivalence(calls, widths=(16, 32, 64), only=None, progress=print):
    """False refusals of ``equivalent()`` at its default draws (max_draws 2048, α = 0.01) on correct modules."""
    from limits.torch import NotEquivalent, equivalent

    out = {}
    for name, (f, model) in equivalence_modules().items():
        if only and only not in name:
            continue
        runs = []
        for s in range(calls):
            c = time.process_time()
            try:
                equivalent(f, model, widths=widths, seed=3000 + s)
                runs.append({"seed": 3000 + s, "refused": False, "cpu": time.process_time() - c})
            except NotEquivalent as exc:
                runs.append({"seed": 3000 + s, "refused": True, "reason": str(exc)[:300],
                             "cpu": time.process_time() - c})
        out[name] = runs
        progress(f"equivalent(): {name}: {sum(r['refused'] for r in runs)}/{calls} refused")
    return {"widths": list(widths), "alpha": 0.01, "modules": out}


def merge(parts):
    from limits.torch.handwritten import BUGS

    out = dict(parts[0], correct={}, bugs={}, cpu_seconds=0.0)
    out.pop("equivalence", None)
    for p in parts:
        out["correct"].update({k: v for k, v in p["correct"].items() if v})
        out.setdefault("module_widths", {}).update({k: v for k, v in p.get("module_widths", {}).items()
                                                    if p["correct"].get(k)})
        out["bugs"].update({k: dict(v, culprit=BUGS[k][0]) for k, v in p["bugs"].items() if v["runs"]})
        out["cpu_seconds"] += p.get("cpu_seconds", 0.0)
        if p.get("equivalence"):
            eq = out.setdefault("equivalence", dict(p["equivalence"], modules={}))
            eq["modules"].update(p["equivalence"]["modules"])
    return out


def rows(data) -> list:
    """The rows (Markdown table lines) of docs/torch.rst from the calibration data."""
    from scipy.stats import binom

    a = data["alpha"]
    ws = data["widths"]
    lines = ["| correct module (4 seeds, 3 Adam steps; each check its own seed) | widths | checks "
             f"| false alarms, this check (nominal ≤ {a:g}) | P(≥ this many at {a:g}) | previous rule (slope CI ± 0.1) "
             "| fits per check | CPU per check |",
             "|---|---|---:|---|---:|---|---:|---:|"]
    for name, runs in data["correct"].items():
        n = len(runs)
        k = sum(not r["passed"] for r in runs)
        p, se = _rate(k, n)
        po, seo = _rate(sum(not r["old_passed"] for r in runs), n)
        w = data.get("module_widths", {}).get(name, ws)
        lines.append(f"| {name} | {w[0]}–{w[-1]} | {n} | {p:.3f} ± {se:.3f} | {binom.sf(k - 1, n, a):.2f} | "
                     f"{po:.3f} ± {seo:.3f} | {int(np.median([r['tests'] for r in runs]))} | "
                     f"{np.median([r['cpu'] for r in runs]):.1f} s |")
    lines += ["", f"| bug injected into the SDPA GPT (widths {ws[0]}–{ws[-1]}) | checks | flagged | culprit named first "
                  "| culprit |",
              "|---|---:|---|---|---|"]
    for bug, b in data["bugs"].items():
        runs = b["runs"]
        n = len(runs)
        p, se = _rate(sum(not r["passed"] for r in runs), n)
        c, sc = _rate(sum(culprit_first(r, b["culprit"]) for r in runs), n)
        lines.append(f"| {b['what']} | {n} | {p:.2f} ± {se:.2f} | {c:.2f} ± {sc:.2f} | "
                     + " or ".join(f"`{pat}`" for pat in b["culprit"].split("|")) + " |")
    eq = data.get("equivalence")
    if eq:
        ws = eq["widths"]
        lines += ["", f"| correct module, `limits.torch.equivalent` (widths {ws[0]}–{ws[-1]}, default draws) | calls | "
                      f"false refusals (nominal ≤ {eq['alpha']:g}) | CPU per call |", "|---|---:|---|---:|"]
        for name, runs in eq["modules"].items():
            p, se = _rate(sum(r["refused"] for r in runs), len(runs))
            lines.append(f"| {name} | {len(runs)} | {p:.3f} ± {se:.3f} | {np.median([r['cpu'] for r in runs]):.1f} s |")
    return lines


PAGE = ROOT / "docs/torch.rst"             # the page whose marked block holds the rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checks", type=int, default=40, help="independent checks per correct module")
    ap.add_argument("--bug-checks", type=int, default=20, help="independent checks per injected bug")
    ap.add_argument("--equivalence", type=int, default=0, help="calls of equivalent() per correct module")
    ap.add_argument("--only", help="a substring of one module or bug name (partial runs, merged with --merge)")
    ap.add_argument("--json", help="write the data here")
    ap.add_argument("--samples", help="also save every check's result (.npz + .json) under this folder")
    ap.add_argument("--merge", nargs="+", help="merge partial JSON files into --json")
    ap.add_argument("--rejudge", metavar="FOLDER", help="with --merge: recompute every verdict from the samples saved "
                                                       "under FOLDER by --samples")
    from _tables import add_table_options, show_or_write

    add_table_options(ap, "--rows", "print the rows of docs/torch.rst from the data", "write the rows into docs/torch.rst")
    a = ap.parse_args(argv)
    if a.merge:
        from limits.results import atomic_write_text

        data = merge([json.loads(Path(p).read_text()) for p in a.merge])
        if a.rejudge:
            data = rejudge_all(data, a.rejudge)
        atomic_write_text(a.json or DATA, json.dumps(data, indent=1))
        return 0
    if show_or_write(a, a.json or DATA, PAGE, (BEGIN, END), rows, rows, show="rows"):
        return 0
    import torch

    torch.set_num_threads(1)
    t = time.process_time()
    global SAMPLES
    SAMPLES = a.samples

    def save(d):
        if a.json:
            from limits.results import atomic_write_text

            atomic_write_text(a.json, json.dumps(d, indent=1))

    data = run(a.checks, a.bug_checks, a.only, progress=lambda s: print(s, flush=True), save=save)
    if a.equivalence:
        data["equivalence"] = run_equivalence(a.equivalence, only=a.only, progress=lambda s: print(s, flush=True))
    data["cpu_seconds"] = time.process_time() - t
    data["torch"] = torch.__version__
    if a.json:
        from limits.results import atomic_write_text

        atomic_write_text(a.json, json.dumps(data, indent=1))
    print("\n".join(rows(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
