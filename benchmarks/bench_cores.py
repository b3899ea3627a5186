"""Cores (issue 47, goal 1): wall time and process CPU of every parallel path at ``n_jobs=1`` and ``n_jobs=2``, the
speed-up, the Amdahl serial fraction it implies and what it predicts for 16 and 64 cores; and wall-clock rows
against neural-tangents with all its threads::

    python benchmarks/bench_cores.py                      # measure, merge the rows into benchmarks/results/cores.json
    python benchmarks/bench_cores.py --P 500 --repeat 2   # a quick run (merged by row name)
    python benchmarks/bench_cores.py --docs               # the "Cores" section of docs/performance.rst from the JSON

Workloads (P = 500, 1000, 2000): the NNGP + NTK of a relu MLP of depth 3 (``kernels.kernel``, d_in = 20); the
NNGP + NTK of a relu CNN on 8×8 single-channel images (2 × [Conv 3×3 SAME, ReLU] → Flatten → Dense; the packed
pairs of ``kernels.kernel``); the same MLP by ``kernels.kernel_blocked`` (block 256); an NNGP posterior
(``predict.nngp_posterior``, P training points, 200 test points, 10 outputs); the finite Monte Carlo
(``finite.empirical_kernels``, that MLP at width 128, 8 inits, ``keep_samples=False``).

Timing (benchmarks/README.md, "How each side is timed"): both sides in this process, one warm-up call each, then
``--repeat`` (≥ 5) rounds of one call of each side in turn (n_jobs = 1, 2, 1, 2, …); wall time
(``time.perf_counter``) and process CPU (``time.process_time``, all threads), best of the rounds. The speed-up is
S = wall(1)/wall(2); Amdahl's law S(n) = 1/(s + (1 − s)/n) gives the serial fraction s = 2/S − 1 and the predicted
S(16), S(64) (s clipped to [0, 1]). The 1-minute load average is recorded before and after every row: a 2-core
speed-up is only meaningful on idle cores (load < 2). The two results are compared (``agree``: max |difference|,
0 when bit for bit).

The peer rows run neural-tangents in its own interpreter (``--nt-python``, default ``$LIMITS_NT_PYTHON`` or
/work/venvs/readme-nt/bin/python) with XLA's default threading (all cores), against ``limits`` at n_jobs = 2 (all
cores here), wall time, interleaved the same way.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _timing  # noqa: E402
from _tables import rst  # noqa: E402

import limits  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "results" / "cores.json"
PAGE = ROOT / "docs/performance.rst"
BEGIN = ".. cores-table:begin (python benchmarks/bench_cores.py --docs)"
END = ".. cores-table:end"
TARGET = 1.8
L = limits.layers


def mlp():
    return limits.mlp(20, 3, activation="relu", sigma_w2=2.0, sigma_b2=0.1)


def cnn():
    conv = lambda: L.Conv(filter_shape=(3, 3), padding="SAME", sigma_w2=2.0, sigma_b2=0.1)  # noqa: E731
    return limits.serial(conv(), L.Activation("relu"), conv(), L.Activation("relu"), L.Flatten(),
                         L.Dense(sigma_w2=1.0, sigma_b2=0.0))


def _kernel_pair(r):
    return [a for a in (r.nngp, r.ntk) if a is not None]


def workloads(P):
    """{name: (description, run(n_jobs) → list of result arrays)} at P inputs (module docstring)."""
    rng = np.random.default_rng(P)
    X = rng.standard_normal((P, 20))
    img = rng.standard_normal((P, 8, 8, 1))
    Xs = rng.standard_normal((200, 20))
    Y = np.tanh(X[:, :10])
    m, c = mlp(), cnn()
    net = m.finite(128)
    return {
        "MLP kernel": ("relu MLP, depth 3, NNGP + NTK (kernels.kernel)",
                       lambda n: _kernel_pair(limits.kernels.kernel(m, X, n_jobs=n))),
        "CNN kernel": ("relu CNN on 8×8 images, 2 conv layers + Flatten, NNGP + NTK (kernels.kernel)",
                       lambda n: _kernel_pair(limits.kernels.kernel(c, img, n_jobs=n))),
        "kernel_blocked": ("relu MLP, depth 3, NNGP + NTK (kernels.kernel_blocked, block 256)",
                           lambda n: _kernel_pair(limits.kernels.kernel_blocked(m, X, block=256, n_jobs=n,
                                                                                progress=False))),
        "posterior": ("NNGP posterior, 200 test points, 10 outputs (predict.nngp_posterior)",
                      lambda n: [(p := limits.predict.nngp_posterior(m, X, Y, Xs, noise=1e-2, n_jobs=n)).mean,
                                 p.cov]),
        "finite MC": ("finite MLP at width 128, 8 inits (finite.empirical_kernels, keep_samples=False)",
                      lambda n: [(e := limits.finite.empirical_kernels(net, X, 8, seed=0, keep_samples=False,
                                                                       n_jobs=n)).mean, e.out_mean]),
    }


def amdahl(speedup):
    """(serial fraction s from S(2), predicted S(16), S(64))."""
    s = min(1.0, max(0.0, 2.0 / speedup - 1.0))
    return s, 1.0 / (s + (1.0 - s) / 16), 1.0 / (s + (1.0 - s) / 64)


def _load1():
    return round(os.getloadavg()[0], 2)


def measure(name, P, repeat):
    """One row: ``name`` at P, n_jobs = 1 against 2 (module docstring)."""
    desc, run = workloads(P)[name]
    load0 = _load1()
    res = _timing.interleaved({"1": _timing.Local(lambda: run(1)), "2": _timing.Local(lambda: run(2))},
                              repeat=repeat)
    (t1, o1), (t2, o2) = res["1"], res["2"]
    agree = max(float(np.max(np.abs(a - b))) for a, b in zip(o1, o2))
    S = t1["wall"] / t2["wall"]
    s, s16, s64 = amdahl(S)
    work = work_split(run)
    return {"module": "cores", "name": f"{name}, P = {P}", "workload": name, "description": desc, "P": P,
            "seconds": t2["wall"], "baseline_seconds": t1["wall"], "wall_1": t1["wall"], "wall_2": t2["wall"],
            "cpu_1": t1["cpu"], "cpu_2": t2["cpu"], "wall_1_median": t1["wall_median"],
            "wall_2_median": t2["wall_median"], "speedup": S, "serial_fraction": s, "predicted_16": s16,
            "predicted_64": s64, "serial_fraction_work": work["serial"], "parallel_cpu": work["parallel"],
            "call_cpu": work["cpu"], "agree": agree, "repeat": repeat, "target": f"≥ {TARGET}× on 2 cores",
            "met": bool(S >= TARGET), "machine": {**_timing.machine(), "load_before": load0, "load_after": _load1()},
            "note": f"wall n_jobs=1 / n_jobs=2; max |difference| {agree:.1e}"}


def work_split(run, calls=3):
    """The serial fraction from the work itself (untimed pass, best of ``calls``): process CPU of a call at
    n_jobs = 2 and the part spent inside its parallel regions (:data:`limits.parallel.PROFILE`); the rest ran in
    the calling thread alone. Independent of the load, unlike the wall-clock speed-up."""
    from limits import parallel

    best = None
    for _ in range(calls):
        parallel.PROFILE = {}
        c = time.process_time()
        try:
            run(2)
            cpu = time.process_time() - c
            par = parallel.PROFILE.get("parallel", 0.0)
        finally:
            parallel.PROFILE = None
        if best is None or cpu < best["cpu"]:
            best = {"cpu": cpu, "parallel": par, "serial": max(0.0, cpu - par) / cpu}
    return best


NT_PYTHON = os.environ.get("LIMITS_NT_PYTHON", "/work/venvs/readme-nt/bin/python")


def peer_rows(P, repeat, python):
    """Wall time of the MLP and CNN kernels at P: ours at n_jobs = 2 against neural-tangents with XLA's default
    (all-core) threading, interleaved; [] with a note when the peer cannot run."""
    from nt_layers import NT_SETUP

    _timing.PEER_ENV = {"JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}     # all threads for the peer
    peer, why = _timing.Peer.start(NT_SETUP, python=python, timeout=3600)
    if peer is None:
        print(why, file=sys.stderr)
        return []
    rows = []
    rng = np.random.default_rng(P)
    cases = {"MLP kernel": (mlp(), mlp().to_serial(), rng.standard_normal((P, 20))),
             "CNN kernel": (cnn(), cnn(), rng.standard_normal((P, 8, 8, 1)))}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, (m, s, X) in cases.items():
                path = Path(tmp) / f"{len(rows)}.npy"
                np.save(path, X)
                peer.prepare(name, {"model": s.to_dict(), "X": str(path)})
                load0 = _load1()
                res = _timing.interleaved({"ours": _timing.Local(lambda: limits.kernels.kernel(m, X, n_jobs=2)),
                                           "nt": peer.side(name)}, repeat=repeat)
                ours, k = res["ours"]
                nt = res["nt"][0]
                ref = peer.result(name)
                rel = max(float(np.max(np.abs(a - b)) / np.max(np.abs(b))) for a, b in zip((k.nngp, k.ntk), ref))
                rows.append({"module": "cores", "name": f"{name} vs neural-tangents (all threads), P = {P}",
                             "workload": f"{name} vs NT", "P": P, "seconds": ours["wall"],
                             "baseline_seconds": nt["wall"], "ours_wall": ours["wall"], "ours_cpu": ours["cpu"],
                             "nt_wall": nt["wall"], "nt_cpu": nt["cpu"], "nt_first_wall": nt["first_wall"],
                             "ratio": nt["wall"] / ours["wall"], "agree_nt": rel, "repeat": repeat,
                             "nt_version": f"neural-tangents {peer.info.get('version')} (jax {peer.info.get('jax')})",
                             "machine": {**_timing.machine(), "load_before": load0, "load_after": _load1()},
                             "note": f"wall; ours n_jobs=2, NT all XLA threads; max rel. difference {rel:.1e}"})
    finally:
        peer.close()
    return rows


def merge(rows, path=DATA):
    """The rows merged into ``path`` by name (new rows replace old ones of the same name), written atomically."""
    from limits.results import atomic_write_text

    old = json.loads(path.read_text()) if path.exists() else []
    names = {r["name"] for r in rows}
    atomic_write_text(path, json.dumps([r for r in old if r["name"] not in names] + rows, indent=1) + "\n")
    return path


def _main_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--P", type=int, nargs="+", default=[500, 1000, 2000])
    ap.add_argument("--workloads", nargs="+", default=None, help="names as in workloads() (default: all)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--peer-P", type=int, default=1000)
    ap.add_argument("--nt-python", default=NT_PYTHON)
    ap.add_argument("--docs", action="store_true", help="only write the docs section from the JSON")
    ap.add_argument("--json", type=Path, default=DATA, help="the data file (default benchmarks/results/cores.json)")
    return ap.parse_args(argv)


def main(argv=None):
    a = _main_args(sys.argv[1:] if argv is None else argv)
    if a.docs:
        from limits.results import replace_marked_block

        replace_marked_block(PAGE, BEGIN, END, docs_lines(a.json))
        print("\n".join(docs_lines(a.json)))
        return 0
    for P in a.P:
        for name in a.workloads or list(workloads(2)):
            row = measure(name, P, a.repeat)
            print(json.dumps({k: row[k] for k in ("name", "wall_1", "wall_2", "cpu_1", "cpu_2", "speedup",
                                                  "serial_fraction", "agree", "machine")}), flush=True)
            merge([row], a.json)
    if not a.no_peer:
        rows = peer_rows(a.peer_P, a.repeat, a.nt_python)
        for r in rows:
            print(json.dumps({k: r[k] for k in ("name", "ours_wall", "nt_wall", "ratio", "agree_nt", "machine")}))
        if rows:
            merge(rows, a.json)
    return 0


# ------------------------------------------------------------------------------------------------ the docs table
def table_rows(data):
    """(header, rows) of the n_jobs table: one row per workload and P."""
    header = ["workload", "P", "wall 1 → 2 threads (s)", "CPU 1 / 2 threads (s)", "speed-up", "serial fraction s",
              "predicted 16 / 64 cores", "serial work s_w → S(2) / S(16)", "same numbers", "load (1 min)"]
    rows = []
    for r in sorted((r for r in data if "speedup" in r), key=lambda r: (r["workload"], r["P"])):
        m = r["machine"]
        rows.append([r["workload"], str(r["P"]), f"{r['wall_1']:.3f} → {r['wall_2']:.3f}",
                     f"{r['cpu_1']:.3f} / {r['cpu_2']:.3f}", f"{r['speedup']:.2f}×", f"{r['serial_fraction']:.2f}",
                     f"{r['predicted_16']:.1f}× / {r['predicted_64']:.1f}×", _work(r['serial_fraction_work']),
                     "bit for bit" if r["agree"] == 0 else f"{r['agree']:.1e}",
                     f"{m['load_before']:.1f} / {m['load_after']:.1f}"])
    return header, rows


def _work(sw):
    """The serial work fraction and the speed-ups Amdahl's law gives with it on 2 and 16 idle cores."""
    return f"{sw:.2f} → {1 / (sw + (1 - sw) / 2):.2f}× / {1 / (sw + (1 - sw) / 16):.1f}×"


