"""Calibrates limits.finite.serial.init_bytes: the estimated bytes of one initialisation of a composition's finite
network against the peak that tracemalloc measures in SerialNetwork.kernels (chunk of 1 init, NNGP + NTK).

    python benchmarks/finite_memory.py        → benchmarks/results/memory/finite_memory.json (+ a table on stdout)

The estimate decides how many inits `limits check` runs at once and refuses a composition one init of which does
not fit in half the available memory; it must never be below the measured peak (ratio ≥ 1) and not far above it.
"""
from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path

import numpy as np

import limits
from limits.finite.serial import SerialNetwork, init_bytes
from limits.layers import (Activation, Attention, AvgPool, Conv, Dense, Flatten, GlobalAvgPool, LayerNorm,
                           Residual)

OUT = Path(__file__).resolve().parent / "results" / "memory" / "finite_memory.json"


def cases():
    r = np.random.default_rng(0)
    yield "MLP erf", limits.serial(Dense(), Activation("erf"), Dense(), Activation("erf"), Dense()), r.standard_normal((16, 8))
    yield "CNN relu", limits.serial(Conv(), Activation("relu"), Conv(), Activation("relu"), GlobalAvgPool(), Dense()), \
        r.standard_normal((4, 8, 8, 3))
    yield "CNN pool", limits.serial(Conv(), Activation("relu"), AvgPool((2, 2)), Conv(), Activation("relu"), Flatten(),
                                    Dense()), r.standard_normal((4, 8, 8, 3))
    for T, H in ((16, 1), (32, 2), (64, 2)):
        yield f"attention T={T} H={H}", limits.serial(Dense(), Attention(n_heads=H), Activation("relu"),
                                                      GlobalAvgPool(), Dense()), r.standard_normal((6, T, 4))
    yield "attention + pos emb", limits.serial(Dense(), Attention(n_heads=2, pos_emb="SUM"), Activation("relu"),
                                               GlobalAvgPool(), Dense()), r.standard_normal((6, 24, 4))
    yield "residual", limits.serial(Dense(), Residual(limits.serial(Activation("relu"), Dense()), 0.5),
                                    Activation("erf"), Dense()), r.standard_normal((16, 8))
    yield "layernorm attention", limits.serial(Dense(), LayerNorm(), Attention(n_heads=2), Activation("relu"),
                                               GlobalAvgPool(), Dense()), r.standard_normal((5, 20, 4))


def measure(m, X, width):
    net = SerialNetwork(m, width)
    net.kernels(X, 1, seed=0, chunk=1)                     # warm (imports, caches)
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    net.kernels(X, 1, seed=1, chunk=1)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def main():
    rows = []
    for name, m, X in cases():
        for width in (64, 256):
            est, layer, why = init_bytes(m, X.shape[1:], X.shape[0], width)
            peak = measure(m, X, width)
            rows.append({"case": name, "width": width, "P": X.shape[0], "input_shape": list(X.shape[1:]),
                         "estimate_bytes": est, "measured_peak_bytes": peak, "ratio": est / peak, "costliest": layer})
            print(f"{name:24s} N={width:4d}  estimate {est / 2**20:8.2f} MiB  measured {peak / 2**20:8.2f} MiB  "
                  f"ratio {est / peak:5.2f}  ({layer})", flush=True)
    ratios = [r["ratio"] for r in rows]
    summary = {"min_ratio": min(ratios), "max_ratio": max(ratios), "n": len(rows),
               "python": sys.version.split()[0], "numpy": np.__version__}
    print(summary)
    OUT.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
