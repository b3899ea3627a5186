"""Calibration of the per-layer coordinate check of compositions (``limits.finite.serial_coordcheck.width_check``):
its false-alarm rate on correct networks (μP compositions checked against μP's predictions) and its power on wrong
ones (SP checked against μP's predictions; μP with one hidden layer's learning rate × N, and × N^-1: too small, seen
only through that layer's own update contribution dWh), over independent checks
(each check its own seed: data and 8 initialisations; 2 SGD steps, η0 = 1e-3; verdict: every quantity's fitted
exponent over the 4 largest widths has the prediction in its 95 % CI). A validation report, not a timing::

    nice python benchmarks/serial_coordcheck_calibration.py --checks 100 --power-checks 30
    nice python benchmarks/serial_coordcheck_calibration.py --resolution 20     # CI half-widths, added to the file
    nice python benchmarks/serial_coordcheck_calibration.py --mild 30           # power on lr × N^{1/4}, added too
    nice python benchmarks/serial_coordcheck_calibration.py --mild 30 --mild-exponent -0.25   # lr × N^{-1/4}

writes ``benchmarks/results/calibration/serial_coordcheck.json`` (rates ± binomial SE, per composition).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "calibration" / "serial_coordcheck.json"
SETTINGS = dict(seeds=8, steps=2, eta0=1e-3, P=8)


def compositions():
    """{name: (composition, input shape, widths, the hidden layer given the wrong learning rate)}."""
    import limits
    from limits import layers as L

    t = L.Activation("tanh")
    return {
        "MLP (Dense/tanh, 3 hidden)": (limits.serial(L.Dense(), t, L.Dense(), t, L.Dense(), t, L.Dense()), (8,),
                                       (32, 64, 128, 256, 512), "2"),
        "CNN (Conv 3×3/relu ×2, GlobalAvgPool, Dense)": (
            limits.serial(L.Conv((3, 3), "SAME"), L.Activation("relu"), L.Conv((3, 3), "SAME"), L.Activation("relu"),
                          L.GlobalAvgPool(), L.Dense()), (4, 4, 2), (16, 32, 64, 128, 256), "2"),
        "MLP with LayerNorm (Dense/LayerNorm/tanh)": (
            limits.serial(L.Dense(), L.LayerNorm(), t, L.Dense(), L.LayerNorm(), t, L.Dense()), (8,),
            (32, 64, 128, 256, 512), "3"),
    }


def _rate(k, n):
    p = k / n
    return {"flagged": k, "checks": n, "rate": p, "se": math.sqrt(max(p * (1 - p), 1.0 / n) / n)}


def run(checks, power_checks, progress=print, save=None):
    """Calibration data; ``save(data)`` after every case (a partial run keeps what it measured)."""
    import limits
    from limits.finite.serial_coordcheck import verdict, width_check

    out = {"settings": SETTINGS, "compositions": {}}
    for name, (comp, shape, widths, wrong) in compositions().items():
        mup, sp = limits.params.layer_table(comp, "muP"), limits.params.layer_table(comp, "SP")
        cases = {"muP (false alarms)": (mup, None, checks), "SP vs μP predictions (power)": (sp, None, power_checks),
                 f"μP, layer {wrong} lr × N (power)": (mup, {wrong: 1.0}, power_checks),
                 f"μP, layer {wrong} lr × N^-1 (power)": (mup, {wrong: -1.0}, power_checks)}
        res = out["compositions"][name] = {"widths": list(widths), "describe": comp.describe()}
        for case, (table, off, n) in cases.items():
            c0, flagged, slopes, by = time.process_time(), 0, [], {}
            for s in range(n):
                r = width_check(comp, table, shape, widths=widths, seed=5000 + s, lr_offsets=off,
                                predicted=mup.predicted, **SETTINGS)
                flagged += not verdict(r)
                for f in r.fits:
                    if f.consistent is False:
                        by[f.quantity] = by.get(f.quantity, 0) + 1
                slopes.append({f.quantity: round(f.tail_slope, 4) for f in r.fits})
            res[case] = dict(_rate(flagged, n), flagged_by=by, cpu_seconds=round(time.process_time() - c0, 1),
                             tail_slopes=slopes)
            progress(f"{name}: {case}: {flagged}/{n} flagged ({res[case]['cpu_seconds']} CPU s)")
            if save:
                save(out)
    return out


def resolution(checks, progress=print):
    """The smallest exponent error one check resolves: per composition and quantity, the median half-width of the
    95 % CI of the fitted exponent (4 largest widths) over ``checks`` μP checks (seeds 9000…)."""
    import limits
    import numpy as np
    from limits.finite.serial_coordcheck import width_check

    out = {}
    for name, (comp, shape, widths, _) in compositions().items():
        mup, hw = limits.params.layer_table(comp, "muP"), {}
        for s in range(checks):
            for f in width_check(comp, mup, shape, widths=widths, seed=9000 + s, **SETTINGS).fits:
                hw.setdefault(f.quantity, []).append((f.tail_ci_high - f.tail_ci_low) / 2)
        out[name] = {q: round(float(np.median(v)), 3) for q, v in hw.items()}
        progress(f"{name}: median CI half-widths {out[name]}")
    return {"checks": checks, "median_ci_halfwidth": out}


def mild(checks, exponent=0.25, progress=print):
    """Power on a mild error: one hidden layer's learning rate × N^{exponent} (its own contribution dWh's exponent off
    by that much; its Δh's too when the exponent is positive)."""
    import limits
    from limits.finite.serial_coordcheck import verdict, width_check

    out = {"exponent": exponent}
    for name, (comp, shape, widths, wrong) in compositions().items():
        mup, c0 = limits.params.layer_table(comp, "muP"), time.process_time()
        k = sum(not verdict(width_check(comp, mup, shape, widths=widths, seed=7000 + s, lr_offsets={wrong: exponent},
                                        **SETTINGS)) for s in range(checks))
        out[name] = dict(_rate(k, checks), cpu_seconds=round(time.process_time() - c0, 1))
        progress(f"{name}: layer {wrong} lr × N^{exponent}: {k}/{checks} flagged")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checks", type=int, default=40, help="checks of correct μP compositions (false alarms)")
    ap.add_argument("--power-checks", type=int, default=20, help="checks of each wrong network (power)")
    ap.add_argument("--resolution", type=int, default=0, metavar="CHECKS",
                    help="only measure the median CI half-width over CHECKS μP checks, added to the existing file")
    ap.add_argument("--mild", type=int, default=0, metavar="CHECKS",
                    help="only measure the power on one hidden layer's lr × N^E (--mild-exponent) over CHECKS checks, "
                         "added to the file")
    ap.add_argument("--mild-exponent", type=float, default=0.25, metavar="E",
                    help="the learning-rate error of --mild: × N^E (default 1/4; E ≠ 1/4 is stored under 'mild E')")
    ap.add_argument("--json", type=Path, default=OUT)
    a = ap.parse_args(argv)
    from limits.results import atomic_write_text

    if a.resolution or a.mild:
        data = json.loads(a.json.read_text()) if a.json.is_file() else {}
        say = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
        if a.resolution:
            data["resolution"] = resolution(a.resolution, progress=say)
        if a.mild:
            key = "mild" if a.mild_exponent == 0.25 else f"mild {a.mild_exponent:g}"
            data[key] = mild(a.mild, a.mild_exponent, progress=say)
        atomic_write_text(a.json, json.dumps(data, indent=1, ensure_ascii=False))
        print(a.json)
        return

    c0 = time.process_time()
    data = run(a.checks, a.power_checks, progress=lambda s: print(s, file=sys.stderr, flush=True),
               save=lambda d: atomic_write_text(a.json, json.dumps(d, indent=1, ensure_ascii=False)))
    data["cpu_seconds"] = round(time.process_time() - c0, 1)
    atomic_write_text(a.json, json.dumps(data, indent=1, ensure_ascii=False))
    print(a.json)


if __name__ == "__main__":
    main()
