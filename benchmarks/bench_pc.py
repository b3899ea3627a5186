"""Benchmarks for limits.pc (docs/performance.rst):

* linear PC equilibrium (F*, z*, S), N = 1024, L = 64, batch 64: target < 1 s;
* the same at N = 256, H = 64 against the dense-Hessian route (assemble H_z, dense Cholesky
  solve): target ratio ≥ 100×;
* κ(H_z) at N = H = 512 (SP, μPC, 1-skip): target < 5 min and < 8 GB, against dense eigvalsh
  at a size the dense route can still handle.

* the equilibrated energy alone (issue 16), side by side in one run, CPU and wall time, best of N:
  ``limits.pc.equilibrium_energy`` (O(L N² d_out)), the full ``limits.pc.equilibrium``, a plain numpy
  implementation of the telescoped formula (seed 001 Eq. 31) written here, and — in a subprocess of
  the optional venv ``$LIMITS_JPC_PYTHON`` (default /work/venv-jpc/bin/python) — jpc's
  ``linear_equilib_energy`` when jpc imports there, else a JAX-jit transcription of jpc's formula
  (same products, same float64) labelled as such; skipped cleanly when neither is present.

``run(quick=True)`` uses smaller sizes (N = 256, L = 16; dense route at N = 128, H = 32; κ at 128).
``--only-kappa-mupc`` runs κ for μPC 1-skip at N = H = 512 with its accuracy checks;
``python benchmarks/bench_pc.py --energy`` runs only the energy comparison (N = 256, L = 65 and
N = 1024, L = 64, B = 64).
"""
from __future__ import annotations

import resource
import time
import tracemalloc

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from _timing import timed
import scipy.linalg as sla


def cpu_wall(fn, repeat=5):
    """(best CPU seconds, best wall seconds, result) over ``repeat`` calls (CPU = process time)."""
    bc = bw = float("inf")
    out = None
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        bc, bw = min(bc, time.process_time() - c0), min(bw, time.perf_counter() - w0)
    return bc, bw, out


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


_JAX_SCRIPT = r"""
import json, sys, time
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
d = np.load(sys.argv[1], allow_pickle=False)
L = int(d["L"]); Ws = [jnp.asarray(d[f"W{i}"]) for i in range(L)]
X, Y = jnp.asarray(d["X"]), jnp.asarray(d["Y"]); repeat = int(sys.argv[2])
try:
    import jpc  # noqa: F401
    label = "JAX jit transcription of jpc's linear_equilib_energy (jpc %s importable)" % jpc.__version__
except Exception as exc:
    label = "JAX jit transcription of jpc's linear_equilib_energy (jpc not importable: %s)" % type(exc).__name__
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
f = jax.jit(lambda Ws, X, Y: 0.5 * jnp.mean(jax.vmap(single, in_axes=(None, 0, 0))(Ws, X, Y)))
f(Ws, X, Y).block_until_ready()
bc = bw = float("inf")
for _ in range(repeat):
    c0, w0 = time.process_time(), time.perf_counter()
    v = float(f(Ws, X, Y).block_until_ready())
    bc, bw = min(bc, time.process_time() - c0), min(bw, time.perf_counter() - w0)
print(json.dumps({"cpu": bc, "wall": bw, "energy": v, "label": label}))
"""


def jax_energy(W, X, Y, repeat=5):
    """Run the jpc / JAX comparison in the optional venv; None when it is absent or fails."""
    py = os.environ.get("LIMITS_JPC_PYTHON", "/work/venv-jpc/bin/python")
    if not os.path.exists(py):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "net.npz")
        np.savez(path, L=len(W), X=X, Y=Y, **{f"W{i}": w for i, w in enumerate(W)})
        script = os.path.join(tmp, "run_jax.py")
        with open(script, "w") as fh:
            fh.write(_JAX_SCRIPT)
        try:
            out = subprocess.run([py, script, path, str(repeat)], capture_output=True, text=True, timeout=900,
                                 env={**os.environ, "PYTHONPATH": ""})
        except (OSError, subprocess.TimeoutExpired):
            return None
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_energy(N, L, B=64, d_out=10, d_in=32, repeat=5):
    """Equilibrated energy only: new path vs full equilibrium vs plain numpy vs JAX/jpc."""
    from limits import pc

    W, a = _net(N, L - 1, d_in, d_out, 0)
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((B, d_in)), rng.standard_normal((B, d_out))
    rows = {}
    rows["limits.pc.equilibrium_energy"] = cpu_wall(lambda: pc.equilibrium_energy(W, X, Y, a), repeat)
    rows["limits.pc.equilibrium (full)"] = cpu_wall(lambda: pc.equilibrium(W, X, Y, a).energy, repeat)
    from limits.blas import blas_threads

    with blas_threads(1):
        rows["plain numpy telescoped (1 BLAS thread)"] = cpu_wall(lambda: plain_numpy_energy(W, X, Y), repeat)
    rows["plain numpy telescoped (default threads)"] = cpu_wall(lambda: plain_numpy_energy(W, X, Y), repeat)
    jx = jax_energy(W, X, Y, repeat)
    ref = rows["limits.pc.equilibrium (full)"][2]
    new_c, new_w, new_e = rows["limits.pc.equilibrium_energy"]
    lines = []
    for k, (c, w, e) in rows.items():
        lines.append(f"{k}: CPU {c * 1e3:.2f} ms, wall {w * 1e3:.2f} ms, ratio CPU/new {c / new_c:.2f}, "
                     f"rel. diff of F* {abs(e - ref) / ref:.1e}")
    jx_c = None
    if jx is None:
        lines.append("jpc/JAX: skipped (no venv at $LIMITS_JPC_PYTHON)")
    elif "error" in jx:
        lines.append(f"jpc/JAX: failed ({jx['error']})")
    else:
        jx_c = jx["cpu"]
        lines.append(f"{jx['label']}: CPU {jx['cpu'] * 1e3:.2f} ms, wall {jx['wall'] * 1e3:.2f} ms, "
                     f"ratio CPU/new {jx['cpu'] / new_c:.2f}, rel. diff of F* {abs(jx['energy'] - ref) / ref:.1e}")
    return {"name": f"pc equilibrated energy N={N} L={L} B={B} d_out={d_out} d_in={d_in}", "seconds": new_w,
            "baseline_seconds": jx["wall"] if jx_c else rows["limits.pc.equilibrium (full)"][1],
            "ratio": (jx_c / new_c) if jx_c else rows["limits.pc.equilibrium (full)"][0] / new_c,
            "target": "faster than jpc (CPU)",
            "note": f"best of {repeat}; load average {os.getloadavg()}; " + " | ".join(lines)}


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
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    s = pc.extreme_eigenvalues(W, a, skips, method="lanczos", tol=tol)
    t, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
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
            for line in r["note"].split(" | "):
                print("   ", line.split("; ")[-1] if line.startswith("best of") else line, flush=True)
    elif "--only-kappa-mupc" in sys.argv:
        print(bench_kappa(512, 512, "mupc", "1-skip", 48, 48, 128), flush=True)
    elif "--kappa-accuracy" in sys.argv:
        print(bench_kappa(64, 64, "mupc", "1-skip", 48, 48, 128), flush=True)
    else:
        for r in run("--full" not in sys.argv):
            print(r, flush=True)
