"""Command-line start-up (docs/performance.rst): ``limits --help`` and every ``limits CMD --help`` must
answer in < 0.5 s CPU — heavy modules (scipy.stats, sympy, matplotlib, xarray, dask) are imported only
by the commands that use them. CPU = user + system time of the child interpreter (``os.wait4``), median
of repeats; the baseline is a bare ``python -c pass`` in the same run (interpreter start-up)."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_cpu(argv) -> float:
    """User + system CPU seconds of one child process running ``argv`` (output discarded)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
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
    return rows
