"""The three tile-store failures of issue 31 (item 3), measured through the command line against whichever
``limits`` is importable (run it once with the old package on PYTHONPATH and once with this one)::

    PYTHONPATH=. python benchmarks/tilestore_attacks.py [--P 120] [--cost-P 6000] [--compositions]

1. tiles copied from another model's store into a store (same names);
2. one flipped exponent bit in a tile (the lowest exponent bit of K[P−1, P−2]: the entry ×2 or ×½);
3. two processes started together on one new store (model A and model B; both find no store before either
   creates it — a delay before the store's first directory is made, 3 s in A and 1 s in B, makes the race certain).

For each: the exit status of ``limits regress --solver cg`` and the largest |mean − Cholesky mean| of model A's
test predictions (and what the output says about the tiles). ``--compositions`` runs the same three attacks on two
compositions (``limits.serial``: A = Conv 3×3 SAME → ReLU → Flatten → Dense, B = Conv 2×2 VALID (σ_w² = 3) → erf →
Flatten → Dense; 5×5 one-channel images, tiles of 40 inputs) through ``limits.predict.kernel_regression(...,
solver="cg", store=…)`` in a child process (exit 2 with the message on a ``ValueError``, as the command line). ``--cost-P``: CPU and wall seconds of a clean CG
regression (tiles reused, so the time is the verified reads and the solve) — what verifying every tile costs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _delayed_create() -> str:
    """The race injector of the regression test (one copy: tests/largep/test_store_identity.py)."""
    import ast

    tree = ast.parse((ROOT / "tests" / "largep" / "test_store_identity.py").read_text(encoding="utf-8"))
    return next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "_DELAYED_CREATE")


def _data(d: Path, P, seed=0):
    import limits

    r = np.random.default_rng(seed)
    X, Xs = r.standard_normal((P, 4)), r.standard_normal((7, 4))
    Y = np.sin(X[:, :1]) + 0.1 * r.standard_normal((P, 1))
    for name, a in (("X", X), ("Y", Y), ("Xs", Xs)):
        np.save(d / f"{name}.npy", a)
    limits.mlp(4, depth=2, activation="erf").save(d / "A.toml")
    limits.mlp(4, depth=6, activation="relu", sigma_w2=2.0).save(d / "B.toml")
    return {m: limits.predict.kernel_regression(limits.Model.load(d / m), X, Y, Xs, noise=0.1).mean
            for m in ("A.toml", "B.toml")}


_COMPOSITION_RUN = """
import json, sys
import numpy as np
import limits
a = dict(zip(sys.argv[2::2], sys.argv[3::2]))          # after "-c" and "regress": --model PATH, …
try:
    r = limits.predict.kernel_regression(limits.layers.load(a["--model"]), np.load(a["--x-train"]),
                                         np.load(a["--y-train"]), np.load(a["--x-test"]), noise=0.1, var=False,
                                         solver="cg", store=a["--store"], block=40, progress=False)
except ValueError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
print(json.dumps({"mean": r.mean.tolist(), "diagnostics": {"tiles": r.diagnostics["tiles"]}}, default=str))
"""


def _compositions(d: Path, P, seed=0):
    """Model files A.json / B.json (compositions) and images instead of _data's MLPs; the Cholesky means."""
    import limits

    L = limits.layers
    r = np.random.default_rng(seed)
    X, Xs = r.standard_normal((P, 5, 5, 1)), r.standard_normal((7, 5, 5, 1))
    Y = np.sin(X[:, 2, 2, :]) + 0.1 * r.standard_normal((P, 1))
    for name, a in (("X", X), ("Y", Y), ("Xs", Xs)):
        np.save(d / f"{name}.npy", a)
    A = limits.serial(L.Conv(filter_shape=(3, 3), padding="SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                      L.Flatten(), L.Dense())
    B = limits.serial(L.Conv(filter_shape=(2, 2), padding="VALID", sigma_w2=3.0), L.Activation("erf"), L.Flatten(),
                      L.Dense())
    A.save(d / "A.json")
    B.save(d / "B.json")
    return {f: limits.predict.kernel_regression(m, X, Y, Xs, noise=0.1).mean for f, m in (("A.json", A), ("B.json", B))}


def _argv(d, model, store):
    return ["regress", "--model", str(d / model), "--x-train", str(d / "X.npy"), "--y-train", str(d / "Y.npy"),
            "--x-test", str(d / "Xs.npy"), "--noise", "0.1", "--solver", "cg", "--store", str(store),
            "--var-points", "0", "--json"]


def _run(argv, env=None, code=None):
    if str(argv[2]).endswith(".json"):                 # a composition: the API through _COMPOSITION_RUN
        code = (code.split("from limits.cli import main")[0] if code else "") + _COMPOSITION_RUN
    cmd = [sys.executable, "-c", code, *argv] if code else [sys.executable, "-m", "limits", *argv]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "LIMITS_PROGRESS": "0", **(env or {})})


