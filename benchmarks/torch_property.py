"""The property "a module ``limits.torch.parameterise`` accepts passes its own ``limits.torch.coord_check`` at the
nominal false-alarm rate", measured over the generated family of ``limits.torch.family`` (random placements of
width-dependent multipliers, ties, root parameters, attention forms): per design, μP accepted or refused (by name,
with the reason), and for an accepted one a check (its own seed; 4 seeds inside, widths 32–256, Adam lr 1e-2, 3
steps, family-wise α = 0.05). The rate of failing checks is compared with α (binomial SE and the probability of at
least that many failures at α). A validation report; CPU seconds are process time::

    nice -n 10 python benchmarks/torch_property.py --designs 200          # resumes where it stopped
    python benchmarks/torch_property.py --table                           # the summary from the data
    python benchmarks/torch_property.py --write                           # into docs/torch_calibration.rst

Every finished design is written to ``benchmarks/results/calibration/torch_property.json`` at once (atomically).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "results" / "calibration" / "torch_property.json"
DOC = ROOT / "docs/torch_calibration.rst"
BEGIN = ".. torch-property:begin (python benchmarks/torch_property.py --table)"
END = ".. torch-property:end"
WIDTHS = (32, 64, 128, 256)
SETTINGS = dict(lr=1e-2, steps=3, seeds=4)
ALPHA = 0.05


def one(seed) -> dict:
    """The record of design ``seed``: accepted or the refusal, and the check's verdict."""
    from limits.torch import coord_check, family, parameterise

    d = family.design(seed)
    X, Y = family.data(d)
    t = time.process_time()
    rec = {"seed": seed, "design": d.describe(), "site": d.site}
    try:
        P = parameterise(family.Factory(d), "muP", widths=WIDTHS, example_inputs=(X,))
    except ValueError as exc:
        return dict(rec, accepted=False, refused=str(exc)[:400], cpu=time.process_time() - t)
    r = coord_check(P, WIDTHS, (X, Y), seed=seed, alpha=ALPHA, **SETTINGS)
    return dict(rec, accepted=True, passed=bool(r.passed), failing=r.failing_tensors()[:4],
                summary=r.summary()[:300], tests=r.tests, gauged=sorted(q.name for q in P.rules if q.gauge),
                cpu=time.process_time() - t)


def run(designs, path=DATA, progress=print):
    from limits.results import atomic_write_text

    data = json.loads(Path(path).read_text()) if Path(path).exists() else {}
    data.setdefault("settings", dict(SETTINGS, widths=list(WIDTHS), alpha=ALPHA))
    recs = data.setdefault("designs", [])
    done = {r["seed"] for r in recs}
    for s in range(designs):
        if s in done:
            continue
        recs.append(one(s))
        atomic_write_text(path, json.dumps(data, indent=1))
        r = recs[-1]
        progress(f"{s}: {'refused' if not r['accepted'] else ('pass' if r['passed'] else 'FAIL')} "
                 f"{r['cpu']:.1f} s — {r['design']}")
    data["torch"] = __import__("torch").__version__
    atomic_write_text(path, json.dumps(data, indent=1))
    return data


def summary(data) -> dict:
    """Designs, accepted, refused (with the unabsorbable multipliers among them), checks failed, the rate ± SE,
    P(≥ that many at α), total CPU."""
    from scipy.stats import binom

    recs = data["designs"]
    acc = [r for r in recs if r["accepted"]]
    k, n = sum(not r["passed"] for r in acc), len(acc)
    p = k / n if n else math.nan
    se = math.sqrt(max(p * (1 - p), 1.0 / n) / n) if n else math.nan
    ref = [r for r in recs if not r["accepted"]]
    return {"designs": len(recs), "accepted": n, "refused": len(ref),
            "refused_unabsorbable": sum(r["site"] == "unabsorbable" for r in ref),
            "unabsorbable_accepted": sum(r["site"] == "unabsorbable" for r in acc),
            "failed": k, "rate": p, "se": se, "p_at_alpha": float(binom.sf(k - 1, n, data["settings"]["alpha"])) if n
            else math.nan, "gauged": sum(bool(r.get("gauged")) for r in acc),
            "cpu": sum(r["cpu"] for r in recs)}


def text(data) -> str:
    s = summary(data)
    a = data["settings"]["alpha"]
    return (f"{s['designs']} generated designs: {s['accepted']} accepted ({s['gauged']} with a multiplier folded into a "
            f"weight's init and rate), {s['refused']} refused ({s['refused_unabsorbable']} of them with a multiplier "
            f"no weight can absorb; {s['unabsorbable_accepted']} such accepted). False alarms of limits' own check on "
            f"the accepted: {s['failed']}/{s['accepted']} = {s['rate']:.3f} ± {s['se']:.3f} (nominal ≤ {a:g}; "
            f"P(≥ {s['failed']} at α) = {s['p_at_alpha']:.2f}). CPU {s['cpu'] / 60:.0f} min.")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--designs", type=int, default=200)
    ap.add_argument("--json", default=str(DATA))
    from _tables import add_table_options, show_or_write

    add_table_options(ap, show_help="print the summary from the data",
                      write_help="write the summary into docs/torch_calibration.rst")
    a = ap.parse_args(argv)
    if show_or_write(a, a.json, DOC, (BEGIN, END), text):
        return 0
    import torch

    torch.set_num_threads(1)
    data = run(a.designs, Path(a.json), progress=lambda s: print(s, flush=True))
    print(text(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
