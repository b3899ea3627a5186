"""Run every benchmark (benchmarks/bench_*.py) and print ratios against in-run baselines.

    python benchmarks/run.py            # full sizes (docs/performance.rst)
    python benchmarks/run.py --quick    # reduced sizes
    python benchmarks/run.py gaussian   # only benchmarks/bench_gaussian.py

Each module exposes ``run(quick: bool) -> list[dict]`` with keys name, seconds,
baseline_seconds, ratio, target, note (and optionally ``table(rows) -> str``, printed after its rows). Absolute times on shared 2-core machines are noise;
the ratio against a baseline measured in the same run is the number to read.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("only", nargs="*", help="benchmark module suffixes, e.g. gaussian kernels")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None, help="also write all rows to this JSON file")
    ap.add_argument("--merge", default=None,
                    help="write the rows into this results JSON in place of every row of the modules run (others kept)")
    args = ap.parse_args(argv)
    rows = []
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))      # for the shared benchmarks/_timing.py
    for path in sorted(HERE.glob("bench_*.py")):
        key = path.stem[len("bench_"):]
        if args.only and key not in args.only:
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        print(f"== {key}", flush=True)
        mod_rows = mod.run(args.quick)
        for r in mod_rows:
            r = {"module": key, **r}
            rows.append(r)
            base = r.get("baseline_seconds")
            ratio = r.get("ratio")
            secs = "skipped" if r.get("seconds") is None else f"{r['seconds']:.3f} s"
            print(f"  {r['name']}: {secs}"
                  + (f" | baseline {base:.3f} s | ratio {ratio:.1f}x" if base is not None and ratio is not None else "")
                  + (f" | target {r['target']}" if r.get("target") else "")
                  + (f"\n      {r['note']}" if r.get("note") else ""), flush=True)
        if hasattr(mod, "table"):              # a module's own ratio table (e.g. limits vs numpy vs peer)
            print(mod.table(mod_rows), flush=True)
    if args.json:
        from limits.results import atomic_write_text

        atomic_write_text(args.json, json.dumps(rows, indent=1, default=str) + "\n")
    if args.merge:
        from limits.results import atomic_write_text

        path = Path(args.merge)
        mods = {r["module"] for r in rows}
        old = json.loads(path.read_text()) if path.is_file() else []
        kept = [r for r in old if r.get("module") not in mods]
        atomic_write_text(path, json.dumps(kept + rows, indent=1, default=str) + "\n")
        print(f"wrote {path}: {len(rows)} rows of {', '.join(sorted(mods))}, {len(kept)} other rows kept")
    return 0


if __name__ == "__main__":
    sys.exit(main())
