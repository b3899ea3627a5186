"""Issue 36's composition rows: ``limits.kernels.kernel`` (packed pairs of inputs) against a plain vectorised numpy
implementation of the same rules and neural-tangents 0.6.5's jitted steady state (peer interpreter, ``nt.batch`` of
50, float64, one XLA thread; one process per case, so that its max RSS is that case's), NNGP and NTK, all three timed
alike (``_timing.interleaved``: one warm-up call each, then 5 rounds interleaved, each call timed by its own
process's CPU clock, best of 5), peak memory per row in a separate untimed pass.

    nice python benchmarks/bench_compositions.py --merge benchmarks/results/compositions.json
    nice python benchmarks/bench_compositions.py --case cnn-gap --P 100 200 --merge …    # a subset

Cases (8×8 scikit-learn digits, centred per image):

* ``cnn-gap`` / ``cnn-flatten``: 3 × [Conv 3×3 SAME (σ_w² = 2, σ_b² = 0.01), ReLU] → GlobalAvgPool / Flatten →
  Dense (goal 1; global pooling needs every pair of positions, S² = 4096 entries per pair of inputs; Flatten only
  equal positions, S = 64);
* ``attn-ln-16`` / ``attn-ln-32``: Dense(1, 0.1) → LayerNorm → Attention(1 head, s = 1, σ_w² = 1, σ_b² = 0.1) →
  ReLU → Dense(2, 0.1) → LayerNorm → GlobalAvgPool → Dense on the digit as 16 tokens of 2×2 pixels or 32 tokens
  of 1×2 pixels (goal 3).

The floor of each case (:func:`floor`), timed in the same run as numpy passes over a cache-sized block:

* ``cnn-gap``: its irreducible elementwise passes per pair of positions — per 3×3 convolution 8 additions for the
  NNGP and 8 for the NTK, per ReLU one arctan — times the P(P+1)/2 pairs of inputs × S² position pairs;
* ``cnn-flatten``: the same passes on the S equal-position pairs only (all a Flatten read-out needs);
* ``attn-ln-T``: per pair of inputs the T² position pairs of its one ReLU (one arctan each) plus the attention
  weighting A_x K A_yᵀ of the NNGP and of the NTK (four T×T matrix products, timed as one batched ``np.matmul``
  over a stack of pairs); LayerNorm and the read-out layers are not counted (a lower bound).
"""
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _plain_kernels import relu_from  # noqa: E402
from _timing import (REPEAT, Local, Peer, PeerError, cpu_wall, interleaved, machine,  # noqa: E402
                     traced_peak)
from bench_layers import digits, merge, plain_kernel  # noqa: E402
from nt_layers import NT_SETUP  # noqa: E402

import limits  # noqa: E402

L = limits.layers
NT_BATCH = 50


# ---------------------------------------------------------------------------------------------------- cases
def cnn(readout):
    layers = [x for _ in range(3) for x in (L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.01), L.Activation("relu"))]
    return limits.serial(*layers, readout, L.Dense(sigma_w2=1.0, sigma_b2=0.0))


def attention_model():
    return limits.serial(L.Dense(sigma_w2=1.0, sigma_b2=0.1), L.LayerNorm(),
                         L.Attention(n_heads=1, qk_scale=1.0, sigma_w2=1.0, sigma_b2=0.1), L.Activation("relu"),
                         L.Dense(sigma_w2=2.0, sigma_b2=0.1), L.LayerNorm(), L.GlobalAvgPool(),
                         L.Dense(sigma_w2=1.0, sigma_b2=0.0))


