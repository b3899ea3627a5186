"""Shared timing helpers for the benchmark modules, and the runner for peer libraries that live in an
optional interpreter (neural-tangents + jax; create it with ``python benchmarks/make_peer_env.py``)."""
import json
import math
import os
import subprocess
import time
from pathlib import Path

NT_PYTHON = os.environ.get("LIMITS_NT_PYTHON", "/work/venv-nt/bin/python")

# one CPU thread for the peer as for us (BLAS via limits.blas; XLA's Eigen pool and OpenMP here)
PEER_ENV = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "TF_CPP_MIN_LOG_LEVEL": "3", "JAX_PLATFORMS": "cpu"}


PEER_TIMED = r"""
def nt_timed(kfn, X, calls):
    # neural-tangents' kernel_fn on X (jit, nt.batch of <= 50 dividing P, results to the host), called ``calls``
    # times: the first call (jit included) and the best CPU / wall seconds; returns (timings, nngp, ntk).
    import time
    import jax
    import neural_tangents as nt
    import numpy as np
    b = min(50, X.shape[0])
    while X.shape[0] % b:
        b -= 1
    fn = nt.batch(jax.jit(kfn, static_argnames="get"), batch_size=b, store_on_device=False)
    res = {}
    for k in range(calls):
        c0, w0 = time.process_time(), time.perf_counter()
        r = fn(X, None, ("nngp", "ntk"))
        nngp, ntk = np.asarray(r.nngp), np.asarray(r.ntk)
        c, w = time.process_time() - c0, time.perf_counter() - w0
        res.setdefault("first_cpu", c)
        res.setdefault("first_wall", w)
        res["cpu"] = min(res.get("cpu", c), c)
        res["wall"] = min(res.get("wall", w), w)
    return res, nngp, ntk
"""


def timed(fn, repeat=1):
    """(best wall seconds over ``repeat`` runs, result of the last run)."""
    best = float("inf")
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _timed_call(fn, res, first):
    """Call ``fn`` once; fold its CPU and wall time into ``res`` (first call, best so far); its result."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    w, c = time.perf_counter() - w, time.process_time() - c
    if first:
        res.update(first_wall=w, first_cpu=c, wall=w, cpu=c)
    res["wall"] = min(res["wall"], w)
    res["cpu"] = min(res["cpu"], c)
    return out


def cpu_wall(fn, repeat=3):
    """Time ``fn`` ``repeat`` times: dict with the first call (``first_cpu``, ``first_wall``) and the best
    of all calls (``cpu``, ``wall``; CPU = ``time.process_time``, all threads), and the last result."""
    res, out = {}, None
    for k in range(repeat):
        out = _timed_call(fn, res, k == 0)
    return res, out


def cpu_wall_pair(fa, fb, repeat=5):
    """:func:`cpu_wall` of two functions, their calls interleaved (a, b, a, b, …) so that a load that comes
    and goes on a shared machine weighs on both alike; returns (res_a, out_a), (res_b, out_b)."""
    ra, rb, oa, ob = {}, {}, None, None
    for k in range(repeat):
        oa = _timed_call(fa, ra, k == 0)
        ob = _timed_call(fb, rb, k == 0)
    return (ra, oa), (rb, ob)


def cpu_wall_interleaved(fns, repeat=5):
    """:func:`cpu_wall` of several functions (a dict name -> fn), their calls interleaved (a, b, c, a, b, c, …);
    returns {name: (res, last result)}."""
    res = {k: {} for k in fns}
    out = {}
    for j in range(repeat):
        for k, fn in fns.items():
            out[k] = _timed_call(fn, res[k], j == 0)
    return {k: (res[k], out[k]) for k in fns}


def fit_exponent(xs, ts):
    """Least-squares slope of log t against log x (the empirical cost exponent)."""
    lx = [math.log(x) for x in xs]
    lt = [math.log(max(t, 1e-12)) for t in ts]
    mx, mt = sum(lx) / len(lx), sum(lt) / len(lt)
    num = sum((a - mx) * (b - mt) for a, b in zip(lx, lt))
    den = sum((a - mx) ** 2 for a in lx)
    return num / den if den > 0 else float("nan")


def run_peer(script: str, *args, python=None, timeout=3600):
    """Run ``script`` (python source) in the peer interpreter; returns (parsed JSON of its last stdout
    line, "") or (None, reason it was skipped). Never raises for a missing or broken peer."""
    python = python or NT_PYTHON
    if not Path(python).exists():
        return None, (f"peer skipped: no interpreter at {python} (python benchmarks/make_peer_env.py; "
                      "or set LIMITS_NT_PYTHON)")
    env = {**os.environ, **PEER_ENV}
    try:
        r = subprocess.run([python, "-c", script, *map(str, args)], capture_output=True, text=True,
                           timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"peer skipped: {exc}"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"peer skipped: {last}"
    try:
        return json.loads(r.stdout.strip().splitlines()[-1]), ""
    except (ValueError, IndexError):
        return None, "peer skipped: no JSON result on its stdout"
