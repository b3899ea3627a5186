"""Benchmarks for limits.pc (docs/performance.rst):

* linear PC equilibrium (F*, z*, S), N = 1024, L = 64, batch 64: target < 1 s;
* the same at N = 256, H = 64 against the dense-Hessian route (assemble H_z, dense Cholesky
  solve): target ratio ≥ 100×;
* κ(H_z) at N = H = 512 (SP, μPC, 1-skip): target < 5 min and < 8 GB, against dense eigvalsh
  at a size the dense route can still handle.

* the equilibrated energy alone (issue 16), side by side in one run, CPU and wall time, best of N:
  ``limits.pc.equilibrium_energy`` (O(L N² d_out)), the full ``limits.pc.equilibrium``, a plain numpy
  implementation of the telescoped formula (seed 001 Eq. 31) written here, and — in a subprocess of
  the optional interpreter ``$LIMITS_JPC_PYTHON`` (default /work/venv-jpc2/bin/python; one core, so
  one XLA thread) — jpc's own ``linear_equilib_energy`` under ``eqx.filter_jit`` (first call =
  tracing + compilation, then steady state), asserted equal to ours to 1e-10 relative in float64, and
  a JAX-jit transcription of jpc's formula (the labelled stand-in when jpc does not import there);
  skipped cleanly without that interpreter. jpc is not on the package index: benchmarks/README.md.

``run(quick=True)`` uses smaller sizes (N = 256, L = 16; dense route at N = 128, H = 32; κ at 128).
``--only-kappa-mupc`` runs κ for μPC 1-skip at N = H = 512 with its accuracy checks;
``python benchmarks/bench_pc.py --energy`` runs only the energy comparison (N = 256, L = 65 and
N = 1024, L = 64, B = 64).
"""
from __future__ import annotations

import resource
import time

import os
import sys
import tempfile

import numpy as np

import _timing
from _timing import timed
import scipy.linalg as sla


def cpu_wall(fn, repeat=5):
    """(best CPU seconds, best wall seconds, result) over ``repeat`` calls (CPU = process time)."""
    res, out = _timing.cpu_wall(fn, repeat)
    return res["cpu"], res["wall"], out


def plain_numpy_energy(W, X, Y):
    """The telescoped formula written plainly (SP, a_l = 1): W_{L:1}, S = I + Σ_l W_{L:l}W_{L:l}ᵀ,
    F* = mean ½ rᵀ S⁻¹ r with r = y − W_{L:1} x."""
    d_out = W[-1].shape[0]
    P = np.eye(d_out)
    S = np.eye(d_out)
    for w in W[:0:-1]:
        P = P @ w
        S = S + P @ P.T
    P = P @ W[0]
    R = Y - X @ P.T
    return 0.5 * float(np.mean(np.sum(R * np.linalg.solve(S, R.T).T, axis=1)))


