"""Kernels at the edges of the input range against an independent 50-digit reference (limits.devtools.highprec):
identical, collinear, nearly collinear and nearly opposite rows, norms 1e-8 … 1e19. A validation report::

    python benchmarks/edge_numerics.py --before 547966f     # recompute "before" with that commit's limits (git archive)
    python benchmarks/edge_numerics.py                      # recompute "after" and the reference; keep "before"
    python benchmarks/edge_numerics.py --table              # the table of docs/theory/kernels.rst §5 (committed data)

writes ``benchmarks/results/calibration/edge_numerics.json``: per row the input, the quantity, the value of the limits
before this work (the commit given to ``--before``, run in a subprocess on an exported copy of it), after (this
code), the mpmath reference, and both relative errors. ``tests/kernels/test_edge_numerics.py`` checks the committed
"after" column against this code and every relative error against the reference.
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "calibration" / "edge_numerics.json"


def _rows2(norm, case, d=3, seed=0):
    """Two rows of norm ``norm``: identical ("same"), collinear ("2x": y = 2x; "-x"), or at angle ``case``."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    v = rng.standard_normal(d)
    v -= (v @ u) * u
    v /= np.linalg.norm(v)
    x = norm * u
    y = {"same": x.copy(), "2x": 2 * x, "-x": -x}.get(case)
    if y is None:
        y = norm * (math.cos(case) * u + math.sin(case) * v)
    return np.stack([x, y])


def cases():
    """[(label, input description, model description (JSON-able), X)]: MLPs as limits.mlp keyword arguments,
    compositions as lists of layer dicts."""
    dense = lambda w, b: {"layer": "Dense", "sigma_w2": w, "sigma_b2": b}       # noqa: E731
    act = lambda n: {"layer": "Activation", "name": n}                             # noqa: E731
    out = [
        ("two identical rows, norm 1e7 (issue 42)", {"mlp": dict(activation="erf", depth=1)}, _rows2(1e7, "same")),
        ("Unix times 1.7e9 and 1.7e9 + 3600 (d = 1)", {"mlp": dict(activation="erf", depth=1)},
         np.array([[1.7e9], [1.7e9 + 3600.0]])),
        ("angle 1e-12, norm 1e19", {"mlp": dict(activation="erf", depth=2, sigma_b2=0.1)}, _rows2(1e19, 1e-12)),
        ("angle 1e-6, norm 1.7e9", {"mlp": dict(activation="erf", depth=3)}, _rows2(1.7e9, 1e-6)),
        ("angle π − 1e-6, norm 1e7", {"mlp": dict(activation="erf", depth=2)}, _rows2(1e7, math.pi - 1e-6)),
        ("angle 1e-12, norm 1", {"mlp": dict(activation="relu", depth=3, sigma_w2=2.0, sigma_b2=0.1)},
         _rows2(1.0, 1e-12)),
        ("collinear x, 2x, norm 1e-8", {"mlp": dict(activation="relu", depth=3, sigma_w2=2.0, sigma_b2=0.1)},
         _rows2(1e-8, "2x")),
        ("generic rows, 60 layers in the ordered phase (1 − c → 0)",
         {"mlp": dict(activation="relu", depth=60, sigma_w2=1.0, sigma_b2=1.0)},
         np.random.default_rng(1).standard_normal((2, 4))),
        ("collinear x, 2x, norm 1.7e9", {"mlp": dict(activation="gelu", depth=3)}, _rows2(1.7e9, "2x")),
        ("angle 1e-12, norm 1.7e9", {"mlp": dict(activation="gelu", depth=2, sigma_b2=0.1)}, _rows2(1.7e9, 1e-12)),
        ("opposite rows x, −x, norm 1e19", {"serial": [dense(2.0, 0.0), act("gelu"), dense(1.5, 0.0)]},
         _rows2(1e19, "-x")),
        ("angle π − 1e-6, norm 1.7e9", {"serial": [dense(2.0, 0.0), act("gelu"), dense(1.5, 0.0)]},
         _rows2(1.7e9, math.pi - 1e-6)),
        ("angle 1e-12, norm 1e7", {"serial": [dense(2.0, 0.1), act("relu"), dense(1.0, 0.1), {"layer": "LayerNorm"},
                                              act("relu"), dense(1.0, 0.1)]}, _rows2(1e7, 1e-12)),
        ("angle 1e-6, norm 1e7", {"serial": [dense(2.0, 0.1), act("erf"), dense(1.5, 0.1), act("erf"),
                                             dense(1.0, 0.1)]}, _rows2(1e7, 1e-6)),
    ]
    conv = {"layer": "Conv", "filter_shape": [3], "padding": "SAME", "sigma_w2": 2.0, "sigma_b2": 0.1}
    img = _rows2(1e7, 1e-6, d=6, seed=3)[:, :, None]                 # two 1-D images of 6 pixels, 1 channel
    out.append(("NOT COVERED: two images at angle 1e-6, norm 1e7", {"serial": [conv, act("erf"), conv, act("erf"),
                                                                              {"layer": "GlobalAvgPool"},
                                                                              dense(1.0, 0.0)]}, img))
    return out


def compute(spec, X):
    """(NNGP, NTK) read-out kernels of ``spec`` on X with whatever ``limits`` is importable (runs in the
    subprocess for "before" too: keep to the API both versions have)."""
    import warnings

    import limits

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if "mlp" in spec:
            m = limits.mlp(X.shape[1], **spec["mlp"])
            k = limits.kernels.kernel(m, X)
        else:
            m = limits.layers.Serial.from_dict({"serial": spec["serial"]})
            k = limits.kernels.kernel(m, X)
    return np.asarray(k.nngp, dtype=float), np.asarray(k.ntk, dtype=float)


