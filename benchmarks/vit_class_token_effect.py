"""Where a class token's effect is read (docs/torch_calibration.rst, "Where a tensor's effect is read"): the suite's
ViT under limits' own μP, one Adam-like first step on ``cls_token`` alone (Δ = −η_cls·sign(g), η_cls its plan's
rate, η = 10⁻²), its effect read two ways over widths 64…2048, 4 seeds each (mean ± SE):

* at the network's output (the coordinate check's row before issue 43): rms(f(cls₁) − f(cls₀)) — a Θ(1) limit
  reached only from N ≈ 1024 (the part uncorrelated with the μP read-out falls as N^{−1/2});
* where it enters the stream (the row now): rms of the ``cat`` output's change — ``η/√17`` at every width.

A validation report, not a timing (CPU seconds are process time)::

    nice -n 10 python benchmarks/vit_class_token_effect.py          # writes benchmarks/results/calibration/
    python benchmarks/vit_class_token_effect.py --table               # vit_class_token_effect.json; its table
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "results" / "calibration" / "vit_class_token_effect.json"
WIDTHS = (64, 128, 256, 512, 1024, 2048)
SEEDS = 4
LR = 1e-2


def one(P, width, seed, X, Y):
    """(effect at the output, effect where the class token enters the stream) of one first step."""
    import torch

    from limits.torch.recording import first_use

    torch.manual_seed(int(seed))
    m = P(width)
    rate = next(g.get("lr", LR) for g in P.param_groups(m, LR) if any(p is m.cls_token for p in g["params"]))
    out0 = m(X)
    g = torch.autograd.grad(torch.nn.functional.cross_entropy(out0, Y), m.cls_token)[0]
    with torch.no_grad():
        with first_use(m.cls_token) as seen:
            m(X)
        at0 = seen.out
        m.cls_token -= rate * torch.sign(g)
        with first_use(m.cls_token) as seen:
            out1 = m(X)
        return float((out1 - out0).pow(2).mean().sqrt()), float((seen.out - at0).pow(2).mean().sqrt())


def run(path=DATA):
    import torch

    from limits.results import atomic_write_text
    from limits.torch import parameterise, suite

    torch.set_num_threads(1)
    t = time.process_time()
    X, Y = suite.image_data()
    P = parameterise(suite.vit, "muP", widths=(32, 64, 128, 256), example_inputs=(X,))
    rows = []
    for N in WIDTHS:
        v = np.array([one(P, N, s, X, Y) for s in range(SEEDS)])
        rows.append({"width": N, "output": v[:, 0].tolist(), "entry": v[:, 1].tolist()})
        print(_line(rows[-1]), flush=True)
    data = {"lr": LR, "seeds": SEEDS, "rows": rows, "cpu_seconds": time.process_time() - t,
            "torch": torch.__version__}
    atomic_write_text(path, json.dumps(data, indent=1))
    return data


def _line(r):
    o, e = np.asarray(r["output"]), np.asarray(r["entry"])
    se = o.std(ddof=1) / math.sqrt(o.size)
    return f"N = {r['width']:5d}: at the output {o.mean():.4f} ± {se:.4f}; where it enters {e.mean():.6f}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", action="store_true", help="print the table from the committed data")
    a = ap.parse_args(argv)
    if a.table:
        data = json.loads(DATA.read_text())
        print("\n".join(_line(r) for r in data["rows"]) + f"\nη/√17 = {data['lr'] / math.sqrt(17):.6f}; "
              f"CPU {data['cpu_seconds']:.0f} s")
        return 0
    run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
