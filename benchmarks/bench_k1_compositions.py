"""CPU cost of K1 (``limits.kernels.finite_width``) of compositions: the code before the batched four-point functions
(``--old-ref``, exported from git into a temporary directory) against this tree, in the same run, each in its own
subprocess with one BLAS thread (process CPU seconds, best of ``--repeat`` for the cases marked small), and peak memory
(tracemalloc) in a separate untimed pass::

    nice -n 10 python benchmarks/bench_k1_compositions.py            # ≈ 15 CPU-min; writes the JSON below
    python benchmarks/bench_k1_compositions.py --table               # the table of docs/theory/finite_width.rst §8
    python benchmarks/bench_k1_compositions.py --write               # … written into that page between its markers

Cases: ``D`` of benchmarks/finite_width_residual_validation.py (a relu 1-D conv ResNet with two blocks on two inputs of
length 3 — the issue's case), and ``Conv 3×3 → relu → Conv 3×3 → relu → GlobalAvgPool → Dense`` (SAME padding, one input
channel) on scikit-learn's digits (``load_digits``, /16; 4×4 = 2×2 means of the 8×8 images), P = 1, 2 first images.
The old route is run where it takes minutes at most; beyond, the count of four-point functions each route integrates
is reported and the cost extrapolated from the measured CPU per four-point function (``--counts``: P = 1, 2, 4, 10 on
8×8). Writes ``benchmarks/results/k1/k1_compositions.json`` (atomically, after every case)."""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks/results/k1/k1_compositions.json"
DOC = ROOT / "docs/theory/finite_width.rst"
BEGIN = ".. k1-compositions:begin (python benchmarks/bench_k1_compositions.py --write)"
END = ".. k1-compositions:end"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
OLD_REF = "ba2e4b0"
# name: (old route run? (with its memory pass?), repeats); cnn8_P2 (≈ 3 CPU-min) only when asked for with --case
CASES = {"D": ((True, True), 3), "cnn4_P1": ((True, False), 1), "cnn4_P2": ((False, False), 1),
         "cnn8_P1": ((False, False), 1), "cnn8_P2": ((False, False), 1)}
DEFAULT = ["D", "cnn4_P1", "cnn4_P2", "cnn8_P1"]


