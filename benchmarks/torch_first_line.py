"""How soon ``limits coord-check`` and ``limits transfer`` say what they do: seconds from the process start to the
first line on stderr (not a terminal: plain lines), the longest silence between two lines, the number of lines,
and the command's wall and CPU time — for this checkout and, with ``--before DIR``, another one (an export of the
commit before the change: ``git archive 547966f | tar -x -C DIR``), the same commands one after the other::

    nice -n 10 python benchmarks/torch_first_line.py --before /tmp/before --json benchmarks/results/cliedges/torch_first_line.json

Wall times depend on the machine's load (reported with them); the CPU time does not.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "coord-check (demo transformer, μP, widths 64–512)": [
        "coord-check", "--factory", "limits.torch.demos:transformer", "--param", "muP"],
    "transfer (digits MLP, μP, 3 widths × 7 rates × 2 seeds)": [
        "transfer", "--factory", "limits.torch.transfer_demos:digits_mlp", "--data",
        "limits.torch.transfer_demos:digits_data", "--param", "muP", "--widths", "16", "32", "64", "--log2-lrs", "-10",
        "-4", "1", "--steps", "20", "--seeds", "2", "--batch-size", "64"],
}


def one(code: Path, argv) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code))
    env.pop("LIMITS_PROGRESS", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "limits", *argv], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         text=True, env=env, cwd=code)
    stamps, lines = [], []
    for line in p.stderr:
        stamps.append(time.perf_counter() - t0)
        lines.append(line.rstrip()[:160])
    p.wait()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    gaps = [b - a for a, b in zip([0.0] + stamps, stamps + [wall])]
    return {"first_s": stamps[0] if stamps else None, "first_line": lines[0] if lines else None,
            "longest_silence_s": max(gaps), "lines": len(lines), "wall_s": wall,
            "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), "exit": p.returncode}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="another checkout to time the same way")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    out = {"load_before": os.getloadavg()[0], "commands": {}}
    for name, cmd in COMMANDS.items():
        row = {"now": one(ROOT, cmd)}
        if a.before:
            row["before"] = one(a.before, cmd)
        out["commands"][name] = row
        print(name, json.dumps(row, indent=1, ensure_ascii=False))
    out["load_after"] = os.getloadavg()[0]
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