# Runs in the optional jpc interpreter ($LIMITS_JPC_PYTHON) with PEER_ENV (one XLA/BLAS thread).
# Conventions (jpc/_core/_analytical.py): jpc.make_mlp(..., act_fn="linear", use_bias=False) is a list of
# L eqx.nn.Sequential([Lambda(identity), Linear]) whose Linear.weight is (out, in) — the same (N_l, N_{l-1})
# layout as limits' weights[l], so W[l] goes into layer l unchanged; x: (B, d_in), y: (B, d_out) as ours;
# param_type "sp" has all layer scalings 1 (= our multipliers a_l = 1), output precision 1 (S = I + Σ …),
# and the result is the batch mean of ½ rᵀS⁻¹r, as limits.pc.equilibrium_energy.
JPC_SETUP = r"""
import os
# one core for the whole process (before jax starts its thread pools): with the thunk runtime of jax >= 0.4.36
# XLA runs independent ops concurrently on its pool even with --xla_cpu_multi_thread_eigen=false (PEER_ENV);
# the pools are sized from the affinity mask, so this is one XLA thread as for the NT peer and for us.
os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
INFO = {"jax": jax.__version__}
try:
    import equinox as eqx
    import jpc
    INFO["jpc_version"] = jpc.__version__
except Exception as exc:
    INFO["jpc_error"] = "%s: %s" % (type(exc).__name__, exc)
def make(spec):
    # spec["what"]: "jpc" (jpc.linear_equilib_energy under eqx.filter_jit on a jpc.make_mlp network holding our
    # weights) or "transcription" (a JAX-jit transcription of its formula); returns the energy as an array
    with np.load(spec["data"], allow_pickle=False) as d:
        L = int(d["L"]); W = [d[f"W{i}"] for i in range(L)]
        X, Y = jnp.asarray(d["X"]), jnp.asarray(d["Y"])
    if spec["what"] == "jpc":
        N, d_in, d_out = W[0].shape[0], W[0].shape[1], W[-1].shape[0]
        model = jpc.make_mlp(jax.random.PRNGKey(0), d_in, N, L, d_out, "linear", use_bias=False, param_type="sp")
        model = eqx.tree_at(lambda m: [seq.layers[1].weight for seq in m], model, [jnp.asarray(w) for w in W])
        for seq, w in zip(model, W):
            lin = seq.layers[1]
            assert lin.bias is None and lin.weight.dtype == jnp.float64 and np.array_equal(np.asarray(lin.weight), w)
        f = eqx.filter_jit(lambda model, x, y: jpc.linear_equilib_energy((model, None), x, y, param_type="sp"))
        return lambda: (np.asarray(f(model, X, Y).block_until_ready()),)
    Wj = [jnp.asarray(w) for w in W]
    def single(Ws, x, y):
        P = jnp.eye(Ws[-1].shape[0])
        for i in range(L - 1, -1, -1):
            P = P @ Ws[i]
        S = jnp.eye(Ws[-1].shape[0]); C = jnp.eye(Ws[-1].shape[0])
        for i in range(L - 1, 0, -1):
            C = C @ Ws[i]
            S = S + C @ C.T
        r = y - P @ x
        return r @ jnp.linalg.inv(S) @ r
    g = jax.jit(lambda Ws, X, Y: 0.5 * jnp.mean(jax.vmap(single, in_axes=(None, 0, 0))(Ws, X, Y)))
    return lambda: (np.asarray(g(Wj, X, Y).block_until_ready()),)
"""


def jpc_python():
    return os.environ.get("LIMITS_JPC_PYTHON", "/work/venv-jpc2/bin/python")


def _fmt(label, r, ref, new_c):
    first = (f"first call CPU {r['first_cpu'] * 1e3:.1f} ms, wall {r['first_wall'] * 1e3:.1f} ms; "
             if "first_cpu" in r else "")
    return (f"{label}: {first}CPU {r['cpu'] * 1e3:.2f} ms, wall {r['wall'] * 1e3:.2f} ms, ratio CPU/ours "
            f"{r['cpu'] / new_c:.2f}, rel. diff of F* vs limits.pc.equilibrium {abs(r['energy'] - ref) / ref:.1e}")