def build(name):
    """(composition, inputs, description) of a case."""
    import numpy as np

    import limits

    L = limits.layers
    if name == "D":
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from finite_width_residual_validation import cases

        text, s, X = cases()["D"]
        return s, X, "relu 1-D conv ResNet, two blocks, GlobalAvgPool; 2 inputs of length 3, 2 channels"
    from sklearn.datasets import load_digits

    size, P = int(name[3]), int(name.split("_P")[1])
    X = load_digits().images[:P] / 16.0
    if size == 4:
        X = X.reshape(P, 4, 2, 4, 2).mean(axis=(2, 4))
    s = limits.serial(L.Conv(filter_shape=(3, 3), sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                      L.Conv(filter_shape=(3, 3), sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                      L.GlobalAvgPool(), L.Dense(1.0, 0.05))
    return s, X[..., None], f"2-layer relu CNN (3×3 SAME), GlobalAvgPool; {P} digit(s) {size}×{size}"


def worker(name, repeat, memory):
    """Run one case in this process: {"cpu": best, "cpus": [...], "K1": ...} or {"peak_mb": ...} with ``memory``."""
    import numpy as np

    import limits

    s, X, _ = build(name)
    run = lambda: limits.kernels.finite_width(s, X, ntk=False)       # noqa: E731
    if memory:
        import tracemalloc

        tracemalloc.start()
        run()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return {"peak_mb": peak / 2 ** 20}
    cpus, r = [], None
    for _ in range(repeat):
        t0 = time.process_time()
        r = run()
        cpus.append(time.process_time() - t0)
    return {"cpu": min(cpus), "cpus": cpus, "K1": np.asarray(r.K1).tolist(), "note": r.note}


def _spawn(tree, name, repeat, memory):
    env = {**os.environ, **ONE_THREAD, "PYTHONPATH": str(tree), "LIMITS_PROGRESS": "0"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--repeat", str(repeat)]
    cmd += ["--memory"] if memory else []
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    return json.loads(out.stdout.strip().splitlines()[-1])


def export_old(ref, where):
    """The ``limits`` package at git ``ref`` in the directory ``where`` (git archive; the work tree is not touched)."""
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "limits"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=arch, check=True)
    return where


def counts(sizes=(1, 2, 4, 10)):
    """Four-point functions each route integrates on the 8×8 CNN: the local route's distinct Σ¹ entries (counted
    without integrating) and the general route's m(m+1)/2 per nonlinearity."""
    out = {}
    for P in sizes:
        s, X, _ = build(f"cnn8_P{P}")
        from limits.kernels.finite_width_local import four_point_count

        n = P * 64
        m = n * (n + 1) // 2
        local, entries = four_point_count(s, X)
        out[str(P)] = {"local": local, "v_entries": entries, "general": 2 * (m * (m + 1) // 2), "pairs": m}
    return out


def _save(data):
    from limits.results import atomic_write_text

    OUT.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(OUT, json.dumps(data, indent=1) + "\n")


def machine():
    return {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
            "note": "process CPU seconds (time.process_time) in a subprocess with one BLAS thread; the machine was "
                    "shared with other jobs (CPU time, not wall)"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--old-ref", default=OLD_REF)
    ap.add_argument("--case", nargs="*", default=DEFAULT, choices=list(CASES))
    ap.add_argument("--no-counts", action="store_true")
    from _tables import add_table_options, show_or_write

    add_table_options(ap, write_help="write the table into docs/theory/finite_width.rst §8")
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(a.worker, a.repeat, a.memory)))
        return
    if show_or_write(a, OUT, DOC, (BEGIN, END), table):
        return
    data = json.loads(OUT.read_text()) if OUT.exists() else {}
    data.update({"machine": machine(), "old_ref": a.old_ref})
    data.setdefault("cases", {})
    with tempfile.TemporaryDirectory() as tmp:
        old = export_old(a.old_ref, tmp)
        for name in a.case:
            (run_old, old_memory), repeat = CASES[name]
            rec = {"description": build(name)[2], "repeat": repeat}
            rec["new"] = _spawn(ROOT, name, repeat, False)
            rec["new"].update(_spawn(ROOT, name, 1, True))
            if run_old:
                rec["old"] = _spawn(old, name, repeat, False)
                if old_memory:
                    rec["old"].update(_spawn(old, name, 1, True))
            data["cases"][name] = rec
            _save(data)
            print(name, {k: rec[k].get("cpu") for k in ("old", "new") if k in rec}, flush=True)
    if not a.no_counts:
        data["counts_8x8"] = counts()
        _save(data)
    print(table(data))


def table(data):
    """The rst table of docs/theory/finite_width.rst §8 ("Cost of K1") from the JSON."""
    import numpy as np

    rows = [("case", "route (new)", "old CPU-s", "new CPU-s", "speed-up", "max rel. diff K1", "peak MB old / new")]
    for name, rec in data["cases"].items():
        new, old = rec["new"], rec.get("old")
        diff = "—"
        if old:
            a, b = np.asarray(new["K1"]), np.asarray(old["K1"])
            diff = f"{np.max(np.abs(a - b)) / np.max(np.abs(b)):.1e}"
        route = "local" if "local route" in new.get("note", "") else "general"
        rows.append((name, route, f"{old['cpu']:.1f}" if old else "not run", f"{new['cpu']:.1f}",
                     f"{old['cpu'] / new['cpu']:.1f}×" if old else "—", diff,
                     (f"{old['peak_mb']:.0f} / " if old and "peak_mb" in old else "— / ") + f"{new['peak_mb']:.0f}"))
    c = data.get("counts_8x8")
    per = None
    big = max((k for k in data["cases"] if k.startswith("cnn8_P")), default=None, key=lambda k: int(k.split("P")[1]))
    if c and big:
        per = data["cases"][big]["new"]["cpu"] / c[big.split("P")[1]]["local"]
    if c:
        for P, v in c.items():
            est = f"≈ {v['local'] * per / 60:.0f} min (extrapolated)" if per else "—"
            rows.append((f"cnn8_P{P} count", "local", f"{v['general']:.2e} 4-pt", f"{v['local']:.2e} 4-pt", "—", "—",
                         est))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    line = "  ".join("=" * x for x in w)
    fmt = lambda r: "  ".join(s.ljust(x) for s, x in zip(r, w)).rstrip()     # noqa: E731
    return "\n".join(["    " + line, "    " + fmt(rows[0]), "    " + line] + ["    " + fmt(r) for r in rows[1:]]
                     + ["    " + line])


if __name__ == "__main__":
    main()
