"""CNN-GP and CNTK of scikit-learn digits (8×8, one channel): ``limits.kernels.kernel`` on a composition
against neural-tangents 0.6.5 (peer interpreter, jit, float64, one XLA thread; never imported here).

    python benchmarks/run.py layers            # P = 100, 200 (+ cost laws); --quick: P = 50, 100
    LIMITS_BENCH_LAYERS=full python benchmarks/run.py layers --json benchmarks/results/layers.json
                                               # + the issue's size P = 1000 (an hour or more on a shared 2-core machine)

Network: 3 × [Conv 3×3 SAME (σ_w² = 2, σ_b² = 0.01), ReLU] → GlobalAvgPool → Dense (NNGP and NTK).
Global pooling needs every pair of positions: P²·S² floats per block (S = 64), so ours runs in tiles
(``limits.kernels.composed``: memory = output + one tile of ≤ 256 MiB) and neural-tangents in its
``nt.batch`` batches of 50 (it computes every batch pair; ours skips the tiles below the diagonal of
a symmetric kernel). The peer process runs concurrently with ours (both under the same machine load;
CPU time is per process). Reported per size: CPU seconds (first call and steady state; for
neural-tangents the first call includes jit compilation), peak memory (ours: tracemalloc peak of numpy
allocations; theirs: the peer process's max RSS), max relative difference of the kernels, and the fitted
cost exponents in P and in the image side.
"""
import os
import sys
import tempfile
import threading
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import cpu_wall, fit_exponent, run_peer  # noqa: E402

import limits  # noqa: E402

L = limits.layers


def model():
    conv = lambda: L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.01)  # noqa: E731
    return limits.serial(conv(), L.Activation("relu"), conv(), L.Activation("relu"), conv(), L.Activation("relu"),
                         L.GlobalAvgPool(), L.Dense(sigma_w2=1.0, sigma_b2=0.0))