def reference(spec, X):
    from limits.devtools import highprec as hp

    if "mlp" in spec:
        kw = dict(spec["mlp"])
        K, T, _ = hp.mlp(X, kw.pop("activation"), kw.pop("depth"), **kw)
    else:
        import limits

        layers = limits.layers.Serial.from_dict({"serial": spec["serial"]}).layers
        K, T = hp.composition(X, layers)
    return np.array(K), np.array(T)


def _rel(v, r):
    if r == 0:
        return 0.0 if v == 0 else math.inf
    return abs(v - r) / abs(r) if math.isfinite(v) else math.inf


def _before(commit):
    """Values of every case with the limits of ``commit`` (exported with git archive, run in a subprocess)."""
    with tempfile.TemporaryDirectory() as d:
        arch = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", d], input=arch, check=True)
        code = ("import json, sys, numpy as np\n"
                f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
                "import edge_numerics as e\n"
                "out = []\n"
                "for label, spec, X in e.cases():\n"
                "    try:\n"
                "        K, T = e.compute(spec, X)\n"
                "        out.append([K.tolist(), T.tolist()])\n"
                "    except Exception as exc:\n"
                "        out.append(repr(exc))\n"
                "print(json.dumps(out))\n")
        env = {"PYTHONPATH": d, "PATH": "/usr/bin:/bin"}
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=d, check=True)
        return json.loads(res.stdout.strip().splitlines()[-1].replace("Infinity", "1e999").replace("NaN", "null"))


ENTRIES = (("K_out", 0, 1), ("Θ_out", 0, 1), ("Θ_out", 0, 0))


def run(before_commit=None):
    old = json.loads(OUT.read_text()) if OUT.exists() else {}
    before = _before(before_commit) if before_commit else None
    rows = []
    for n, (label, spec, X) in enumerate(cases()):
        K, T = compute(spec, X)
        Kr, Tr = reference(spec, X)
        for q, i, j in ENTRIES:
            after = float((K if q == "K_out" else T)[i, j])
            ref = float((Kr if q == "K_out" else Tr)[i, j])
            if before is not None:
                b = before[n]
                bval = None if isinstance(b, str) else float((b[0] if q == "K_out" else b[1])[i][j])
                berr = b if isinstance(b, str) else None
            else:
                prev = next((r for r in old.get("rows", []) if r["case"] == label and r["quantity"] == f"{q}[{i},{j}]"
                             and r["model"] == spec), None)
                bval, berr = (prev["before"], prev.get("before_error")) if prev else (None, "not computed")
            rows.append({"case": label, "model": spec, "X": X.tolist(), "quantity": f"{q}[{i},{j}]",
                         "before": bval, "before_error": berr, "after": after, "reference": ref,
                         "rel_before": None if bval is None else _rel(bval, ref), "rel_after": _rel(after, ref)})
    return {"command": "python benchmarks/edge_numerics.py " + " ".join(sys.argv[1:]),
            "before_commit": before_commit or old.get("before_commit"), "rows": rows}


def _model_text(spec):
    if "mlp" in spec:
        kw = spec["mlp"]
        extra = ", ".join(f"{k} = {v}" for k, v in kw.items() if k not in ("activation", "depth"))
        return f"{kw['activation']} MLP, depth {kw['depth']}" + (f" ({extra})" if extra else "")
    names = {"Dense": "D", "Activation": "", "LayerNorm": "LN", "Conv": "Conv", "GlobalAvgPool": "GAP"}
    return "serial " + "–".join(names[l["layer"]] or l["name"] for l in spec["serial"])


def table(data) -> list:
    lines = [f"Before: limits at {data['before_commit']}; after: this code; reference: mpmath at 50+ digits "
             "(limits.devtools.highprec).", "",
             "| input | model | quantity | before | after | reference | rel. error before → after |",
             "|---|---|---|---:|---:|---:|---|"]
    for r in data["rows"]:
        b = "error" if r["before"] is None else f"{r['before']:.10g}"
        rb = "—" if r["rel_before"] is None else f"{r['rel_before']:.1e}"
        lines.append(f"| {r['case']} | {_model_text(r['model'])} | {r['quantity']} | {b} | {r['after']:.10g} | "
                     f"{r['reference']:.10g} | {rb} → {r['rel_after']:.1e} |")
    return lines


def rst_table(data) -> list:
    """The table as an RST literal block (docs/theory/kernels.rst §5, between its markers)."""
    return ["", "::", ""] + ["    " + line for line in table(data)] + [""]


BEGIN = ".. edge-numerics:begin (python benchmarks/edge_numerics.py --write)"
END = ".. edge-numerics:end"
DOC = ROOT / "docs/theory/kernels.rst"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="a git commit whose limits gives the 'before' column")
    from _tables import add_table_options, show_or_write

    add_table_options(ap, show_help="print the table from the committed data",
                      write_help="write the table into docs/theory/kernels.rst §5")
    a = ap.parse_args(argv)
    if show_or_write(a, OUT, DOC, (BEGIN, END), table, rst_table):
        return 0
    from limits.results import atomic_write_text

    data = run(a.before)
    atomic_write_text(OUT, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print("\n".join(table(data)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
