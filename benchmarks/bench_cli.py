"""Command-line start-up (docs/performance.rst): ``limits --help`` and every ``limits CMD --help`` must
answer in < 0.5 s CPU — heavy modules (scipy.stats, sympy, matplotlib, xarray, dask) are imported only
by the commands that use them. CPU = user + system time of the child interpreter (``os.wait4``), median
of repeats; the baseline is a bare ``python -c pass`` in the same run (interpreter start-up).

Cold start (issue 27), each a fresh interpreter, CPU = user + system of the child, best of 3, runs of limits
and its baseline interleaved, one BLAS / XLA thread:

* ``limits nngp --random 20 5 --depth 3`` (a small command: imports + a 20×20 kernel) vs ``python -c pass``;
* ``import limits`` + first ``limits.kernels.kernel(gelu MLP depth 3, X)`` at P = 3000 (NNGP + NTK) vs
  neural-tangents' first ``kernel_fn(X, None, ("nngp", "ntk"))`` of the same network including its jit
  compile (NT's process: its import is reported separately, the row compares the first call of each
  including limits' import: the issue's comparison).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_cpu(argv, extra_env=None) -> float:
    """User + system CPU seconds of one child process running ``argv`` (output discarded)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           **(extra_env or {})}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} exited with {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def commands() -> list[str]:
    """Every top-level command of the parser (``limits CMD``)."""
    from limits.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return list(sub.choices)


_FIRST_LIMITS = r"""
import numpy as np, limits
X = np.random.default_rng(0).standard_normal(({P}, 10))
limits.kernels.kernel(limits.mlp(10, 3, activation="gelu", sigma_w2=2.0, sigma_b2=0.05), X)
"""

_FIRST_NT = r"""
import json, time
t0 = time.process_time()
import numpy as np, jax
jax.config.update("jax_enable_x64", True)
from neural_tangents import stax
t_imp = time.process_time() - t0
X = np.random.default_rng(0).standard_normal(({P}, 10))
sw, sb = 2.0 ** 0.5, 0.05 ** 0.5
layers = [stax.Dense(1, W_std=sw, b_std=sb)]
for _ in range(3):
    layers += [stax.Gelu(approximate=False), stax.Dense(1, W_std=sw, b_std=sb)]
layers += [stax.Gelu(approximate=False), stax.Dense(1, W_std=sw, b_std=sb)]
kernel_fn = jax.jit(stax.serial(*layers)[2], static_argnames="get")
t1 = time.process_time()
k = kernel_fn(X, None, get=("nngp", "ntk"))
np.asarray(k.ntk)
t_first = time.process_time() - t1
t1 = time.process_time()
k = kernel_fn(X, None, get=("nngp", "ntk"))
np.asarray(k.ntk)
print(json.dumps({{"import": t_imp, "first": t_first, "warm": time.process_time() - t1}}))
"""

ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "LIMITS_BLAS_THREADS": "1"}


def cold_rows(quick: bool) -> list[dict]:
    """The issue-27 cold-start rows (module docstring)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _timing import PEER_ENV, run_peer

    py = [sys.executable]
    rows = []
    n = 5
    small, base = [], []
    for _ in range(n):
        small.append(child_cpu(py + ["-m", "limits", "nngp", "--random", "20", "5", "--depth", "3"], ONE_THREAD))
        base.append(child_cpu(py + ["-c", "pass"], ONE_THREAD))
    rows.append({"name": "cold limits nngp --random 20 5 --depth 3 (fresh interpreter)", "seconds": min(small),
                 "cpu_seconds": min(small), "baseline_seconds": min(base), "ratio": min(small) / min(base),
                 "target": "< 1 s CPU",
                 "note": f"CPU (user + system) of the child, best of {n}; baseline python -c pass {min(base):.3f} s; "
                         f"imports: numpy, limits — no scipy.linalg/optimize/special/stats, "
                         f"sympy, matplotlib, xarray, dask, joblib (tests/test_cold_imports.py)"})
    P = 600 if quick else 3000
    ours, peer, why = [], [], ""
    for _ in range(n):
        ours.append(child_cpu(py + ["-c", _FIRST_LIMITS.format(P=P)], ONE_THREAD))
        info, why = run_peer(_FIRST_NT.format(P=P))
        if info is not None:
            peer.append(info)
    row = {"name": f"cold import limits + first kernel, gelu MLP depth 3, P={P} (NNGP + NTK)",
           "seconds": min(ours), "cpu_seconds": min(ours), "target": "faster than NT's first call incl. compile"}
    if peer:
        first = min(p["first"] for p in peer)
        imp = min(p["import"] for p in peer)
        warm = min(p["warm"] for p in peer)
        row.update(baseline_seconds=first, baseline_cpu_seconds=first, ratio=first / min(ours),
                   note=f"limits: whole child CPU (interpreter, imports, first call) best of {n} = {min(ours):.2f} s; "
                        f"neural-tangents first kernel_fn call incl. jit compile {first:.2f} s CPU (its import of jax + "
                        f"neural_tangents another {imp:.2f} s, its warm call {warm:.2f} s); one BLAS/XLA thread; "
                        f"shared machine under load")
    else:
        row.update(baseline_seconds=None, ratio=None, note=f"limits child CPU {min(ours):.2f} s; {why}")
    rows.append(row)
    return rows


def run(quick: bool) -> list[dict]:
    repeats = 3 if quick else 7
    py = [sys.executable]
    base = statistics.median(child_cpu(py + ["-c", "pass"]) for _ in range(repeats))
    rows = []
    cases = [[]] + [[c] for c in commands()]
    worst = (0.0, None)
    for cmd in cases:                  # quick: one run per command (the top-level --help keeps its repeats)
        n = repeats if not cmd or not quick else 1
        t = statistics.median(child_cpu(py + ["-m", "limits", *cmd, "--help"]) for _ in range(n))
        worst = max(worst, (t, cmd))
        if not cmd:
            rows.append({"name": "limits --help", "seconds": t, "baseline_seconds": base, "ratio": t / base,
                         "target": "< 0.5 s CPU",
                         "note": f"CPU (user + system) of the child, median of {repeats}; baseline: python -c pass"})
    t, cmd = worst
    rows.append({"name": f"slowest limits CMD --help of {len(cases) - 1} ({' '.join(cmd) or '-'})", "seconds": t,
                 "baseline_seconds": base, "ratio": t / base, "target": "< 0.5 s CPU",
                 "note": f"CPU (user + system) of the child, {'one run' if quick else f'median of {repeats}'} per command"})
    return rows + cold_rows(quick)