def _result(proc, ref):
    out, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        return proc.returncode, None, err.strip().splitlines()[-1] if err.strip() else ""
    o = json.loads(out)
    tiles = o["diagnostics"]["tiles"]
    return 0, float(np.abs(np.array(o["mean"]) - ref).max()), json.dumps(tiles.get("recomputed", "n/a"))


def _tiles(store):
    return sorted(p for p in (Path(store) / "nngp").iterdir() if not p.name.startswith("."))


def scenarios(d: Path, ref):
    A, B = sorted(ref)
    rows = []
    for m, s in ((A, "SA"), (B, "SB")):
        _result(_run(_argv(d, m, d / s)), ref[m])
    for src, dst in zip(_tiles(d / "SB"), _tiles(d / "SA")):
        dst.write_bytes(src.read_bytes())
    rows.append(("tiles copied from model B's store", *_result(_run(_argv(d, A, d / "SA")), ref[A])))

    _result(_run(_argv(d, A, d / "SF")), ref[A])
    victim = _tiles(d / "SF")[-1]
    data = bytearray(victim.read_bytes())
    data[-10] ^= 0x10
    victim.write_bytes(bytes(data))
    rows.append(("one flipped exponent bit", *_result(_run(_argv(d, A, d / "SF")), ref[A])))

    procs = [(m, _run(_argv(d, m, d / "SR"), {"STORE": str(d / "SR"), "DELAY": "1", "WAIT": w}, _delayed_create()))
             for m, w in ((A, "3"), (B, "1"))]
    for m, p in procs:
        rows.append((f"two processes on one new store: {m[0]}", *_result(p, ref[m])))
    return rows


def cost(d: Path, P):
    """Wall seconds of a CG regression whose tiles are all in the store (the reads and the solve)."""
    r = np.random.default_rng(1)
    X = r.standard_normal((P, 4))
    np.save(d / "cX.npy", X)
    np.save(d / "cY.npy", np.sin(X[:, :1]))
    np.save(d / "cXs.npy", X[:20])
    argv = ["regress", "--model", str(d / "A.toml"), "--x-train", str(d / "cX.npy"), "--y-train", str(d / "cY.npy"),
            "--x-test", str(d / "cXs.npy"), "--noise", "0.1", "--solver", "cg", "--store", str(d / "SC"),
            "--var-points", "0", "--json"]
    import resource

    _run(argv).communicate()
    out = []
    for _ in range(3):
        t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        o, _ = _run(argv).communicate()
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
        out.append((cpu, time.perf_counter() - t0, json.loads(o)["diagnostics"]["seconds"]))
    return min(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--P", type=int, default=120)
    ap.add_argument("--cost-P", type=int, default=0)
    ap.add_argument("--compositions", action="store_true", help="also the attacks on two compositions")
    a = ap.parse_args()
    import limits

    print(f"limits from {Path(limits.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        ref = _data(d, a.P)
        print("| scenario | exit | max |mean − Cholesky| | tiles recomputed / message |\n|---|---|---|---|")
        for name, rc, err, note in scenarios(d, ref):
            print(f"| {name} | {rc} | {'—' if err is None else f'{err:.3g}'} | {note[:150]} |")
    if a.compositions:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            ref = _compositions(d, a.P)
            for name, rc, err, note in scenarios(d, ref):
                print(f"| compositions: {name} | {rc} | {'—' if err is None else f'{err:.3g}'} | {note[:150]} |")
        if a.cost_P:
            cpu, wall, sec = cost(d, a.cost_P)
            print(f"\nclean rerun at P = {a.cost_P} (tiles reused), best of 3: {cpu:.2f} s CPU, {wall:.2f} s wall; "
                  "stages " + ", ".join(f"{k} {v:.2f} s" for k, v in sec.items()))


if __name__ == "__main__":
    main()
