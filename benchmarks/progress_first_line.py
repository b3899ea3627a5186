"""How soon the long core commands say they are working: seconds from the process start to the first line on
stderr (not a terminal: plain progress lines), that line, and the command's wall and CPU time — for this
checkout and, with ``--before DIR``, another one (e.g. the main branch before the change), the same inputs on
the same machine, one command after the other.

    python benchmarks/progress_first_line.py --before /path/to/old/checkout --write

Commands (inputs built in a temporary folder): `limits check` of an MLP kernel (the default widths 64–512,
256 inits) and of a saved CNN-GP posterior on 30 digits, `limits kernel` and `limits predict` of the CNN-GP
of the README on 400 digits, `limits sweep run` of the docs' NNGP-vs-finite sweep (80 points, loky, 2
workers). Writes benchmarks/results/cliedges/progress_first_line.json with ``--write``
(tests/test_progress_first_line_data.py checks it).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "cliedges" / "progress_first_line.json"

MY_THEORY = '''
import limits
import limits.finite as F

X = F.data.sphere_inputs(3, 10, seed=0)


def nngp_vs_finite(width, depth, seed, inits=20):
    kw = dict(activation="erf", sigma_w2=1.5, sigma_b2=0.1)
    theory = limits.kernels.nngp(X, depth=depth, **kw).K[depth][0, 1]
    ek = F.empirical_kernels(F.mlp(10, width, depth, **kw), X, inits, seed=seed, keep_samples=False)
    return {"theory": theory, "finite": ek.mean[depth][0, 1]}
'''

SWEEP = '''
function = "my_theory.nngp_vs_finite"
allow = ["my_theory"]

[product]
width = [16, 32, 64, 128, 256]
depth = [2, 4]

[seeds]
n = 8
'''


def make_inputs(d: Path, code: Path):
    """Model, composition, arrays and sweep files in ``d`` (built with the checkout ``code``)."""
    script = f'''
import sys; sys.path.insert(0, {str(code)!r})
import numpy as np, limits
from sklearn.datasets import load_digits
d = {str(d)!r}
rng = np.random.default_rng(0)
limits.mlp(8, 3, activation="erf", sigma_w2=1.5, sigma_b2=0.1).save(d + "/m.toml")
np.save(d + "/a.npy", rng.standard_normal((8, 8))); np.save(d + "/b.npy", rng.standard_normal((8, 8)))
digits = load_digits()
X = (digits.images / 16.0 - 0.3)[..., None]
Y = np.eye(10)[digits.target] - 0.1
L = limits.layers
cnn = limits.serial(L.Conv((3, 3), "SAME", sigma_w2=2.0, sigma_b2=0.05), L.Activation("relu"),
                    L.GlobalAvgPool(), L.Dense(sigma_w2=1.0, sigma_b2=0.05))
cnn.save(d + "/cnn.json")
np.save(d + "/X400.npy", X[:400]); np.save(d + "/Y400.npy", Y[:400]); np.save(d + "/Xt100.npy", X[1000:1100])
p = limits.predict.nngp_posterior(cnn, X[:30], Y[:30], X[1000:1003], noise=0.01)
p.save(d + "/post30")
'''
    subprocess.run([sys.executable, "-c", script], check=True)
    (d / "my_theory.py").write_text(MY_THEORY)
    (d / "finite.toml").write_text(SWEEP)


COMMANDS = {
    "check MLP kernel (64–512 × 256 inits)": ["check", "--model", "m.toml", "--what", "kernel", "--x", "a.npy",
                                               "--x2", "b.npy"],
    "check CNN-GP posterior (30 digits)": ["check", "--prediction", "post30"],
    "kernel CNN-GP (400 digits)": ["kernel", "--model", "cnn.json", "--x1", "X400.npy", "--get", "nngp", "--json"],
    "predict CNN-GP posterior (400 + 100 digits)": ["predict", "--model", "cnn.json", "--x-train", "X400.npy",
                                                    "--y-train", "Y400.npy", "--x-test", "Xt100.npy",
                                                    "--method", "posterior", "--noise", "auto"],
    "sweep run (80 points, loky × 2)": ["sweep", "run", "finite.toml", "--allow", "my_theory", "--backend", "loky",
                                        "--n-jobs", "2", "--store", "store"],
}


def run_one(argv, code: Path, cwd: Path) -> dict:
    """(first stderr line and its time after the start, wall and CPU seconds, exit status) of ``limits ARGV``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIMITS_PROGRESS")}
    env.update(PYTHONPATH=str(code), LIMITS_BLAS_THREADS="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "limits", *argv], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    first = {}

    def read_err():
        for line in proc.stderr:
            if not first and line.strip():
                first.update(t=time.perf_counter() - t0, line=line.rstrip("\n"))

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    proc.stdout.read()
    rc = proc.wait()
    wall = time.perf_counter() - t0
    reader.join(timeout=10)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"first_line_s": first.get("t"), "first_line": first.get("line"), "wall_s": wall, "cpu_s": cpu,
            "returncode": rc}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=None, help="another checkout to time the same way (default: none)")
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(ROOT)}")
    args = ap.parse_args()
    sides = {"after": ROOT}
    if args.before:
        sides["before"] = Path(args.before).resolve()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        make_inputs(d, ROOT)
        for label, argv in COMMANDS.items():
            row = {"command": label, "argv": ["limits", *argv], "load_average": os.getloadavg()[0]}
            for side, code in sides.items():
                store = d / "store"
                if store.exists():
                    import shutil

                    shutil.rmtree(store)
                row[side] = run_one(argv, code, d)
                print(f"{label} [{side}]: first line after {row[side]['first_line_s']}, wall "
                      f"{row[side]['wall_s']:.1f} s, CPU {row[side]['cpu_s']:.1f} s, exit {row[side]['returncode']}: "
                      f"{row[side]['first_line']!r}", flush=True)
            rows.append(row)
    data = {"what": "seconds from process start to the first stderr line (not a terminal)", "cpus": os.cpu_count(),
            "python": sys.version.split()[0], "rows": rows}
    if args.write:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(data, indent=1) + "\n")
        print(f"written {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