def bench_energy(N, L, B=64, d_out=10, d_in=32, repeat=None, rtol=1e-10):
    """Equilibrated energy only: ``limits.pc.equilibrium_energy`` vs the full equilibrium vs plain numpy vs
    jpc's ``linear_equilib_energy`` (real jpc, when it imports in $LIMITS_JPC_PYTHON) vs a JAX-jit
    transcription of jpc's formula. jpc must agree with ours to ``rtol`` (AssertionError otherwise)."""
    from limits import pc
    from limits.blas import blas_threads

    repeat = repeat or (15 if N <= 256 else 7)
    W, a = _net(N, L - 1, d_in, d_out, 0)
    assert np.all(a == 1.0)  # SP: jpc's "sp" scalings are all 1
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((B, d_in)), rng.standard_normal((B, d_out))
    rows = {}

    def row(fn):
        res, out = _timing.cpu_wall(fn, repeat)
        return {**res, "energy": out}

    # ours, the plain numpy formula, jpc and the transcription timed alike (_timing.interleaved: a warm-up call each —
    # jpc's tracing and compilation —, then `repeat` rounds interleaved, each call timed by its own process's clock)
    peer, why = _timing.Peer.start(JPC_SETUP, python=jpc_python(), timeout=1800)
    jx = None
    sides = {"ours": _timing.Local(lambda: pc.equilibrium_energy(W, X, Y, a)),
             "numpy": _timing.Local(lambda: plain_numpy_energy(W, X, Y))}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "net.npz")
        np.savez(path, L=len(W), X=X, Y=Y, **{f"W{i}": w for i, w in enumerate(W)})
        try:
            if peer is not None:
                jx = dict(peer.info)
                for what in (("jpc", "transcription") if "jpc_version" in jx else ("transcription",)):
                    peer.prepare(what, {"data": path, "what": what})
                    sides[what] = peer.side(what)
            with blas_threads(1):
                res = _timing.interleaved(sides, repeat=repeat)
            if peer is not None:
                for what in ("jpc", "transcription"):
                    if what in res:
                        jx[what] = {**res[what][0], "energy": float(peer.result(what)[0])}
        finally:
            if peer is not None:
                peer.close()
    if peer is None:
        why = why.replace("peer skipped", "skipped")
    (r_new, e_new), (r_np, e_np) = res["ours"], res["numpy"]
    rows["limits.pc.equilibrium_energy (1 BLAS thread)"] = {**r_new, "energy": e_new}
    rows["limits.pc.equilibrium (full, 1 BLAS thread)"] = row(lambda: pc.equilibrium(W, X, Y, a).energy)
    rows["plain numpy telescoped (1 BLAS thread)"] = {**r_np, "energy": e_np}
    rows["plain numpy telescoped (default threads)"] = row(lambda: plain_numpy_energy(W, X, Y))
    ours = rows["limits.pc.equilibrium_energy (1 BLAS thread)"]
    ref = rows["limits.pc.equilibrium (full, 1 BLAS thread)"]["energy"]
    new_c = ours["cpu"]
    lines = [_fmt(k, r, ref, new_c) for k, r in rows.items()]
    jpc_row = None
    if jx is None:
        lines.append(f"jpc / JAX: {why}")
    else:
        if "jpc" in jx:
            jpc_row = jx["jpc"]
            rel = abs(jpc_row["energy"] - ours["energy"]) / abs(ours["energy"])
            assert rel <= rtol, (f"jpc's linear_equilib_energy = {jpc_row['energy']!r} and "
                                 f"limits.pc.equilibrium_energy = {ours['energy']!r} differ by {rel:.1e} > {rtol:g}")
            lines.append(_fmt(f"jpc {jx['jpc_version']} linear_equilib_energy (eqx.filter_jit, jax {jx['jax']}, "
                              "1 XLA thread)", jpc_row, ref, new_c)
                         + f"; rel. diff vs limits.pc.equilibrium_energy {rel:.1e} (asserted ≤ {rtol:g})")
        else:
            lines.append(f"jpc: not importable in {jpc_python()} ({jx['jpc_error']}); the transcription below "
                         "stands in for it")
        lines.append(_fmt(f"JAX-jit transcription of jpc's formula (jax {jx['jax']}, 1 XLA thread)",
                          jx["transcription"], ref, new_c))
    peer = jpc_row or (jx or {}).get("transcription")
    summary = (f"CPU ms, best of {repeat}: ours {new_c * 1e3:.2f}; "
               + (f"jpc {jpc_row['cpu'] * 1e3:.2f} ({jpc_row['cpu'] / new_c:.2f}× ours); " if jpc_row else "jpc n/a; ")
               + f"numpy {rows['plain numpy telescoped (1 BLAS thread)']['cpu'] * 1e3:.2f} "
                 f"({rows['plain numpy telescoped (1 BLAS thread)']['cpu'] / new_c:.2f}×); "
               + (f"transcription {jx['transcription']['cpu'] * 1e3:.2f} ({jx['transcription']['cpu'] / new_c:.2f}×)"
                  if jx else "transcription n/a"))
    lines.insert(0, summary)
    return {"name": f"pc equilibrated energy N={N} L={L} B={B} d_out={d_out} d_in={d_in}", "seconds": ours["wall"],
            "cpu_seconds": new_c, "cpu_median": ours["cpu_median"], "repeat": repeat, "machine": _timing.machine(),
            "timing": "CPU = time.process_time of the process running each side (one BLAS/XLA thread each); one "
                      f"warm-up call per side, then {repeat} rounds of ours, numpy, jpc, transcription interleaved; best",
            "baseline_seconds": peer["wall"] if peer else rows["limits.pc.equilibrium (full, 1 BLAS thread)"]["wall"],
            "ratio": (peer["cpu"] if peer else rows["limits.pc.equilibrium (full, 1 BLAS thread)"]["cpu"]) / new_c,
            "target": "faster than jpc (CPU)",
            "note": f"best of {repeat}, interleaved; load average {os.getloadavg()}; " + " | ".join(lines), "lines": lines}


