"""What reusing a computed kernel saves (``kernel=`` of limits.predict, ``limits predict --kernel PATH``): the
CNN-GP of the README on 500 training + 100 test digits. Each prediction computed from scratch (it computes its
kernels) against the kernel computed once (NNGP + NTK of the 600 stacked inputs, saved and loaded back as
.npz + .json) and every prediction reading it; process CPU and wall seconds, both sides timed alike in one run,
one BLAS thread; the predictions must agree to 1e-10 relative.

    python benchmarks/bench_kernel_reuse.py [--write]     # → benchmarks/results/cliedges/kernel_reuse.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results" / "cliedges" / "kernel_reuse.json"


def timed(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=500, help="training digits (default: 500)")
    ap.add_argument("--test", type=int, default=100, help="test digits (default: 100)")
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = ap.parse_args()
    os.environ.setdefault("LIMITS_BLAS_THREADS", "1")
    import limits
    from sklearn.datasets import load_digits

    digits = load_digits()
    X = (digits.images / 16.0 - 0.3)[..., None]
    Y = np.eye(10)[digits.target] - 0.1
    Xtr, Ytr, Xte = X[:args.train], Y[:args.train], X[1000:1000 + args.test]
    L = limits.layers
    cnn = limits.serial(L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.05), L.Activation("relu"),
                        L.GlobalAvgPool(), L.Dense(sigma_w2=1.0, sigma_b2=0.05))
    P = limits.predict
    ts = [10.0, np.inf]
    rows = {}
    post, c, w = timed(lambda: P.nngp_posterior(cnn, Xtr, Ytr, Xte, noise="auto"))
    rows["posterior (noise auto), computing its kernels"] = (c, w)
    gd, c, w = timed(lambda: P.gradient_descent(cnn, Xtr, Ytr, Xte, t=ts, reduction="mean"))
    rows["gradient flow (t = 10, ∞), computing its kernels"] = (c, w)
    k, c, w = timed(lambda: limits.kernels.kernel(cnn, np.concatenate([Xtr, Xte])))
    rows["kernel once: NNGP + NTK of the stacked inputs"] = (c, w)
    with tempfile.TemporaryDirectory() as tmp:
        _, c, w = timed(lambda: k.save(Path(tmp) / "K"))
        rows["save the kernel (.npz + .json)"] = (c, w)
        k2, c, w = timed(lambda: limits.results.load_result(Path(tmp) / "K"))
        rows["load it back"] = (c, w)
    post2, c, w = timed(lambda: P.nngp_posterior(cnn, Xtr, Ytr, Xte, noise="auto", kernel=k2))
    rows["posterior (noise auto), kernel=loaded kernel"] = (c, w)
    gd2, c, w = timed(lambda: P.gradient_descent(cnn, Xtr, Ytr, Xte, t=ts, reduction="mean", kernel=k2))
    rows["gradient flow (t = 10, ∞), kernel=loaded kernel"] = (c, w)
    agree = {"posterior mean": rel(post2.mean, post.mean), "posterior cov": rel(post2.cov, post.cov),
             "flow mean": rel(gd2.mean, gd.mean), "flow cov": rel(gd2.cov, gd.cov)}
    assert max(agree.values()) < 1e-10, agree
    out = {"task": f"CNN-GP (Conv 3×3 SAME, relu, GlobalAvgPool, Dense) on {args.train} + {args.test} digits "
                   "(8×8×1), 10 outputs",
           "rows": [{"step": s, "cpu_s": round(c, 3), "wall_s": round(w, 3)} for s, (c, w) in rows.items()],
           "max_relative_difference": agree, "load_average": os.getloadavg()[0], "blas_threads": 1}
    for r in out["rows"]:
        print(f"{r['step']:55s} CPU {r['cpu_s']:8.2f} s   wall {r['wall_s']:8.2f} s")
    print("agreement (max relative difference):", agree)
    if args.write:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(out, indent=1) + "\n")
        print(f"written {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
