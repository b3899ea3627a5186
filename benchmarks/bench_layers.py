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
a symmetric kernel). Both sides are timed alike (``_timing.interleaved``; benchmarks/README.md, "How each side is
timed"): a warm-up call each (for neural-tangents its jit compilation), then 5 rounds of one call of each side in
turn, each timed by its own process's CPU clock, best of 5. Reported per size: CPU seconds (first call and steady
state), peak memory (ours: tracemalloc peak of numpy allocations, in a separate untimed pass; theirs: the peer
process's max RSS), max relative difference of the kernels, and the fitted cost exponents in P and in the image side.
"""
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import REPEAT, Local, Peer, PeerError, fit_exponent, interleaved, machine, traced_peak  # noqa: E402
from nt_layers import NT_SETUP  # noqa: E402

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


BIG = 1000
REPEAT_BIG = int(os.environ.get("LIMITS_BENCH_LAYERS_REPEAT", REPEAT))    # timed rounds at P = 1000


def _measure(m, X, peer, key, tmp, repeat):
    """Ours and (when ``peer`` runs) neural-tangents on ``m`` at ``X``: a warm-up call each, then ``repeat`` rounds
    interleaved, each timed by its own process's CPU clock (``_timing.interleaved``); then ours under tracemalloc in
    an untimed pass. Returns (ours stats, our kernel, our peak, NT stats or None)."""
    sides = {"ours": Local(lambda: limits.kernels.kernel(m, X))}
    if peer is not None:
        xpath = Path(tmp) / f"X_{key}.npy"
        np.save(xpath, X)
        peer.prepare(key, {"model": m.to_dict(), "X": str(xpath)})
        sides["nt"] = peer.side(key)
    res = interleaved(sides, repeat=repeat)
    peak = traced_peak(lambda: limits.kernels.kernel(m, X))
    nt = None
    if peer is not None:
        nt = {**res["nt"][0], "maxrss": peer.maxrss()}
        nt["nngp"], nt["ntk"] = peer.result(key)
    return res["ours"][0], res["ours"][1], peak, nt


def run(quick=False, Ps=None, full=None):
    """Rows per (P, side); ``full`` (default: ``$LIMITS_BENCH_LAYERS == "full"``) adds P = 1000 at 8×8, timed in
    ``$LIMITS_BENCH_LAYERS_REPEAT`` rounds (default 5; each neural-tangents call there takes ~20 CPU-minutes)."""
    full = os.environ.get("LIMITS_BENCH_LAYERS", "") == "full" if full is None else full
    Ps = tuple(Ps or ((50, 100) if quick else (100, 200)))
    sides = (4, 6, 8)
    small = [(P, 8) for P in Ps] + [(Ps[0], s) for s in sides if s != 8]
    big = [(BIG, 8)] if full and BIG not in Ps else []
    cases = small + big
    ours, nt, why, loads = {}, {}, "", {}
    peer, why = Peer.start(NT_SETUP)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for c in cases:
                loads[c] = machine()
                key = f"{c[0]}-{c[1]}"
                try:
                    t, k, peak, nt[c] = _measure(model(), digits(*c), peer, key, tmp, REPEAT_BIG if c in big else REPEAT)
                except PeerError as exc:
                    peer.close(kill=True)
                    peer, why = None, str(exc)
                    t, k, peak, nt[c] = _measure(model(), digits(*c), None, key, tmp, REPEAT)
                ours[c] = (t, k, peak)
                loads[c]["load_after"] = machine()["load"]
    finally:
        if peer is not None:
            peer.close()
    rows = []
    for c in cases:
        t, k, peak = ours[c]
        row = {"name": f"CNN-GP+CNTK digits P={c[0]} {c[1]}x{c[1]} (3 conv + GAP)", "seconds": t["cpu"],
               "first_seconds": t["first_cpu"], "cpu_median": t["cpu_median"], "repeat": t["repeat"],
               "peak_bytes": peak, "P": c[0], "side": c[1], "machine": loads[c], "timing": TIMING}
        r = nt[c]
        if r is not None:
            rel = diag = float("nan")
            off = ~np.eye(c[0], dtype=bool)
            dn = np.abs(k.nngp - r["nngp"]) / np.max(np.abs(r["nngp"]))
            dt = np.abs(k.ntk - r["ntk"]) / np.max(np.abs(r["ntk"]))
            rel = max(float(dn.max()), float(dt[off].max()))      # NNGP and off-diagonal NTK
            diag = float(np.diag(dt).max())                       # see nt_layers.py: NT's c = 1 rounding
            row["ntk_diag_rel_diff"] = diag
            row.update(baseline_seconds=r["cpu"], nt_first_seconds=r["first_cpu"], nt_median=r["cpu_median"],
                       ratio=r["cpu"] / t["cpu"], nt_maxrss=r["maxrss"], max_rel_diff=rel,
                       note=f"neural-tangents steady {r['cpu']:.2f} s (best of {r['repeat']}; first call incl. jit "
                            f"{r['first_cpu']:.2f} s), ours {t['cpu']:.2f} s (best of {t['repeat']}; first call "
                            f"{t['first_cpu']:.2f} s); peak memory ours {peak / 2**20:.0f} MiB (separate pass), "
                            f"NT process max RSS {r['maxrss'] / 2**20:.0f} MiB; max rel. diff {rel:.1e} "
                            f"(NTK diagonal {diag:.1e})")
        else:
            row["note"] = why
        rows.append(row)
    byP = [r for r in rows if r["side"] == 8]
    bys = sorted([r for r in rows if r["P"] == Ps[0]], key=lambda r: r["side"])
    law = f"a = {fit_exponent([r['P'] for r in byP], [r['seconds'] for r in byP]):.2f} (theory 2"
    measured = [r for r in byP if "baseline_seconds" in r]
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
    its stride-1 version (ours), the plain numpy baseline (same strided rule, tiles) and neural-tangents (peer
    process, jit, ``nt.batch`` of 50, one XLA thread) on the same strided network, all four timed alike
    (``_timing.interleaved``: a warm-up call each, then 5 rounds interleaved, best of 5); ratios of one run, kernels
    compared (NNGP and NTK off the diagonal)."""
    Ps = tuple(Ps or ((50,) if quick else (100, 200)))
    rows = []
    peer, why = Peer.start(NT_SETUP)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for P in Ps:
                X, ms, m1 = digits(P), model(STRIDES), model()
                before = machine()
                sides = {"strided": Local(lambda: limits.kernels.kernel(ms, X)),
                         "stride1": Local(lambda: limits.kernels.kernel(m1, X)), "numpy": Local(lambda: plain_kernel(X))}
                if peer is not None:
                    np.save(Path(tmp) / f"X_{P}.npy", X)
                    peer.prepare(f"s{P}", {"model": ms.to_dict(), "X": str(Path(tmp) / f"X_{P}.npy")})
                    sides["nt"] = peer.side(f"s{P}")
                res = interleaved(sides)
                nt = None
                if peer is not None:
                    nt = {**res["nt"][0], "maxrss": peer.maxrss()}
                    nt["nngp"], nt["ntk"] = peer.result(f"s{P}")
                rows.append(_strided_row(P, res, nt, why, {**before, "load_after": machine()["load"]}))
    finally:
        if peer is not None:
            peer.close()
    return rows


def _strided_row(P, res, r, why, load):
    (t, k), (t1, _), (tn, (Kn, Tn)) = res["strided"], res["stride1"], res["numpy"]
    off = ~np.eye(P, dtype=bool)
    row = {"name": f"down-sampling CNN-GP+CNTK digits P={P} 8x8 (conv strides 1,2,2 + GAP)", "P": P, "side": 8,
           "strided": True, "seconds": t["cpu"], "wall": t["wall"], "first_seconds": t["first_cpu"],
           "cpu_median": t["cpu_median"], "repeat": t["repeat"],
           "stride1_seconds": t1["cpu"], "stride1_wall": t1["wall"], "stride1_ratio": t1["cpu"] / t["cpu"],
           "numpy_seconds": tn["cpu"], "numpy_wall": tn["wall"], "numpy_ratio": tn["cpu"] / t["cpu"],
           "numpy_wall_ratio": tn["wall"] / t["wall"],
           "numpy_max_rel_diff": max(_rel(k.nngp, Kn, off), _rel(k.ntk, Tn, off)), "machine": load, "timing": TIMING}
    note = (f"ours {t['cpu']:.2f} s CPU ({t['wall']:.2f} s wall); its stride-1 version {t1['cpu']:.2f} s "
            f"({row['stride1_ratio']:.1f}× the strided cost); plain numpy {tn['cpu']:.2f} s ({row['numpy_ratio']:.2f}×)")
    if r is not None:
        rel = max(_rel(k.nngp, r["nngp"], off), _rel(k.ntk, r["ntk"], off))
        row.update(baseline_seconds=r["cpu"], baseline_wall=r["wall"], nt_first_seconds=r["first_cpu"],
                   nt_median=r["cpu_median"], ratio=r["cpu"] / t["cpu"], nt_wall_ratio=r["wall"] / t["wall"],
                   nt_maxrss=r["maxrss"], max_rel_diff=rel)
        note += (f"; neural-tangents steady {r['cpu']:.2f} s CPU ({r['wall']:.2f} s wall; first call incl. jit "
                 f"{r['first_cpu']:.2f} s) = {row['ratio']:.2f}×; max rel. diff vs NT {rel:.1e}, vs numpy "
                 f"{row['numpy_max_rel_diff']:.1e}")
    else:
        note += f"; {why}"
    row["note"] = note
    return row


TIMING = ("CPU = time.process_time of the process running each side (one BLAS/XLA thread each); one warm-up call "
          f"per side, then {REPEAT} rounds interleaved (ours, neural-tangents, …), best of the {REPEAT}; memory in a "
          "separate untimed pass (tracemalloc) and NT's process max RSS")


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