def _net(N, H, d_in, d_out, seed):
    from limits import pc

    return pc.init_weights(N, H, "sp", d_in=d_in, d_out=d_out, seed=seed)


def bench_equilibrium(N, L, B, d_out=10, d_in=32):
    from limits import pc

    W, a = _net(N, L - 1, d_in, d_out, 0)
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((B, d_in)), rng.standard_normal((B, d_out))
    c0 = time.process_time()
    t, e = timed(lambda: pc.equilibrium(W, X, Y, a), repeat=2)
    cpu = (time.process_time() - c0) / 2
    return {"name": f"pc equilibrium N={N} L={L} B={B} d_out={d_out}", "seconds": t, "baseline_seconds": None,
            "ratio": None, "target": "< 1 s",
            "note": f"F* = {e.energy:.6g}; CPU {cpu:.2f} s per call (1 BLAS thread); cost O(L N² (B + d_out))"}


def bench_vs_dense(N, H, B=16, d_out=10, d_in=32):
    from limits import pc

    W, a = _net(N, H, d_in, d_out, 2)
    rng = np.random.default_rng(3)
    X, Y = rng.standard_normal((B, d_in)), rng.standard_normal((B, d_out))
    t_fast, e = timed(lambda: pc.equilibrium(W, X, Y, a), repeat=3)

    def dense():
        net = pc.make_net(W, a)
        lay = pc.layout(net)
        Hd = pc.activity_hessian(W, a).toarray()
        b = pc.rhs(net, lay, X, Y)
        return sla.cho_solve(sla.cho_factor(Hd, lower=True, overwrite_a=True, check_finite=False), b)

    t_dense, zd = timed(dense)
    zf = np.concatenate([z.T for z in e.z])
    err = float(np.max(np.abs(zf - zd)) / np.max(np.abs(zd)))
    return {"name": f"pc equilibrium vs dense H_z solve, N={N} H={H} B={B}", "seconds": t_fast,
            "baseline_seconds": t_dense, "ratio": t_dense / t_fast, "target": "ratio >= 100",
            "note": f"dense n = {N * H}; max rel. difference of z* = {err:.1e}"}


