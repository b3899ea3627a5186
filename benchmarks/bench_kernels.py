"""Kernel benchmarks (docs/performance.rst; issue 16 items 1 and 4): NNGP + NTK Gram recursions.

Every row is measured in ONE run against

* a plain vectorised numpy recursion of the same closed forms (``benchmarks/_plain_kernels.py``: full
  P×P matrices, fresh temporaries — the obvious code, not a per-entry loop), and
* neural-tangents 0.6.5 (jax 0.4.30, float64, ``jax.jit(kernel_fn)``) when its optional interpreter
  exists (``LIMITS_NT_PYTHON``, default /work/venv-nt/bin/python; ``python benchmarks/make_peer_env.py``
  creates it) — run in a subprocess, never imported here; skipped cleanly otherwise.

Times: CPU (``time.process_time``, all threads) and wall (``perf_counter``), first call and steady state
(``_timing.interleaved``: one warm-up call per side, then 5 rounds of limits, numpy and NT interleaved, each call
timed by the CPU clock of the process that runs it; best of 5, median kept) — the first NT call includes its jit
compilation. One BLAS thread for us and the baseline (``limits.blas.blas_threads``), one XLA thread for NT (its own
interpreter, kept alive between calls: ``_timing.Peer``). Ratios are CPU(peer)/CPU(limits), steady state. Each row also checks that the three agree (max relative difference of K_out and Θ_out).

Cost laws: the fitted exponent of the limits CPU time in P (P = 250, 500, 1000 at fixed L) and in L
(L = 50, 100, 200 at fixed P) next to the theoretical O(L P²).

Workloads: residual erf P = 1000, L = 100 (seed 004 Fig. 2 parameters σ_w² = 1.2, σ_b² = 0.2, ρ = 1);
MLPs P = 1000, L = 10 for relu, erf, gelu (NT has all three in closed form); gelu at P = 1000, L = 100
with σ_b² = 1e6 (variances ~1e6 … 1e8); tanh (interpolation in the correlation, limits.gaussian.corrinterp; no closed
form, no NT counterpart) at P = 1000, L = 100 for σ_w² = 1.5 and 1e6, at P = 20, L = 10 for σ_w² = 1.5 … 1e6
(the cost against the variance), and against a plain per-entry Gauss–Hermite recursion. Cross kernels
kernel(m, X1, X2) (relu 2000×600 L=5, gelu 3000×600 L=3, residual erf 1500×600 L=20) against the plain numpy cross
recursion (plain_cross) and NT kernel_fn(x1, x2); nngp(X, model=m) with every layer kept (erf, relu P=500 L=50,
gelu P=3000 L=3) against the plain recursion that keeps every layer (plain_nngp_layers) and NT.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _plain_kernels import plain_cross, plain_nngp, plain_nngp_layers  # noqa: E402
from _timing import REPEAT, Local, Peer, cpu_wall, fit_exponent, interleaved, machine  # noqa: E402

NT_SETUP = r"""
import jax
jax.config.update("jax_enable_x64", True)
import neural_tangents as nt
from neural_tangents import stax
INFO = {"version": nt.__version__, "jax": jax.__version__}
def make(c):
    # neural-tangents' jitted kernel_fn of the case's MLP / ResNet on X (and X2), NNGP + NTK, results to the host
    with np.load(c["data"], allow_pickle=False) as data:
        X = data[c["X"]]
        X2 = data[c["X2"]] if c.get("X2") else None
    act = {"erf": stax.Erf, "relu": stax.Relu, "gelu": lambda: stax.Gelu(approximate=False)}[c["act"]]
    sw, sb, rho = c["sw"], c["sb"], c["rho"]
    layers = [stax.Dense(1, W_std=sw, b_std=sb)]
    for _ in range(c["depth"]):
        if c["residual"]:
            branch = stax.serial(act(), stax.Dense(1, W_std=rho * sw, b_std=rho * sb))
            layers += [stax.FanOut(2), stax.parallel(stax.Identity(), branch), stax.FanInSum()]
        else:
            layers += [act(), stax.Dense(1, W_std=sw, b_std=sb)]
    layers += [act(), stax.Dense(1, W_std=sw, b_std=sb)]
    kf = jax.jit(stax.serial(*layers)[2], static_argnames=("get",))
    def call():
        K, T = kf(X, X2, get=("nngp", "ntk"))
        return np.asarray(K.block_until_ready()), np.asarray(T.block_until_ready())
    return call