def peer_table(data):
    header = ["workload", "P", "limits wall (s), n_jobs=2", "neural-tangents wall (s), all threads",
              "NT / limits", "NT first call (s)", "max rel. difference"]
    rows = [[r["workload"], str(r["P"]), f"{r['ours_wall']:.3f}", f"{r['nt_wall']:.3f}", f"{r['ratio']:.2f}×",
             f"{r['nt_first_wall']:.2f}", f"{r['agree_nt']:.1e}"] for r in data if "ratio" in r]
    return header, rows


def _s2(r):
    sw = r["serial_fraction_work"]
    return 1 / (sw + (1 - sw) / 2)


def docs_lines(path=DATA):
    """The generated part of the "Cores" section of docs/performance.rst."""
    data = json.loads(Path(path).read_text())
    main = [r for r in data if "speedup" in r]
    ms = [r["machine"] for r in data]
    loads = [x for m in ms for x in (m["load_before"], m["load_after"])]
    out = ["", f"Measured {min(m['date'] for m in ms)} on {ms[0]['cores']} cores ({ms[0]['cpu']}), 1-minute load average "
           f"{min(loads):.1f}–{max(loads):.1f} during the rows (other jobs shared the machine), best of "
           f"{min(r['repeat'] for r in data)} interleaved rounds — ``python benchmarks/bench_cores.py``.", ""]
    if min(loads) >= ms[0]["cores"]:
        out += [f"**The cores were not idle** (1-minute load ≥ {min(loads):.0f} on {ms[0]['cores']} cores): the second "
                "thread found no free core, so the wall-clock speed-ups measure the machine's load, not the code. The "
                "load-independent estimate is the work split, “serial work” s_w: the process CPU spent outside the "
                "parallel regions at n_jobs = 2 (an untimed pass, :data:`limits.parallel.PROFILE`), and the speed-ups "
                "Amdahl's law gives with it on idle cores.", ""]
    out += rst(*table_rows(data), caption="n_jobs = 1 against n_jobs = 2")
    met = [r["name"] for r in main if r["met"]]
    missed = [r["name"] for r in main if not r["met"]]
    out += [f"Target ≥ {TARGET}× on 2 cores for P ≥ 500, measured: met for {len(met)} of {len(main)} rows"
            + (f"; not met for {', '.join(missed)}." if missed else "."),
            f"By the work split (Amdahl, idle cores): {sum(_s2(r) >= TARGET for r in main)} of {len(main)} rows reach "
            f"{TARGET}×; the others: " + (", ".join(f"{r['name']} {_s2(r):.2f}×" for r in main if _s2(r) < TARGET)
                                          or "none") + ".", ""]
    ph, pr = peer_table(data)
    if pr:
        out += rst(ph, pr, caption="Wall clock against neural-tangents with all its threads")
    return out


if __name__ == "__main__":
    sys.exit(main())
