"""The README's kernel benchmark rows, generated from the rows a benchmark run wrote (issue 16: "README's
benchmark table is regenerated from it")::

    python benchmarks/run.py kernels --json benchmarks/results/kernels.json   # measure (minutes)
    python benchmarks/readme_rows.py                                          # print the README rows
    python benchmarks/readme_rows.py --write                                  # put them into README.md

``tests/test_readme_benchmarks.py`` fails when README.md does not hold exactly these rows.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "results" / "kernels.json"
CLOSED = "| NNGP + NTK, closed forms (erf, relu, gelu): `limits` vs plain numpy / neural-tangents, steady-state CPU"
VARIANCE = "| NNGP + NTK without a closed form or at large variance, P = 1000, L = 100"
TARGET_CLOSED = "≥ 2× numpy, ≥ 4× NT"


def _load(path=DATA):
    return json.loads(Path(path).read_text())


def _x(v):
    return f"{v:.2f}×"


def _closed_row(rows):
    main = [r for r in rows if r.get("baseline_cpu_seconds") is not None]
    if not main:
        raise ValueError("no closed-form rows in the benchmark data")
    parts, met, missed = [], [], []
    for r in main:
        nt = "NT skipped" if r.get("nt_ratio") is None else \
            f"NT {_x(r['nt_ratio'])} ({r['nt_first_cpu'] / r['cpu_seconds']:.0f}× incl. its compile)"
        parts.append(f"{r['name'].replace('NNGP+NTK, ', '')}: {r['cpu_seconds']:.3f} s (floor "
                     f"{r['floor_cpu']:.3f} s), numpy {_x(r['ratio'])}, {nt}")
        ok = r["ratio"] >= 2.0 and (r.get("nt_ratio") or 0.0) >= 4.0
        (met if ok else missed).append(r["name"].split(" NNGP")[0])
    agree = max(r["agree_numpy"] for r in main)
    agree_nt = [r["agree_nt"] for r in main if r.get("agree_nt") is not None]
    exps = {r["name"].split(",")[0]: r["exponent"] for r in rows if "exponent" in r}
    cost = "; ".join(f"{k.replace('cost exponent in ', 'CPU ∝ ')}^{v:.2f}" for k, v in exps.items())
    versions = sorted({r["nt_version"] for r in main if r.get("nt_version")})
    meas = ("; ".join(parts) + ". Floor: libm's arcsin/arctan alone on every packed entry"
            + f". Agree with numpy ≤ {agree:.1e}"
            + (f", with NT ≤ {max(agree_nt):.1e}" if agree_nt else "")
            + (f"; {cost} (theory 1 in L, 2 in P)" if cost else "")
            + (f"; peer {versions[0]}" if versions else "")
            + " — `python benchmarks/run.py kernels`")
    status = ("met" if not missed else
              ("met for " + ", ".join(met) + "; " if met else "") + "**not met** for " + ", ".join(missed)
              + " (floor: one libm arcsin/arctan per packed entry, docs/performance.rst)")
    return f"{CLOSED} | {meas} | {TARGET_CLOSED}: {status} |"


def _variance_row(rows):
    big = [r for r in rows if "P=1000, L=100" in r["name"] and r.get("baseline_cpu_seconds") is None
           and "exponent" not in r]
    if not big:
        raise ValueError("no large-variance rows in the benchmark data")
    parts = [f"{r['name'].replace('NNGP+NTK, P=1000, L=100, ', '')}: {r['cpu_seconds']:.2f} s" for r in big]
    slow = [r["name"].split(" ")[0] + " at " + r["name"].split(", ")[-2] for r in big if r["cpu_seconds"] >= 10.0]
    status = "met" if not slow else "**not met** for " + ", ".join(slow)
    return f"{VARIANCE} | {'; '.join(parts)} (CPU) — `python benchmarks/run.py kernels` | < 10 s at any variance: {status} |"


def rows(path=DATA):
    data = _load(path)
    return [_closed_row(data), _variance_row(data)]


def replace(readme: str, new_rows) -> str:
    """README text with the generated rows in place of the lines starting with the same first cell."""
    lines = readme.splitlines()
    for row in new_rows:
        head = row.split(" | ")[0]
        hits = [i for i, ln in enumerate(lines) if ln.startswith(head)]
        if len(hits) != 1:
            raise ValueError(f"README.md: expected one row starting with {head!r}, found {len(hits)}")
        lines[hits[0]] = row
    return "\n".join(lines) + ("\n" if readme.endswith("\n") else "")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    new = rows()
    if "--write" in argv:
        from limits.results import atomic_write_text

        path = ROOT / "README.md"
        atomic_write_text(path, replace(path.read_text(), new))
    print("\n".join(new))
    return 0


if __name__ == "__main__":
    sys.exit(main())