def digits(P, side=8):
    from sklearn.datasets import load_digits

    X = load_digits().images[:P].astype(np.float64) / 16.0
    if side != 8:                                   # resample the 8×8 image to side×side (nearest)
        idx = np.minimum((np.arange(side) * 8) // side, 7)
        X = X[:, idx][:, :, idx]
    X = X - X.mean(axis=(1, 2), keepdims=True)
    return X[..., None]


PEER = r'''
import json, resource, sys, time
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import neural_tangents as nt
from neural_tangents import stax
conv = lambda: stax.Conv(8, (3, 3), padding="SAME", W_std=2.0 ** 0.5, b_std=0.01 ** 0.5)
_, _, kfn = stax.serial(conv(), stax.Relu(), conv(), stax.Relu(), conv(), stax.Relu(), stax.GlobalAvgPool(),
                        stax.Dense(8, W_std=1.0, b_std=0.0))
out = []
for arg in sys.argv[1:]:
    path, calls = arg.split("::")
    X = np.load(path)
    b = min(50, X.shape[0])
    while X.shape[0] % b:
        b -= 1
    fn = nt.batch(jax.jit(kfn, static_argnames="get"), batch_size=b, store_on_device=False)
    res = {}
    for k in range(int(calls)):
        c0 = time.process_time()
        r = fn(X, None, ("nngp", "ntk"))
        nngp, ntk = np.asarray(r.nngp), np.asarray(r.ntk)
        c = time.process_time() - c0
        res.setdefault("first_cpu", c)
        res["cpu"] = min(res.get("cpu", c), c)
    res["nngp"], res["ntk"] = nngp.tolist(), ntk.tolist()
    res["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out.append(res)
print(json.dumps(out))
'''


BIG = 1000


def _calls(P):
    """Calls per size: the first and the best of the others; one at the issue's size P = 1000 (ours has no
    compile step, so its first call is its steady state)."""
    return 1 if P >= 500 else 3


def _ours(X):
    m = model()
    tracemalloc.start()
    t, k = cpu_wall(lambda: limits.kernels.kernel(m, X), repeat=_calls(X.shape[0]))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return t, k, peak


def _peers(small, big, budget):
    """neural-tangents on the small cases, then (own process, ``budget`` seconds) on the big one."""
    out = {"small": run_peer(PEER, *small, timeout=6 * 3600)}
    if big:
        out["big"] = run_peer(PEER, *big, timeout=budget)
    return out


def run(quick=False, Ps=None, full=None):
    """Rows per (P, side); ``full`` (default: ``$LIMITS_BENCH_LAYERS == "full"``) adds P = 1000 at 8×8.

    At P = 1000 neural-tangents is called once (its first call, jit included; at 2 cores shared by other
    jobs two calls take hours): its steady state is that call minus its compile share measured at the
    largest small P (first − steady there: its batches have the same 50×50 shapes, so the same jit), or,
    if it does not finish within ``$LIMITS_BENCH_LAYERS_BUDGET`` seconds, its steady state at that P
    scaled by (1000/P)² (nt.batch evaluates (P/50)² identical batch pairs) — the row says which."""
    full = os.environ.get("LIMITS_BENCH_LAYERS", "") == "full" if full is None else full
    budget = float(os.environ.get("LIMITS_BENCH_LAYERS_BUDGET", 6 * 3600))
    Ps = tuple(Ps or ((50, 100) if quick else (100, 200)))
    sides = (4, 6, 8)
    small = [(P, 8) for P in Ps] + [(Ps[0], s) for s in sides if s != 8]
    big = [(BIG, 8)] if full and BIG not in Ps else []
    cases = small + big
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for c in cases:
            p = Path(tmp) / f"X_{c[0]}_{c[1]}.npy"
            np.save(p, digits(*c))
            paths[c] = f"{p}::{_calls(c[0])}"
        peer = {}
        th = threading.Thread(target=lambda: peer.update(_peers([paths[c] for c in small], [paths[c] for c in big],
                                                                budget)))
        th.start()                                        # the peer works while ours is timed
        ours = {c: _ours(digits(*c)) for c in cases}
        th.join()
    nt_small, why = peer["small"]
    nt = {c: (None if nt_small is None else nt_small[i]) for i, c in enumerate(small)}
    ref = max((c for c in small if c[1] == 8), key=lambda c: c[0])
    for c in big:
        r, why_big = peer["big"]
        if r is not None:
            r = r[0]
            if nt[ref] is not None:
                r["cpu"] = r["first_cpu"] - (nt[ref]["first_cpu"] - nt[ref]["cpu"])
                r["how"] = (f"neural-tangents steady state = its one first call {r['first_cpu']:.1f} s minus its "
                            f"compile share at P={ref[0]} ({nt[ref]['first_cpu'] - nt[ref]['cpu']:.1f} s)")
        elif nt[ref] is not None:
            f = (c[0] / ref[0]) ** 2
            r = {"cpu": nt[ref]["cpu"] * f, "first_cpu": float("nan"), "maxrss": float("nan"),
                 "how": f"neural-tangents did not finish within {budget:.0f} s "
                        f"({'timed out' if 'timed out' in why_big else why_big[:80]}); its steady state at "
                        f"P={ref[0]} × {f:.0f} (nt.batch: (P/50)² identical batch pairs) — an extrapolation"}
        nt[c] = r
    rows = []
    for c in cases:
        t, k, peak = ours[c]
        row = {"name": f"CNN-GP+CNTK digits P={c[0]} {c[1]}x{c[1]} (3 conv + GAP)", "seconds": t["cpu"],
               "first_seconds": t["first_cpu"], "peak_bytes": peak, "P": c[0], "side": c[1]}
        r = nt[c]
        if r is not None:
            rel = diag = float("nan")
            if "nngp" in r:
                off = ~np.eye(c[0], dtype=bool)
                dn = np.abs(k.nngp - np.array(r["nngp"])) / np.max(np.abs(r["nngp"]))
                dt = np.abs(k.ntk - np.array(r["ntk"])) / np.max(np.abs(r["ntk"]))
                rel = max(float(dn.max()), float(dt[off].max()))      # NNGP and off-diagonal NTK
                diag = float(np.diag(dt).max())                       # see nt_layers.py: NT's c = 1 rounding
            row["ntk_diag_rel_diff"] = diag
            row.update(baseline_seconds=r["cpu"], nt_first_seconds=r["first_cpu"], ratio=r["cpu"] / t["cpu"],
                       nt_maxrss=r["maxrss"], max_rel_diff=rel,
                       note=f"neural-tangents steady {r['cpu']:.2f} s (first call {r['first_cpu']:.2f} s), "
                            f"ours first call {t['first_cpu']:.2f} s; peak memory ours {peak / 2**20:.0f} MiB, "
                            f"NT process max RSS {r['maxrss'] / 2**20:.0f} MiB; max rel. diff {rel:.1e} "
                            f"(NTK diagonal {diag:.1e})" + (f"; {r['how']}" if "how" in r else ""))
            if "how" in r:
                row.update(nt_steady_estimated=True, nt_how=r["how"])
        else:
            row["note"] = why
        rows.append(row)
    byP = [r for r in rows if r["side"] == 8]
    bys = sorted([r for r in rows if r["P"] == Ps[0]], key=lambda r: r["side"])
    law = f"a = {fit_exponent([r['P'] for r in byP], [r['seconds'] for r in byP]):.2f} (theory 2"
    measured = [r for r in byP if "baseline_seconds" in r and not r.get("nt_steady_estimated")]
    if len(measured) >= 2:
        law += (f"; neural-tangents {fit_exponent([r['P'] for r in measured], [r['baseline_seconds'] for r in measured]):.2f}"
                f" at P = {', '.join(str(r['P']) for r in measured)}")
    bys_nt = f"; neural-tangents {fit_exponent([r['side'] for r in bys], [r['baseline_seconds'] for r in bys]):.2f}" \
        if all("baseline_seconds" in r for r in bys) else ""
    rows.append({"name": "cost law (ours): CPU ∝ P^a, ∝ side^b", "seconds": float("nan"),
                 "note": f"{law}; ours at P = {', '.join(str(r['P']) for r in byP)}), "
                         f"b = {fit_exponent([r['side'] for r in bys], [r['seconds'] for r in bys]):.2f} "
                         f"(theory 4: S² position pairs, S = side²{bys_nt}; sides 4, 6, 8 at P = {Ps[0]})"})
    return rows


def table(rows):
    out = ["| case | ours CPU s (first) | NT CPU s steady (first, incl. jit) | NT / ours | ours peak MiB | NT max RSS MiB | max rel. diff (NNGP, NTK x ≠ x') | NTK diagonal |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "P" not in r:
            out.append(f"| {r['name']} | {r['note']} | | | | | | |")
            continue
        nt = (f"{r['baseline_seconds']:.2f} ({r['nt_first_seconds']:.2f})" if "baseline_seconds" in r else "skipped")
        out.append(f"| P={r['P']}, {r['side']}×{r['side']} | {r['seconds']:.2f} ({r['first_seconds']:.2f}) | {nt} | "
                   f"{r.get('ratio', float('nan')):.2f} | {r['peak_bytes'] / 2**20:.0f} | "
                   f"{r.get('nt_maxrss', float('nan')) / 2**20:.0f} | {r.get('max_rel_diff', float('nan')):.1e} | "
                   f"{r.get('ntk_diag_rel_diff', float('nan')):.1e} |")
    return "\n".join(out)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--P", type=int, nargs="*", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true", help="add the issue's size P = 1000 (8×8)")
    a = ap.parse_args()
    rs = run(a.quick, tuple(a.P) if a.P else None, full=a.full or None)
    print(table(rs))