"""


def _inputs(P, d=20, seed=0):
    X = np.random.default_rng(seed).standard_normal((P, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * np.sqrt(d)


def _limits(X, c, keep="last"):
    from limits.kernels import nngp

    return nngp(X, depth=c["depth"], activation=c["act"], sigma_w2=c["sw2"], sigma_b2=c["sb2"],
                residual=c["residual"], rho=c["rho"], keep=keep, on_explode="ignore")


def _reldiff(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _timed(ours, numpy_fn, peer, c):
    """Ours, the plain numpy recursion and (when ``peer`` runs) neural-tangents on case ``c``, timed alike
    (``_timing.interleaved``: a warm-up call each — NT's jit compilation —, then 5 rounds interleaved, each call
    timed by its own process's CPU clock, best of 5). Returns (ours stats, result), (numpy stats, result), NT stats
    with its kernels ``K``, ``T`` (or None)."""
    sides = {"ours": Local(ours), "numpy": Local(numpy_fn)}
    if peer is not None:
        peer.prepare(c["name"], {"data": c["data"], "X": c["X"], "X2": c.get("X2"), "act": c["act"],
                                 "depth": c["depth"], "residual": c["residual"], "sw": float(np.sqrt(c["sw2"])),
                                 "sb": float(np.sqrt(c["sb2"])), "rho": float(c["rho"])})
        sides["nt"] = peer.side(c["name"])
    res = interleaved(sides)
    n = None
    if peer is not None:
        n = dict(res["nt"][0])
        n["K"], n["T"] = peer.result(c["name"])
    return res["ours"], res["numpy"], n


def _arguments(act, K, full=False):
    """The arguments of the one transcendental each packed entry of layer 1 needs, from the read-in Gram K:
    arcsin's s = 2k12/√((1+2k11)(1+2k22)) (erf), arctan's t = √((g − |k12|)/(g + |k12|)) (relu), arctan's
    k12/√det(I + K) (gelu) — upper triangle; ``full``: every entry of the block ``K`` = (K12, q1, q2)."""
    if full:
        K, q1, q2 = K
        k, a, b = K.ravel(), np.repeat(q1, q2.size), np.tile(q2, q1.size)
    else:
        q = np.diag(K)
        iu = np.triu_indices(K.shape[0])
        k, a, b = K[iu], q[iu[0]], q[iu[1]]
    if act == "erf":
        return np.arcsin, np.clip(2.0 * k / np.sqrt((1.0 + 2.0 * a) * (1.0 + 2.0 * b)), -1.0, 1.0)
    g = np.sqrt(a * b)
    ak = np.minimum(np.abs(k), g)
    if act == "relu":
        return np.arctan, np.sqrt((g - ak) / np.maximum(g + ak, 1e-300))
    return np.arctan, k / np.sqrt(1.0 + a + b + (g - ak) * (g + ak))


def _floor(c, K0, full=False):
    """CPU seconds of the one transcendental per packed entry the closed forms need — libm's arcsin (erf) or
    arctan (relu, gelu) at the first layer's arguments, once for each of the L layers and the read-out, in
    cache-sized segments: no implementation that evaluates the closed forms on the upper triangle can be
    faster. ``full``: every entry of a (cross) block K0, not only an upper triangle."""
    f, args = _arguments(c["act"], K0, full)
    out = np.empty(16384)

    def run():
        for _ in range(c["depth"] + 1):
            for lo in range(0, args.size, out.size):
                seg = args[lo:lo + out.size]
                f(seg, out=out[:seg.size])
    return cpu_wall(run, repeat=3)[0]["cpu"]


def _row(c, X, peer, why, quick):
    K0 = _limits(X, {**c, "depth": 1}).K[0]
    (tl, r), (tp, p), n = _timed(lambda: _limits(X, c),
                                 lambda: plain_nngp(K0, c["depth"], c["act"], c["sw2"], c["sb2"], c["residual"],
                                                    c["rho"]), peer, c)
    agree = max(_reldiff(r.K_out, p[2]), _reldiff(r.Theta_out, p[3]))
    row = {"name": c["name"], "seconds": tl["wall"], "cpu_seconds": tl["cpu"],
           "first_cpu": tl["first_cpu"], "first_wall": tl["first_wall"],
           "baseline_seconds": tp["wall"], "baseline_cpu_seconds": tp["cpu"],
           "ratio": tp["cpu"] / tl["cpu"], "target": ">= 2x numpy, >= 4x NT (CPU, steady)",
           "nt_cpu": None, "nt_wall": None, "nt_first_cpu": None, "nt_first_wall": None, "nt_ratio": None,
           "agree_numpy": agree, "agree_nt": None, "nt_version": None, "floor_cpu": _floor(c, K0)}
    note = (f"limits CPU {tl['cpu']:.3f} s (first {tl['first_cpu']:.3f}), wall {tl['wall']:.3f} s "
            f"(transcendental floor {row['floor_cpu']:.3f} s); "
            f"numpy CPU {tp['cpu']:.3f} s, wall {tp['wall']:.3f} s; max rel. diff vs numpy {agree:.1e}")
    note += _nt_note(row, n, peer, why, r.K_out, r.Theta_out, tl)
    row["note"] = note + (" (quick sizes)" if quick else "")
    return row


def _nt_note(row, n, peer, why, K, T, tl):
    """Fill the timing and NT columns of a row from the peer's stats ``n`` (agreement against our K_out, Θ_out)."""
    row.update(cpu_median=tl["cpu_median"], repeat=tl["repeat"], machine=machine(), timing=TIMING)
    if n is None:
        return f"; {why}"
    nt_info = peer.info
    row.update(nt_median=n["cpu_median"])
    row.update(nt_cpu=n["cpu"], nt_wall=n["wall"], nt_first_cpu=n["first_cpu"], nt_first_wall=n["first_wall"],
               nt_ratio=n["cpu"] / tl["cpu"])
    d_nt = max(_reldiff(n["K"], K), _reldiff(n["T"], T))
    row.update(agree_nt=d_nt, nt_version=f"neural-tangents {nt_info['version']} (jax {nt_info['jax']})")
    return (f"; NT {nt_info['version']}/jax {nt_info['jax']} steady CPU {n['cpu']:.3f} s wall {n['wall']:.3f} s, "
            f"first call (jit compile) CPU {n['first_cpu']:.2f} s wall {n['first_wall']:.2f} s; "
            f"max rel. diff vs NT {d_nt:.1e}")


def _model(c):
    import limits

    build = limits.resnet if c["residual"] else limits.mlp
    return build(20, c["depth"], activation=c["act"], sigma_w2=c["sw2"], sigma_b2=c["sb2"],
                 **({"rho": c["rho"]} if c["residual"] else {}))


def _cross_row(c, X1, X2, peer, why, quick):
    """``limits.kernels.kernel(m, X1, X2)`` (P1×P2 block, NNGP + NTK read-out) against the plain numpy cross
    recursion (benchmarks/_plain_kernels.py ``plain_cross``) and NT's ``kernel_fn(x1, x2)``."""
    from limits.kernels import kernel

    m = _model(c)
    (tl, r), (tp, p), n = _timed(lambda: kernel(m, X1, X2),
                                 lambda: plain_cross(X1, X2, c["depth"], c["act"], c["sw2"], c["sb2"], c["residual"],
                                                     c["rho"]), peer, c)
    agree = max(_reldiff(r.nngp, p[0]), _reldiff(r.ntk, p[1]))
    d = X1.shape[1]
    K0 = (c["sw2"] * (X1 @ X2.T) / d + c["sb2"], c["sw2"] * np.sum(X1 * X1, 1) / d + c["sb2"],
          c["sw2"] * np.sum(X2 * X2, 1) / d + c["sb2"])
    row = {"name": c["name"], "seconds": tl["wall"], "cpu_seconds": tl["cpu"],
           "first_cpu": tl["first_cpu"], "first_wall": tl["first_wall"],
           "baseline_seconds": tp["wall"], "baseline_cpu_seconds": tp["cpu"],
           "ratio": tp["cpu"] / tl["cpu"], "target": ">= 2x numpy, >= 2x NT (CPU, steady)",
           "nt_cpu": None, "nt_wall": None, "nt_first_cpu": None, "nt_first_wall": None, "nt_ratio": None,
           "agree_numpy": agree, "agree_nt": None, "nt_version": None, "floor_cpu": _floor(c, K0, full=True)}
    note = (f"limits CPU {tl['cpu']:.3f} s (first {tl['first_cpu']:.3f}), wall {tl['wall']:.3f} s "
            f"(transcendental floor {row['floor_cpu']:.3f} s: one arcsin/arctan per entry and layer); "
            f"numpy CPU {tp['cpu']:.3f} s, wall {tp['wall']:.3f} s; max rel. diff vs numpy {agree:.1e}")
    note += _nt_note(row, n, peer, why, r.nngp, r.ntk, tl)
    row["note"] = note + (" (quick sizes)" if quick else "")
    return row


def _keep_row(c, X, peer, why, quick):
    """``limits.kernels.nngp(X, model=m)`` (default keep: every layer kept) against the plain numpy recursion
    that keeps every layer (``plain_nngp_layers``: the fresh arrays of each layer, no copies) and NT's read-out
    kernel (which keeps no layer)."""
    from limits.kernels import nngp

    m = _model(c)
    K0 = _limits(X, {**c, "depth": 1}).K[0]
    (tl, r), (tp, p), n = _timed(lambda: nngp(X, model=m),
                                 lambda: plain_nngp_layers(K0, c["depth"], c["act"], c["sw2"], c["sb2"],
                                                           c["residual"], c["rho"]), peer, c)
    agree = max(_reldiff(r.K_out, p[3]), _reldiff(r.Theta_out, p[4]), _reldiff(r.K[c["depth"] // 2], p[0][c["depth"] // 2]))
    row = {"name": c["name"], "seconds": tl["wall"], "cpu_seconds": tl["cpu"],
           "first_cpu": tl["first_cpu"], "first_wall": tl["first_wall"],
           "baseline_seconds": tp["wall"], "baseline_cpu_seconds": tp["cpu"],
           "ratio": tp["cpu"] / tl["cpu"], "target": ">= 2x numpy, >= 2x NT (CPU, steady)",
           "nt_cpu": None, "nt_wall": None, "nt_first_cpu": None, "nt_first_wall": None, "nt_ratio": None,
           "agree_numpy": agree, "agree_nt": None, "nt_version": None, "floor_cpu": _floor(c, K0),
           "stored": type(r.K).__name__}
    note = (f"limits CPU {tl['cpu']:.3f} s (first {tl['first_cpu']:.3f}), wall {tl['wall']:.3f} s "
            f"(transcendental floor {row['floor_cpu']:.3f} s), layers as {row['stored']}; "
            f"numpy (all layers kept) CPU {tp['cpu']:.3f} s, wall {tp['wall']:.3f} s; max rel. diff vs numpy {agree:.1e}")
    note += _nt_note(row, n, peer, why, r.K_out, r.Theta_out, tl)
    row["note"] = note + (" (quick sizes)" if quick else "")
    return row


def cross_cases(quick):
    """Cross kernels between two input sets (issue 27): relu 2000×600 L=5, gelu 3000×600 L=3, residual erf
    1500×600 L=20 (σ as the joint rows)."""
    s = 4 if quick else 1
    out = [{"name": f"cross relu MLP NNGP+NTK, {2000 // s}×{600 // s}, L=5", "act": "relu", "depth": 5, "sw2": 2.0,
            "sb2": 0.05, "residual": False, "rho": 1.0, "P": 2000 // s, "P2": 600 // s},
           {"name": f"cross gelu MLP NNGP+NTK, {3000 // s}×{600 // s}, L=3", "act": "gelu", "depth": 3, "sw2": 2.0,
            "sb2": 0.05, "residual": False, "rho": 1.0, "P": 3000 // s, "P2": 600 // s},
           {"name": f"cross residual erf NNGP+NTK, {1500 // s}×{600 // s}, L=20", "act": "erf", "depth": 20,
            "sw2": 1.2, "sb2": 0.2, "residual": True, "rho": 1.0, "P": 1500 // s, "P2": 600 // s}]
    for c in out:
        c["X"], c["X2"] = f"A{c['P']}", f"B{c['P2']}"
    return out


def keep_cases(quick):
    """``nngp(X, model=m)`` with its default keep (every layer): erf and relu MLPs P=500, L=50; gelu P=3000, L=3."""
    P, L, Pg = (200, 20, 800) if quick else (500, 50, 3000)
    out = [{"name": f"all layers kept: erf MLP NNGP+NTK, P={P}, L={L}", "act": "erf", "depth": L, "sw2": 1.5, "sb2": 0.05,
            "residual": False, "rho": 1.0, "P": P},
           {"name": f"all layers kept: relu MLP NNGP+NTK, P={P}, L={L}", "act": "relu", "depth": L, "sw2": 2.0,
            "sb2": 0.05, "residual": False, "rho": 1.0, "P": P},
           {"name": f"all layers kept: gelu MLP NNGP+NTK, P={Pg}, L=3", "act": "gelu", "depth": 3, "sw2": 2.0,
            "sb2": 0.05, "residual": False, "rho": 1.0, "P": Pg}]
    for c in out:
        c["X"] = f"X{c['P']}"
    return out


def _scaling(quick):
    """Fitted CPU-time exponents of limits (residual erf NNGP + NTK) in P and in L."""
    base = {"act": "erf", "sw2": 1.2, "sb2": 0.2, "residual": True, "rho": 1.0}
    Ps = (125, 250, 500) if quick else (250, 500, 1000)
    Ls = (10, 20, 40) if quick else (50, 100, 200)
    L0, P0 = Ls[1], Ps[1]
    tP = [cpu_wall(lambda: _limits(_inputs(P), {**base, "depth": L0}))[0]["cpu"] for P in Ps]
    tL = [cpu_wall(lambda: _limits(_inputs(P0), {**base, "depth": L}))[0]["cpu"] for L in Ls]
    aP, aL = fit_exponent(Ps, tP), fit_exponent(Ls, tL)
    return [{"name": f"cost exponent in P, residual erf, P={Ps[0]}..{Ps[-1]}, L={L0}", "seconds": tP[-1],
             "cpu_seconds": tP[-1], "baseline_seconds": None, "ratio": None, "exponent": aP,
             "target": "theory 2 (O(L P²))",
             "note": f"fitted {aP:.2f}; CPU {', '.join(f'{t:.3f}' for t in tP)} s"},
            {"name": f"cost exponent in L, residual erf, L={Ls[0]}..{Ls[-1]}, P={P0}", "seconds": tL[-1],
             "cpu_seconds": tL[-1], "baseline_seconds": None, "ratio": None, "exponent": aL,
             "target": "theory 1 (O(L P²))",
             "note": f"fitted {aL:.2f}; CPU {', '.join(f'{t:.3f}' for t in tL)} s"}]


def _large_variance(quick):
    """gelu (closed form) at P = 1000, L = 100 with variances ~1e6; tanh (no closed form: interpolation in the
    correlation, limits.gaussian.corrinterp) at P = 1000, L = 100 at σ_w² = 1.5 and 1e6, and its cost against the
    variance at P = 20 (below P = 64 the general path: Mehler series / quadrature)."""
    rows = []
    P, L = (200, 20) if quick else (1000, 100)
    X = _inputs(P)
    runs = [("gelu", P, L, 2.0, 0.05), ("gelu", P, L, 2.0, 1e6), ("tanh", P, L, 1.5, 0.05), ("tanh", P, L, 1e6, 0.05)]
    runs += [("tanh", 20, 10, sw2, 0.05) for sw2 in (1.5, 1e2, 1e4, 1e6)]
    for act, p, depth, sw2, sb2 in runs:
        c = {"act": act, "depth": depth, "sw2": sw2, "sb2": sb2, "residual": False, "rho": 1.0}
        t, r = cpu_wall(lambda: _limits(X[:p], c), repeat=1)
        q = float(np.max(np.diag(r.K[-1])))
        rows.append({"name": f"{act} MLP NNGP+NTK, P={p}, L={depth}, σ_w²={sw2:g}, σ_b²={sb2:g}", "seconds": t["wall"],
                     "cpu_seconds": t["cpu"], "baseline_seconds": None, "ratio": None,
                     "target": "< 10 s at any variance (P=1000, L=100)",
                     "note": f"CPU {t['cpu']:.2f} s, wall {t['wall']:.2f} s; largest variance K_αα = {q:.3g}"})
    rows.append(_tanh_vs_plain_gh(quick))
    return rows


def _tanh_vs_plain_gh(quick):
    """tanh against the simple alternative: per-entry n×n tensor Gauss–Hermite moments in a plain numpy
    recursion (benchmarks/_plain_kernels.py ``plain_gh_nngp``; n = 192 agrees to ~2e-10 at σ_w² = 1.5 (P = 50, L = 20): its
    error falls only like the poles of tanh allow). Measured at a small size, the ratio extrapolated by the
    cost law of both, O(L P²)."""
    from _plain_kernels import plain_gh_nngp

    p, depth, n = (20, 10, 128) if quick else (50, 20, 192)
    X = _inputs(p)
    c = {"act": "tanh", "depth": depth, "sw2": 1.5, "sb2": 0.05, "residual": False, "rho": 1.0}
    tl, r = cpu_wall(lambda: _limits(X, c), repeat=1)
    tg, g = cpu_wall(lambda: plain_gh_nngp(r.K[0], depth, "tanh", 1.5, 0.05, n), repeat=1)
    err = max(_reldiff(g[2], r.K_out), _reldiff(g[3], r.Theta_out))
    return {"name": f"tanh MLP NNGP+NTK vs plain Gauss–Hermite (n={n}), P={p}, L={depth}, σ_w²=1.5",
            "seconds": tl["wall"], "cpu_seconds": tl["cpu"], "baseline_seconds": tg["wall"], "ratio": tg["cpu"] / tl["cpu"],
            "target": "ratio at P=1000, L=100 from the P=1000 row and O(L P²) for the baseline",
            "note": f"limits CPU {tl['cpu']:.2f} s, plain GH CPU {tg['cpu']:.2f} s "
                    f"({tg['cpu'] / ((p * (p + 1) / 2) * (depth + 1)) * 1e3:.3f} ms per entry and layer); "
                    f"max rel. diff {err:.1e}"}


def cases(quick):
    P = 300 if quick else 1000
    Lr, Lm = (30, 5) if quick else (100, 10)
    out = [{"name": f"residual erf NNGP+NTK, P={P}, L={Lr}", "act": "erf", "depth": Lr, "sw2": 1.2, "sb2": 0.2,
            "residual": True, "rho": 1.0, "P": P}]
    for act, sw2 in (("relu", 2.0), ("erf", 1.5), ("gelu", 2.0)):
        out.append({"name": f"{act} MLP NNGP+NTK, P={P}, L={Lm}", "act": act, "depth": Lm, "sw2": sw2,
                    "sb2": 0.05, "residual": False, "rho": 1.0, "P": P})
    for c in out:
        c["X"] = f"X{c['P']}"
    return out


def run(quick: bool = False) -> list[dict]:
    from limits.blas import blas_threads

    cs, xc, kc = cases(quick), cross_cases(quick), keep_cases(quick)
    Xs = {c["X"]: _inputs(c["P"]) for c in cs + kc}
    Xs.update({c["X"]: _inputs(c["P"], seed=1) for c in xc})
    Xs.update({c["X2"]: _inputs(c["P2"], seed=2) for c in xc})
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "x.npz"
        np.savez(data, **Xs)
        for c in cs + xc + kc:
            c["data"] = str(data)
        peer, why = Peer.start(NT_SETUP)
        why = why.replace("peer skipped", "neural-tangents skipped")
        try:
            with blas_threads(1):
                for c in cs:
                    rows.append(_row(c, Xs[c["X"]], peer, why, quick))
                for c in xc:
                    rows.append(_cross_row(c, Xs[c["X"]], Xs[c["X2"]], peer, why, quick))
                for c in kc:
                    rows.append(_keep_row(c, Xs[c["X"]], peer, why, quick))
        finally:
            if peer is not None:
                peer.close()
    with blas_threads(1):
        rows += _scaling(quick)
        rows += _large_variance(quick)
    return rows


TIMING = ("CPU = time.process_time of the process running each side (one BLAS/XLA thread each); one warm-up call "
          f"per side (neural-tangents: its jit compilation), then {REPEAT} rounds of limits, plain numpy, "
          f"neural-tangents interleaved; best of the {REPEAT}")


def table(rows) -> str:
    """The ratio table: CPU seconds (steady state; first call in brackets), the transcendental floor
    (:func:`_floor`) and ratios."""
    def f(v, fmt="{:.3f}"):
        return "—" if v is None else fmt.format(v)

    head = (f"{'workload':58s} {'limits CPU':>16s} {'floor':>6s} {'numpy CPU':>10s} {'×numpy':>7s} "
            f"{'NT CPU (first)':>18s} {'×NT':>6s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if "baseline_cpu_seconds" not in r:
            extra = f"exponent {r['exponent']:.2f} ({r['target']})" if "exponent" in r else \
                f"{r['cpu_seconds']:.2f} s CPU ({r['target']})"
            lines.append(f"{r['name'][:58]:58s} {extra}")
            continue
        lim = f"{r['cpu_seconds']:.3f} ({r['first_cpu']:.2f})"
        nt = "—" if r["nt_cpu"] is None else f"{r['nt_cpu']:.3f} ({r['nt_first_cpu']:.1f})"
        lines.append(f"{r['name'][:58]:58s} {lim:>16s} {f(r.get('floor_cpu')):>6s} {f(r['baseline_cpu_seconds']):>10s} "
                     f"{f(r['ratio'], '{:.2f}'):>7s} {nt:>18s} {f(r['nt_ratio'], '{:.2f}'):>6s}")
    return "\n".join(lines)


if __name__ == "__main__":
    rows = run("--quick" in sys.argv)
    for r in rows:
        print(json.dumps({k: v for k, v in r.items()}, default=str))
    print(table(rows))
