"""The dask example of docs/sweep.rst ("A theory curve with its finite-network check") as a newcomer runs it: its
`my_theory.py` and `finite.toml` copied from the page into an empty folder, then `limits sweep run finite.toml
--allow my_theory --n-jobs 2` through the `limits` console script (the current folder is not on sys.path). Issue 41: the dask
workers could not import `my_theory`, and the sweep hung at 0/80 points without a progress line."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import limits.sweep as S

ROOT = Path(__file__).resolve().parents[2]
COMMAND = "limits sweep run finite.toml --allow my_theory --n-jobs 2"


def _example():
    """(my_theory.py, finite.toml, the command lines) of the docs' section, as written."""
    import doc_examples as D

    section = [b for b in D.blocks("docs/sweep.rst") if b.section == "A theory curve with its finite-network check"]
    code = next(b.code for b in section if b.lang == "python")
    toml = next(b.code for b in section if b.lang == "toml")
    cmds = [ln.split("#")[0].strip() for b in section if b.lang == "bash" for ln in b.code.splitlines()]
    return code, toml, cmds


def _console_script(tmp_path):
    """The installed `limits` script beside this Python, else an equivalent one (guarded as console scripts are,
    which dask's spawned worker processes rely on)."""
    script = Path(sys.executable).parent / "limits"
    if script.is_file():
        return [str(script)]
    alt = tmp_path / "bin" / "limits"
    alt.parent.mkdir()
    alt.write_text("import sys\nfrom limits.cli import main\nif __name__ == '__main__':\n    sys.exit(main())\n")
    return [sys.executable, str(alt)]


def test_the_docs_dask_example_runs_from_a_fresh_folder(tmp_path):
    pytest.importorskip("distributed")
    code, toml, cmds = _example()
    assert COMMAND in cmds and 'backend = "dask"' in toml and "allow = [\"my_theory\"]" in toml
    work = tmp_path / "work"
    work.mkdir()
    (work / "my_theory.py").write_text(code)
    # the page's grid is 80 points (~20 s on 2 cores); the same file with 4 of them tests the same path
    small = re.sub(r"width = \[.*?\]", "width = [16, 32]", toml)
    small = re.sub(r"depth = \[.*?\]", "depth = [2]", small)
    small = re.sub(r"\[seeds\]\nn = \d+", "[seeds]\nn = 2", small)
    assert small != toml and 'backend = "dask"' in small
    (work / "finite.toml").write_text(small)
    env = {k: v for k, v in os.environ.items() if k not in ("LIMITS_PROGRESS", "PYTHONPATH")}
    env["PYTHONPATH"] = str(ROOT)                      # this checkout's limits, nothing of the folder
    env["LIMITS_PROGRESS_FIRST"] = "0"                 # the first progress line at once (the default waits 2 s)
    argv = _console_script(tmp_path) + COMMAND.split()[1:]
    # a LocalCluster of 2 workers and 4 points: ~5 CPU-s; the limit allows for a machine loaded 20-fold
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    # a line at once, before any point is done (the command's, or the sweep's own at 0/4)
    assert re.match(r"limits sweep run: 0s elapsed$|sweep nngp_vs_finite: 0/4 points", lines[0]), lines
    assert "4 points: 0 reused from the store, 4 computed, 0 failed (dask" in proc.stdout + proc.stderr
    ds = S.load(work / "sweeps" / "finite" / "sweep.nc")
    assert int(ds["failed"].sum()) == 0 and ds["finite"].shape == (2, 1, 2)
    # the dask workers computed what this process computes from the stored points' parameters and seeds (bit for
    # bit, as the backends promise)
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("docs_my_theory", work / "my_theory.py")
    mine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mine)
    metas = [json.loads(p.read_text()) for p in (work / "sweeps" / "finite" / "points").rglob("*.json")]
    assert len(metas) == 4
    for meta in metas:
        got = mine.nngp_vs_finite(**meta["params"], seed=meta["seed"])
        at = ds.sel(width=meta["params"]["width"], depth=meta["params"]["depth"]).isel(seed=meta["index"][-1])
        for v in ("finite", "theory"):
            assert float(at[v]) == got[v], (meta, v)
