"""CNN-GP and CNTK of scikit-learn digits (8×8, one channel): ``limits.kernels.kernel`` on a composition
against neural-tangents 0.6.5 (peer interpreter, jit, float64, one XLA thread; never imported here).

    python benchmarks/run.py layers            # P = 100, 200 (+ cost laws); --quick: P = 50, 100
    LIMITS_BENCH_LAYERS=full python benchmarks/run.py layers --json benchmarks/results/layers.json
                                               # + the issue's size P = 1000 (an hour or more on a shared 2-core machine)

Network: 3 × [Conv 3×3 SAME (σ_w² = 2, σ_b² = 0.01), ReLU] → GlobalAvgPool → Dense (NNGP and NTK); and the
down-sampling version with strides 1, 2, 2 (8×8 → 8×8 → 4×4 → 2×2; :func:`run_strided`: against its stride-1
version, a plain numpy implementation of the strided rule and neural-tangents, CPU and wall time)::

    python benchmarks/bench_layers.py --strided --merge benchmarks/results/layers.json   # only those rows

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
from _timing import PEER_TIMED, cpu_wall, cpu_wall_interleaved, fit_exponent, run_peer  # noqa: E402

import limits  # noqa: E402

L = limits.layers


STRIDES = (1, 2, 2)           # the down-sampling network: 8×8 → 8×8 → 4×4 → 2×2


def model(strides=(1, 1, 1)):
    """3 × [Conv 3×3 SAME (σ_w² = 2, σ_b² = 0.01, stride s), ReLU] → GlobalAvgPool → Dense."""
    layers = [x for s in strides for x in (L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.01, strides=(s, s)),
                                           L.Activation("relu"))]
    return limits.serial(*layers, L.GlobalAvgPool(), L.Dense(sigma_w2=1.0, sigma_b2=0.0))


def digits(P, side=8):
    from sklearn.datasets import load_digits

    X = load_digits().images[:P].astype(np.float64) / 16.0
    if side != 8:                                   # resample the 8×8 image to side×side (nearest)
        idx = np.minimum((np.arange(side) * 8) // side, 7)
        X = X[:, idx][:, :, idx]
    X = X - X.mean(axis=(1, 2), keepdims=True)
    return X[..., None]


PEER = PEER_TIMED + r'''
import json, resource, sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
from neural_tangents import stax
strides = [int(s) for s in sys.argv[1].split(",")]          # one stride per convolution
conv = lambda s: stax.Conv(8, (3, 3), strides=(s, s), padding="SAME", W_std=2.0 ** 0.5, b_std=0.01 ** 0.5)
layers = [x for s in strides for x in (conv(s), stax.Relu())]
_, _, kfn = stax.serial(*layers, stax.GlobalAvgPool(), stax.Dense(8, W_std=1.0, b_std=0.0))
out = []
for arg in sys.argv[2:]:
    path, calls = arg.split("::")
    res, nngp, ntk = nt_timed(kfn, np.load(path), int(calls))
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
    out = {"small": run_peer(PEER, "1,1,1", *small, timeout=6 * 3600)}
    if big:
        out["big"] = run_peer(PEER, "1,1,1", *big, timeout=budget)
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
    return rows + run_strided(quick)


# ------------------------------------------------------------------------------------ down-sampling network
PLAIN_TILE = 25      # the plain numpy baseline in tiles of 25 × 25 inputs (its full blocks stay ~20 MiB)


def plain_kernel(X, strides=STRIDES):
    """The plain vectorised numpy CNN-GP / CNTK (``_plain_kernels.plain_cnn_gap``), tile by tile over the upper
    triangle of input pairs (the lower one by symmetry) — what a careful user writes, memory bounded."""
    from _plain_kernels import plain_cnn_gap

    P, b = X.shape[0], PLAIN_TILE
    convs = [(3, s, 2.0, 0.01) for s in strides]
    K, T = np.empty((P, P)), np.empty((P, P))
    for i in range(0, P, b):
        for j in range(i, P, b):
            k, t = plain_cnn_gap(X[i:i + b], X[j:j + b], convs, 1.0, 0.0)
            K[i:i + b, j:j + b], T[i:i + b, j:j + b] = k, t
            K[j:j + b, i:i + b], T[j:j + b, i:i + b] = k.T, t.T
    return K, T


def _rel(a, b, off):
    return float(np.max(np.abs(a - b)[off]) / np.max(np.abs(b)))


def run_strided(quick=False, Ps=None):
    """Rows: the down-sampling CNN (strides 1, 2, 2: 8×8 → 8×8 → 4×4 → 2×2, global pooling) on digits — ours,
    its stride-1 version (ours), the plain numpy baseline (same strided rule, tiles) timed interleaved (CPU and
    wall, best of 3) while neural-tangents (peer process, jit, ``nt.batch`` of 50, one XLA thread) runs the same
    strided network concurrently; ratios of one run, kernels compared (NNGP and NTK off the diagonal)."""
    Ps = tuple(Ps or ((50,) if quick else (100, 200)))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for P in Ps:
            p = Path(tmp) / f"X_{P}.npy"
            np.save(p, digits(P))
            paths.append(f"{p}::3")
        peer = {}
        th = threading.Thread(target=lambda: peer.update(nt=run_peer(PEER, ",".join(map(str, STRIDES)), *paths,
                                                                      timeout=6 * 3600)))
        th.start()
        ours = {}
        for P in Ps:
            X = digits(P)
            ms, m1 = model(STRIDES), model()
            ours[P] = cpu_wall_interleaved({"strided": lambda: limits.kernels.kernel(ms, X),
                                            "stride1": lambda: limits.kernels.kernel(m1, X),
                                            "numpy": lambda: plain_kernel(X)}, repeat=3)
        th.join()
    nt, why = peer["nt"]
    for i, P in enumerate(Ps):
        (t, k), (t1, _), (tn, (Kn, Tn)) = ours[P]["strided"], ours[P]["stride1"], ours[P]["numpy"]
        off = ~np.eye(P, dtype=bool)
        row = {"name": f"down-sampling CNN-GP+CNTK digits P={P} 8x8 (conv strides 1,2,2 + GAP)", "P": P, "side": 8,
               "strided": True, "seconds": t["cpu"], "wall": t["wall"], "first_seconds": t["first_cpu"],
               "stride1_seconds": t1["cpu"], "stride1_wall": t1["wall"], "stride1_ratio": t1["cpu"] / t["cpu"],
               "numpy_seconds": tn["cpu"], "numpy_wall": tn["wall"], "numpy_ratio": tn["cpu"] / t["cpu"],
               "numpy_wall_ratio": tn["wall"] / t["wall"],
               "numpy_max_rel_diff": max(_rel(k.nngp, Kn, off), _rel(k.ntk, Tn, off))}
        note = (f"ours {t['cpu']:.2f} s CPU ({t['wall']:.2f} s wall); its stride-1 version {t1['cpu']:.2f} s "
                f"({row['stride1_ratio']:.1f}× the strided cost); plain numpy {tn['cpu']:.2f} s ({row['numpy_ratio']:.2f}×)")
        if nt is not None:
            r = nt[i]
            rel = max(_rel(k.nngp, np.array(r["nngp"]), off), _rel(k.ntk, np.array(r["ntk"]), off))
            row.update(baseline_seconds=r["cpu"], baseline_wall=r["wall"], nt_first_seconds=r["first_cpu"],
                       ratio=r["cpu"] / t["cpu"], nt_wall_ratio=r["wall"] / t["wall"], nt_maxrss=r["maxrss"],
                       max_rel_diff=rel)
            note += (f"; neural-tangents steady {r['cpu']:.2f} s CPU ({r['wall']:.2f} s wall; first call incl. jit "
                     f"{r['first_cpu']:.2f} s) = {row['ratio']:.2f}×; max rel. diff vs NT {rel:.1e}, vs numpy "
                     f"{row['numpy_max_rel_diff']:.1e}")
        else:
            note += f"; {why}"
        row["note"] = note
        rows.append(row)
    return rows


def merge(path, new, module="layers"):
    """Write ``new`` rows (of benchmark ``module``) into the results file ``path`` in place of the rows of the
    same name (others kept)."""
    import json

    from limits.results import atomic_write_text

    p = Path(path)
    old = json.loads(p.read_text()) if p.is_file() else []
    names = {r["name"] for r in new}
    rows = [r for r in old if r.get("name") not in names] + [{"module": module, **r} for r in new]
    atomic_write_text(p, json.dumps(rows, indent=1, default=str) + "\n")
    return p


def strided_table(rows):
    out = ["| P | ours CPU s (wall) | stride-1 version CPU s | stride-1 / strided | plain numpy CPU s (wall) | numpy / ours | "
           "NT CPU s steady (wall; first) | NT / ours | max rel. diff vs NT |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        nt = (f"{r['baseline_seconds']:.2f} ({r['baseline_wall']:.2f}; {r['nt_first_seconds']:.2f})"
              if "baseline_seconds" in r else "skipped")
        out.append(f"| {r['P']} | {r['seconds']:.2f} ({r['wall']:.2f}) | {r['stride1_seconds']:.2f} | {r['stride1_ratio']:.1f} | "
                   f"{r['numpy_seconds']:.2f} ({r['numpy_wall']:.2f}) | {r['numpy_ratio']:.2f} | {nt} | "
                   f"{r.get('ratio', float('nan')):.2f} | {r.get('max_rel_diff', float('nan')):.1e} |")
    return "\n".join(out)


def table(rows):
    out = ["| case | ours CPU s (first) | NT CPU s steady (first, incl. jit) | NT / ours | ours peak MiB | NT max RSS MiB | max rel. diff (NNGP, NTK x ≠ x') | NTK diagonal |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("strided"):
            continue
        if "P" not in r:
            out.append(f"| {r['name']} | {r['note']} | | | | | | |")
            continue
        nt = (f"{r['baseline_seconds']:.2f} ({r['nt_first_seconds']:.2f})" if "baseline_seconds" in r else "skipped")
        out.append(f"| P={r['P']}, {r['side']}×{r['side']} | {r['seconds']:.2f} ({r['first_seconds']:.2f}) | {nt} | "
                   f"{r.get('ratio', float('nan')):.2f} | {r['peak_bytes'] / 2**20:.0f} | "
                   f"{r.get('nt_maxrss', float('nan')) / 2**20:.0f} | {r.get('max_rel_diff', float('nan')):.1e} | "
                   f"{r.get('ntk_diag_rel_diff', float('nan')):.1e} |")
    strided = [r for r in rows if r.get("strided")]
    return "\n".join(out) + ("\n\n" + strided_table(strided) if strided else "")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--P", type=int, nargs="*", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--full", action="store_true", help="add the issue's size P = 1000 (8×8)")
    ap.add_argument("--strided", action="store_true", help="only the down-sampling network's rows")
    ap.add_argument("--merge", default=None, help="write the rows into this results JSON in place of the same rows")
    a = ap.parse_args()
    if a.strided:
        rs = run_strided(a.quick, tuple(a.P) if a.P else None)
    else:
        rs = run(a.quick, tuple(a.P) if a.P else None, full=a.full or None)
    print(table(rs))
    if a.merge:
        print(f"wrote {merge(a.merge, rs)}")