def tokens(P, n):
    """The digit as ``n`` tokens: 16 of 2×2 pixels or 32 of 1×2 pixels (P, n, 64/n)."""
    X = digits(P)[..., 0]
    ph, pw = {16: (2, 2), 32: (1, 2)}[n]
    X = X.reshape(P, 8 // ph, ph, 8 // pw, pw).transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(X.reshape(P, n, ph * pw))


# ----------------------------------------------------------------------------------------- plain numpy rules
def plain_cnn_flatten(X, tile=100):
    """3 × [Conv 3×3 SAME, ReLU] → Flatten → Dense the obvious way: Flatten needs equal positions only, so the
    block of a pair of inputs is (h, w); tiles of ``tile`` × ``tile`` inputs over the upper triangle."""
    return upper_tiles(X, _plain_flatten_tile, tile)


def upper_tiles(X, tile_fn, tile):
    """(K, Θ) of all pairs of inputs of X from ``tile_fn(X_a, X_b)`` on the tiles of ``tile`` × ``tile`` inputs of
    the upper triangle (the lower one by symmetry)."""
    P = X.shape[0]
    K, T = np.empty((P, P)), np.empty((P, P))
    for i in range(0, P, tile):
        for j in range(i, P, tile):
            k, t = tile_fn(X[i:i + tile], X[j:j + tile])
            K[i:i + tile, j:j + tile], T[i:i + tile, j:j + tile] = k, t
            K[j:j + tile, i:i + tile], T[j:j + tile, i:i + tile] = k.T, t.T
    return K, T


def _same3(K):
    """Σ of the 3×3 offsets of a SAME convolution over the last two axes (zero padding), / 9."""
    Kp = np.pad(K, [(0, 0)] * (K.ndim - 2) + [(1, 1), (1, 1)])
    n, m = K.shape[-2:]
    return sum(Kp[..., a:a + n, b:b + m] for a in range(3) for b in range(3)) / 9.0


def _plain_flatten_tile(X1, X2):
    C = X1.shape[-1]
    K = np.einsum("pijc,qijc->pqij", X1, X2) / C
    q1, q2 = (np.einsum("pijc,pijc->pij", X, X) / C for X in (X1, X2))
    T = np.zeros_like(K)
    for _ in range(3):
        K = 2.0 * _same3(K) + 0.01
        T = 2.0 * _same3(T) + K
        q1, q2 = 2.0 * _same3(q1) + 0.01, 2.0 * _same3(q2) + 0.01
        K, G = relu_from(K, np.sqrt(q1[:, None] * q2[None, :]))
        T = G * T
        q1, q2 = q1 / 2.0, q2 / 2.0
    K_out = K.mean(axis=(2, 3))
    return K_out, T.mean(axis=(2, 3)) + K_out


def plain_attention(X, tile=50):
    """:func:`attention_model` the obvious way, tile by tile over the upper triangle: every block (A, B, T, T)
    with the self covariances (P, T, T) of each side carried along (attention weights, variances)."""
    return upper_tiles(X, _plain_attention_tile, tile)


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _plain_attention_tile(X1, X2):
    n = X1.shape[-1]
    K = np.einsum("pic,qjc->pqij", X1, X2) / n
    C1, C2 = (np.einsum("pic,pjc->pij", X, X) / n for X in (X1, X2))
    # Dense(1, 0.1)
    K, C1, C2 = K + 0.1, C1 + 0.1, C2 + 0.1
    T = K.copy()
    # LayerNorm (ε = 1e-12): K[i, j] / √((q_i + ε)(q_j + ε))
    r1, r2 = (1.0 / np.sqrt(np.einsum("pii->pi", C) + 1e-12) for C in (C1, C2))
    rr = r1[:, None, :, None] * r2[None, :, None, :]
    K, T = K * rr, T * rr
    C1, C2 = C1 * r1[:, :, None] * r1[:, None, :], C2 * r2[:, :, None] * r2[:, None, :]
    # Attention(1 head, s = 1, σ_w² = 1, σ_b² = 0.1): A = softmax(C), K' = A K Bᵀ + 0.1, Θ' = A (Θ + 2K) Bᵀ + 0.1
    A1, A2 = _softmax(C1), _softmax(C2)
    K, T = (np.einsum("pia,pqab,qjb->pqij", A1, M, A2, optimize=True) + 0.1 for M in (K, T + 2.0 * K))
    C1, C2 = (np.einsum("pia,pab,pjb->pij", A, C, A, optimize=True) + 0.1 for A, C in ((A1, C1), (A2, C2)))
    # ReLU
    q1, q2 = np.einsum("pii->pi", C1), np.einsum("pii->pi", C2)
    K, G = relu_from(K, np.sqrt(q1[:, None, :, None] * q2[None, :, None, :]))
    T = G * T
    C1, _ = relu_from(C1, np.sqrt(q1[:, :, None] * q1[:, None, :]))
    C2, _ = relu_from(C2, np.sqrt(q2[:, :, None] * q2[:, None, :]))
    # Dense(2, 0.1)
    K, C1, C2 = 2.0 * K + 0.1, 2.0 * C1 + 0.1, 2.0 * C2 + 0.1
    T = 2.0 * T + K
    # LayerNorm
    r1, r2 = (1.0 / np.sqrt(np.einsum("pii->pi", C) + 1e-12) for C in (C1, C2))
    rr = r1[:, None, :, None] * r2[None, :, None, :]
    K, T = K * rr, T * rr
    # GlobalAvgPool → Dense(1, 0)
    K_out = K.mean(axis=(2, 3))
    return K_out, T.mean(axis=(2, 3)) + K_out


CASES = {
    "cnn-gap": (lambda: cnn(L.GlobalAvgPool()), digits, lambda X: plain_kernel(X, (1, 1, 1)),
                "3 × [Conv 3×3 SAME, ReLU] → GlobalAvgPool → Dense, 8×8 digits"),
    "cnn-flatten": (lambda: cnn(L.Flatten()), digits, plain_cnn_flatten,
                    "3 × [Conv 3×3 SAME, ReLU] → Flatten → Dense, 8×8 digits"),
    "attn-ln-16": (attention_model, lambda P: tokens(P, 16), plain_attention,
                   "Dense → LayerNorm → Attention → ReLU → Dense → LayerNorm → GAP → Dense, 16 tokens"),
    "attn-ln-32": (attention_model, lambda P: tokens(P, 32), plain_attention,
                   "Dense → LayerNorm → Attention → ReLU → Dense → LayerNorm → GAP → Dense, 32 tokens"),
}
SIZES = {"cnn-gap": (100, 200), "cnn-flatten": (100, 400, 1000), "attn-ln-16": (100, 400, 1000),
         "attn-ln-32": (100, 200)}    # what fitted the shared machine's load (≈ 12 on 2 cores) on 2026-11-27


# ---------------------------------------------------------------------------------------------- measurement
def _rel(a, b, off):
    return float(np.max(np.abs(a - b)[off]) / np.max(np.abs(b)))


def measure(case, P, peer, tmp, repeat=REPEAT):
    """Ours, plain numpy and (when ``peer`` runs) neural-tangents on ``case`` at ``P``: one warm-up call each, then
    ``repeat`` rounds interleaved (benchmarks/README.md, "How each side is timed"); then the memory pass (ours and
    numpy under tracemalloc, untimed; neural-tangents' process max RSS). Returns (timings, results, peaks, nt info)."""
    build, inputs, plain, _ = CASES[case]
    m, X = build(), inputs(P)
    sides = {"ours": Local(lambda: limits.kernels.kernel(m, X)), "numpy": Local(lambda: plain(X))}
    key = f"{case}-{P}"
    if peer is not None:
        xpath = Path(tmp) / f"X_{key}.npy"
        np.save(xpath, X)
        peer.prepare(key, {"model": m.to_dict(), "X": str(xpath)})
        sides["nt"] = peer.side(key)
    res = interleaved(sides, repeat=repeat)
    peaks = {"ours": traced_peak(lambda: limits.kernels.kernel(m, X)), "numpy": traced_peak(lambda: plain(X))}
    nt = None
    if peer is not None:
        nt = {**res["nt"][0], "maxrss": peer.maxrss()}
        nt["nngp"], nt["ntk"] = peer.result(key)
    return res, peaks, nt


def _best(f, per, reps=20):
    """Best of ``reps`` (CPU s of 10 calls of ``f``) / (10 per)."""
    t = []
    for _ in range(reps):
        c = time.process_time()
        for _ in range(10):
            f()
        t.append((time.process_time() - c) / (10 * per))
    return min(t)


def floor(case, P, S=64, convs=3, reps=20):
    """Lower bound (CPU s) of ``case``'s NNGP + NTK at P (module docstring); each pass timed now over a 1 MiB block
    (in cache, as the packed chunks are), best of ``reps``."""
    n = 1 << 17
    a, b, o = np.random.default_rng(0).random(n), np.random.default_rng(1).random(n), np.empty(n)
    t_add, t_atan = _best(lambda: np.add(a, b, out=o), n, reps), _best(lambda: np.arctan(a, out=o), n, reps)
    pairs = P * (P + 1) / 2
    out = {"add_ns": t_add * 1e9, "atan_ns": t_atan * 1e9}
    if case.startswith("cnn-"):
        entries = pairs * (S * S if case == "cnn-gap" else S)
        return {**out, "floor_seconds": entries * convs * (16 * t_add + t_atan), "passes": convs * 16,
                "arctans": convs}
    T = int(case.rsplit("-", 1)[1])
    m = 4096 // (T * T) or 1
    A, B, C = (np.random.default_rng(k).random((m, T, T)) for k in (2, 3, 4))
    t_mm = _best(lambda: np.matmul(A, B, out=C), m, reps)
    return {**out, "floor_seconds": pairs * (T * T * t_atan + 4 * t_mm), "matmul_us": t_mm * 1e6,
            "arctans": 1, "matmuls": 4}


def packing(P=100, case="cnn-gap", repeat=REPEAT):
    """Goal 4: the symmetric kernel K(X, X) (packed: P(P+1)/2 pairs of inputs) against the cross kernel K(X, X')
    with X' a copy of X (P² pairs), interleaved; the ideal ratio is P² / (P(P+1)/2) = 2P/(P + 1)."""
    build, inputs = CASES[case][:2]
    m, X = build(), inputs(P)
    Y = X.copy()
    res = interleaved({"sym": Local(lambda: limits.kernels.kernel(m, X)),
                       "cross": Local(lambda: limits.kernels.kernel(m, X, Y))}, repeat=repeat)
    (ts, ks), (tc, kc) = res["sym"], res["cross"]
    ideal = 2.0 * P / (P + 1)
    got = tc["cpu"] / ts["cpu"]
    return {"name": f"composition packing {case} P={P}", "case": case, "P": P, "packing": True, "seconds": ts["cpu"],
            "cross_seconds": tc["cpu"], "cross_ratio": got, "ideal_ratio": ideal, "left": 1.0 - got / ideal,
            "max_rel_diff": max(float(np.max(np.abs(ks.nngp - kc.nngp)) / np.max(np.abs(kc.nngp))),
                                float(np.max(np.abs(ks.ntk - kc.ntk)) / np.max(np.abs(kc.ntk)))),
            "note": f"symmetric {ts['cpu']:.2f} s CPU, cross kernel with a copy {tc['cpu']:.2f} s: {got:.2f}× "
                    f"(ideal {ideal:.2f}×: {100 * (1.0 - got / ideal):.0f} % left)"}


def tracemalloc_cost(runs=(("cnn-gap", 100), ("attn-ln-16", 400), ("cnn-flatten", 400))):
    """What tracemalloc around a timed call costs: ours with and without it, interleaved, best of 5 (the rows of
    compositions.json before 2026-11-29 timed ours under tracemalloc and neural-tangents without)."""
    import tracemalloc

    out = []
    for case, P in runs:
        build, inputs = CASES[case][:2]
        m, X = build(), inputs(P)

        def traced():
            tracemalloc.start()
            try:
                return limits.kernels.kernel(m, X)
            finally:
                tracemalloc.stop()
        r = interleaved({"plain": Local(lambda: limits.kernels.kernel(m, X)), "traced": Local(traced)})
        out.append({"case": case, "P": P, "cpu": r["plain"][0]["cpu"], "traced_cpu": r["traced"][0]["cpu"],
                    "inflation": r["traced"][0]["cpu"] / r["plain"][0]["cpu"]})
    return out


def estimate_check(P=60):
    """``limits.kernels.composed.estimate``'s time is a lower bound: measured CPU / estimated seconds per
    composition (the four cases, the reference compositions of ``nt_layers.cases`` at P inputs, attention on 256
    tokens where matrix products dominate); every ratio must be ≥ 1 (else a composition could be refused that
    would have finished within the limit)."""
    from nt_layers import cases

    from limits.kernels.composed import estimate

    rng = np.random.default_rng(0)
    runs = [(c, CASES[c][0](), CASES[c][1](n)) for c, n in (("cnn-gap", P), ("cnn-flatten", 400), ("attn-ln-16", 300),
                                                             ("attn-ln-32", 150))]
    runs += [(n, m, rng.standard_normal((P,) + s[1:])) for n, m, s in cases()]
    runs.append(("attention on 256 tokens", limits.serial(L.Dense(1.0, 0.1), L.Attention(n_heads=1, qk_scale=0.5),
                                                          L.GlobalAvgPool(), L.Dense()), rng.standard_normal((20, 256, 3))))
    out = []
    for name, m, X in runs:
        e = estimate(m, X.shape[1:], X.shape[0], X.shape[0], True, True)
        t = cpu_wall(lambda: limits.kernels.kernel(m, X), repeat=2)[0]["cpu"]
        out.append({"name": name, "shape": list(X.shape), "cpu": t, "estimate": e["seconds"], "ratio": t / e["seconds"]})
    return sorted(out, key=lambda r: r["ratio"])


def run(quick=False, cases=None, Ps=None, repeat=REPEAT):
    """Rows per case and P. neural-tangents runs in one peer process per case (so that its max RSS is that case's),
    its calls interleaved with ours and numpy's (:func:`measure`)."""
    cases = list(cases or CASES)
    sizes = {c: tuple(Ps) if Ps else ((50,) if quick else SIZES[c]) for c in cases}
    rows = []
    for c in cases:
        peer, why = Peer.start(NT_SETUP, timeout=3 * 3600)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                for P in sizes[c]:
                    load = machine()
                    try:
                        res, peaks, nt = measure(c, P, peer, tmp, repeat)
                    except PeerError as exc:               # the peer failed at this size: ours without it
                        peer.close(kill=True)
                        peer, why = None, str(exc)
                        res, peaks, nt = measure(c, P, None, tmp, repeat)
                    rows.append(_row(c, P, res, peaks, nt, why, floor(c, P), load, machine()["load"]))
                    print(f"  {rows[-1]['note']}", flush=True)
        finally:
            if peer is not None:
                peer.close()
    return rows


def _row(case, P, res, peaks, nt, why, fl, before, after):
    (t, k), (tn, (Kn, Tn)) = res["ours"], res["numpy"]
    off = ~np.eye(P, dtype=bool)
    row = {"name": f"composition {case} P={P}", "case": case, "description": CASES[case][3], "P": P,
           "seconds": t["cpu"], "wall": t["wall"], "first_seconds": t["first_cpu"], "cpu_median": t["cpu_median"],
           "repeat": t["repeat"], "peak_bytes": peaks["ours"],
           "numpy_seconds": tn["cpu"], "numpy_wall": tn["wall"], "numpy_peak_bytes": peaks["numpy"],
           "numpy_median": tn["cpu_median"], "numpy_ratio": tn["cpu"] / t["cpu"], "numpy_wall_ratio": tn["wall"] / t["wall"],
           "numpy_max_rel_diff": max(_rel(k.nngp, Kn, off), _rel(k.ntk, Tn, off)),
           "machine": {**before, "load_after": after}, "timing": TIMING}
    if nt is not None:
        row.update(baseline_seconds=nt["cpu"], baseline_wall=nt["wall"], nt_first_seconds=nt["first_cpu"],
                   nt_median=nt["cpu_median"], nt_how=f"best of {nt['repeat']} calls after its first (jit)",
                   ratio=nt["cpu"] / t["cpu"], nt_wall_ratio=nt["wall"] / t["wall"], nt_maxrss=nt["maxrss"],
                   max_rel_diff=max(_rel(k.nngp, nt["nngp"], np.ones_like(off)), _rel(k.ntk, nt["ntk"], off)))
    else:
        row["nt_skipped"] = why
    if fl is not None:
        row.update(fl, floor_ratio=t["cpu"] / fl["floor_seconds"])
    row["note"] = note(row)
    return row


TIMING = ("CPU = time.process_time of the process running each side (one BLAS/XLA thread each); one warm-up call "
          f"per side, then {REPEAT} rounds of ours, plain numpy, neural-tangents interleaved; best of the {REPEAT}; "
          "memory in a separate untimed pass (tracemalloc) and NT's process max RSS")


def note(r):
    s = (f"ours {r['seconds']:.2f} s CPU ({r['wall']:.2f} s wall), peak {r['peak_bytes'] / 2**20:.0f} MiB; plain numpy "
         f"{r['numpy_seconds']:.2f} s = {r['numpy_ratio']:.2f}× (wall {r['numpy_wall_ratio']:.2f}×), peak "
         f"{r['numpy_peak_bytes'] / 2**20:.0f} MiB, max rel. diff {r['numpy_max_rel_diff']:.1e}")
    if "ratio" in r:
        s += (f"; neural-tangents steady {r['baseline_seconds']:.2f} s CPU ({r['nt_how']}; first call incl. jit "
              f"{r['nt_first_seconds']:.2f} s) = {r['ratio']:.2f}× (wall {r['nt_wall_ratio']:.2f}×), max RSS "
              f"{r['nt_maxrss'] / 2**20:.0f} MiB, max rel. diff {r['max_rel_diff']:.1e}")
    else:
        s += f"; neural-tangents: {r['nt_skipped']}"
    if "floor_seconds" in r:
        s += f"; floor {r['floor_seconds']:.2f} s (ours = {r['floor_ratio']:.1f}× the floor)"
    return s


def table(rows):
    out = ["| case | P | ours CPU s (wall) | peak MiB | numpy CPU s | numpy / ours (wall) | numpy peak MiB | "
           "NT steady CPU s | NT / ours (wall) | NT max RSS MiB | max rel. diff NT / numpy | floor s (ours / floor) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("packing"):
            continue
        nt = (f"{r['baseline_seconds']:.2f} | {r['ratio']:.2f} ({r['nt_wall_ratio']:.2f}) | {r['nt_maxrss'] / 2**20:.0f}"
              if "ratio" in r else "skipped | | ")
        fl = f"{r['floor_seconds']:.2f} ({r['floor_ratio']:.1f}×)" if "floor_seconds" in r else ""
        out.append(f"| {r['case']} | {r['P']} | {r['seconds']:.2f} ({r['wall']:.2f}) | {r['peak_bytes'] / 2**20:.0f} | "
                   f"{r['numpy_seconds']:.2f} | {r['numpy_ratio']:.2f} ({r['numpy_wall_ratio']:.2f}) | "
                   f"{r['numpy_peak_bytes'] / 2**20:.0f} | {nt} | {r.get('max_rel_diff', float('nan')):.1e} / "
                   f"{r['numpy_max_rel_diff']:.1e} | {fl} |")
    return "\n".join(out)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--case", nargs="*", default=None, choices=sorted(CASES))
    ap.add_argument("--P", type=int, nargs="*", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--merge", default=None, help="write the rows into this results JSON in place of the same rows")
    ap.add_argument("--packing", action="store_true", help="only goal 4's row: symmetric vs cross kernel")
    ap.add_argument("--estimate", action="store_true", help="only: measured CPU / the cost estimate's lower bound")
    ap.add_argument("--tracemalloc-cost", action="store_true",
                    help="only: ours timed with and without tracemalloc around the call (best of 5, interleaved)")
    a = ap.parse_args()
    if a.tracemalloc_cost:
        for r in tracemalloc_cost():
            print(f"{r['case']} P={r['P']}: {r['cpu']:.3f} s CPU, under tracemalloc {r['traced_cpu']:.3f} s "
                  f"({r['inflation']:.2f}×)")
        sys.exit(0)
    if a.estimate:
        rs = estimate_check()
        for r in rs:
            print(f"{r['ratio']:9.1f}×  {r['cpu']:7.3f} s CPU, estimate {r['estimate']:.2e} s  {r['name']} {r['shape']}")
        print(f"smallest measured / estimated: {rs[0]['ratio']:.1f}× (must be ≥ 1: the estimate is a lower bound)")
        sys.exit(0 if rs[0]["ratio"] >= 1 else 1)
    if a.packing:
        rs = [packing(P, c) for c in (a.case or ["cnn-gap"]) for P in (a.P or [100])]
        print("\n".join(r["note"] for r in rs))
    else:
        rs = run(a.quick, a.case, a.P)
        print(table(rs))
    if a.merge:
        print(f"wrote {merge(a.merge, rs, module='compositions')}")
