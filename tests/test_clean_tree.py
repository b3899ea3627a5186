"""The README's first command leaves a clean repository (issue: a fresh clone's ``git status`` must
stay empty after ``python -m pip install -e . && limits``).

The main job runs in a copy of this checkout (tracked files plus new, not ignored ones, committed
into a fresh repository under ``tmp_path``), then ``git status --porcelain`` of the copy must be
empty: the job writes only into its git-ignored ``results/`` folder and copies the committed
figures instead of re-rendering them. The stores that docs/sweep.rst creates are ignored too.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GIT = ["git", "-c", "user.name=limits-test", "-c", "user.email=limits-test@example.invalid",
       "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"]


def _git(args, cwd):
    return subprocess.run([*GIT, *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    try:
        listed = _git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], ROOT)
    except subprocess.CalledProcessError:
        pytest.skip("not a git checkout")
    dst = tmp_path_factory.mktemp("clone")
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    _git(["init", "-q"], dst)
    _git(["add", "-A"], dst)
    _git(["commit", "-q", "-m", "copy"], dst)
    assert _git(["status", "--porcelain"], dst) == ""
    return dst


def test_main_job_leaves_a_clean_tree(clone):
    env = {**os.environ, "PYTHONPATH": str(clone), "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-m", "limits"], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=1800)          # ~15 s at normal load; a bound for a hang
    assert proc.returncode == 0, proc.stderr
    assert "outputs in results/" in proc.stdout
    assert (clone / "results" / "tables").is_dir() and (clone / "results" / "seed004_fig2.png").is_file()
    # the committed figures are reused byte for byte, not recomputed or redrawn
    figs = [line for line in proc.stdout.splitlines() if line.startswith("figure ")]
    assert figs and all(line.endswith("(copied from the committed gallery)") for line in figs), proc.stdout
    assert (clone / "results" / "seed000_fig3.png").read_bytes() == (clone / "figures" / "seed000_fig3.png").read_bytes()
    assert _git(["status", "--porcelain", "--untracked-files=all"], clone) == ""


def test_sweep_stores_are_ignored(clone):
    """`limits sweep run docs/sweeps/X.toml` writes sweeps/X/ (docs/sweep.rst): ignored, not untracked."""
    store = clone / "sweeps" / "critical_line"
    store.mkdir(parents=True)
    (store / "sweep.nc").write_bytes(b"\0")
    try:
        assert _git(["status", "--porcelain", "--untracked-files=all"], clone) == ""
    finally:
        shutil.rmtree(clone / "sweeps")
