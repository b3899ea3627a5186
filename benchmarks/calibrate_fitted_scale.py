"""Calibration of ``limits.check`` of an NNGP posterior whose output scale and noise were fitted (``noise="auto"``):
false-alarm rate on correct posteriors and power against a covariance (or mean) off by a factor, over seeds.

    python benchmarks/calibrate_fitted_scale.py            # 40 seeds per row, a few CPU-minutes
    python benchmarks/calibrate_fitted_scale.py 200 correct   # 200 seeds, the false-alarm row only

Task: depth-2 erf MLP, 12 training and 2 test points (d_in 3, 2 outputs), targets with noise; the posterior with
s², σ² fitted; the check at its default regime widths and 48 initialisations, a fresh check seed per run. Rows:
correct posterior; cov × 1.1 and × 1.3; mean × 1.05. Reported: the fraction of runs whose verdict is "fail"
(± binomial SE), and the fraction "inconclusive".
"""
import sys
from dataclasses import replace

import numpy as np

import limits


def main(n=40, only=None):
    rng = np.random.default_rng(5)
    m = limits.mlp(3, 2, d_out=2, activation="erf", sigma_w2=1.5, sigma_b2=0.3)
    X = rng.standard_normal((12, 3))
    Y = np.stack([np.sin(2 * X[:, 0]), np.cos(X[:, 1])], 1) * 0.3 + 0.05 * rng.standard_normal((12, 2))
    p = limits.predict.nngp_posterior(m, X, Y, rng.standard_normal((2, 3)), noise="auto")
    print(p)
    rows = {"correct": p, "cov × 1.1": replace(p, cov=1.1 * p.cov, var=1.1 * p.var),
            "cov × 1.3": replace(p, cov=1.3 * p.cov, var=1.3 * p.var), "mean × 1.05": replace(p, mean=1.05 * p.mean)}
    print("| posterior | runs | fail | inconclusive |\n|---|---:|---:|---:|")
    for name, r in rows.items():
        if only and name not in only:
            continue
        v = [limits.check(r, inits=48, seed=1000 + s, progress=False).verdict for s in range(n)]
        f, i = v.count("fail") / n, v.count("inconclusive") / n
        print(f"| {name} | {n} | {f:.3f} ± {np.sqrt(f * (1 - f) / n):.3f} | {i:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 40, sys.argv[2].split(",") if len(sys.argv) > 2 else None))