def bench_kappa(N, H, param="sp", skips=None, dense_N=None, dense_H=None, old_N=None, tol=1e-8):
    """κ(H_z): Lanczos for λ_max, Lanczos on H_z⁻¹ through ChainInverse (Woodbury on the telescoped
    structure) for λ_min. Accuracy against dense eigvalsh at (dense_N, dense_H) and against the old
    route (block-Cholesky shift-invert) at old_N = H; CPU and wall time."""
    from limits import pc

    W, a = pc.init_weights(N, H, param, seed=4)
    t0, c0 = time.perf_counter(), time.process_time()
    s = pc.extreme_eigenvalues(W, a, skips, method="lanczos", tol=tol)
    t, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _timing.traced_peak(lambda: pc.extreme_eigenvalues(W, a, skips, method="lanczos", tol=tol))   # untimed pass
    base = ratio = None
    note = ""
    if dense_N:
        W2, a2 = pc.init_weights(dense_N, dense_H, param, seed=5)
        cd, _, sd = cpu_wall(lambda: pc.extreme_eigenvalues(W2, a2, skips, method="dense"), 1)
        cl, _, sl = cpu_wall(lambda: pc.extreme_eigenvalues(W2, a2, skips, method="lanczos", tol=tol), 1)
        note += (f"vs dense eigvalsh at N={dense_N}, H={dense_H}: rel. diff λ_min "
                 f"{abs(sl.lambda_min - sd.lambda_min) / sd.lambda_min:.1e}, λ_max "
                 f"{abs(sl.lambda_max - sd.lambda_max) / sd.lambda_max:.1e} (CPU dense {cd:.1f} s, new {cl:.1f} s); ")
    if old_N:
        W3, a3 = pc.init_weights(old_N, old_N, param, seed=6)
        co, wo, so = cpu_wall(lambda: pc.extreme_eigenvalues(W3, a3, skips, method="lanczos", tol=tol,
                                                             inverse="cholesky"), 1)
        cn, wn, sn = cpu_wall(lambda: pc.extreme_eigenvalues(W3, a3, skips, method="lanczos", tol=tol), 1)
        base, ratio = co, co / cn
        note += (f"vs old route (block Cholesky shift-invert) at N=H={old_N}: CPU {co:.1f} s vs {cn:.1f} s, "
                 f"rel. diff λ_min {abs(sn.lambda_min - so.lambda_min) / so.lambda_min:.1e}, λ_max "
                 f"{abs(sn.lambda_max - so.lambda_max) / so.lambda_max:.1e}; ")
    weights_gb = sum(w.nbytes for w in W) / 1e9
    return {"name": f"kappa(H_z) {param}{' ' + str(skips) if skips else ''} N={N} H={H}", "seconds": t,
            "baseline_seconds": base, "ratio": ratio, "target": "< 300 s, < 8 GB",
            "note": note + f"CPU {cpu:.1f} s, wall {t:.1f} s (load average {os.getloadavg()}); Lanczos tol {tol:g}; "
                           f"κ = {s.kappa:.6g}, λ_min = {s.lambda_min:.10g}, λ_max = {s.lambda_max:.10g}, "
                           f"peak traced memory {peak / 1e9:.2f} GB (weights {weights_gb:.2f} GB), "
                           f"maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB, "
                           f"converged={s.converged}"}


def run(quick: bool) -> list[dict]:
    if quick:
        return [bench_energy(256, 65), bench_equilibrium(256, 16, 64), bench_vs_dense(128, 32),
                bench_kappa(128, 128, "sp", None, 32, 32), bench_kappa(128, 128, "mupc", "1-skip", 32, 32, 96)]
    return [bench_energy(256, 65), bench_energy(1024, 64), bench_equilibrium(1024, 64, 64), bench_vs_dense(256, 64),
            bench_kappa(512, 512, "sp", None, 48, 48, 128), bench_kappa(512, 512, "mupc", "1-skip", 48, 48, 128)]


if __name__ == "__main__":
    if "--energy" in sys.argv:
        for N, L in ((256, 65), (1024, 64)):
            r = bench_energy(N, L)
            print(r["name"], f"(load average {os.getloadavg()})")
            for line in r["lines"]:
                print("   ", line, flush=True)
    elif "--only-kappa-mupc" in sys.argv:
        print(bench_kappa(512, 512, "mupc", "1-skip", 48, 48, 128), flush=True)
    elif "--kappa-accuracy" in sys.argv:
        print(bench_kappa(64, 64, "mupc", "1-skip", 48, 48, 128), flush=True)
    else:
        for r in run("--full" not in sys.argv):
            print(r, flush=True)
