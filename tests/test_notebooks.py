"""Execute every notebook in notebooks/ (quick mode) and fail on any cell error.

The notebooks are plain-text sources in jupytext's percent format (``notebooks/NAME.py``: ``# %%``
code cells, ``# %% [markdown]`` text cells); they are read with ``jupytext`` and executed with
``nbclient``. Each runs with ``LIMITS_QUICK=1`` in a fresh temporary working directory (no figures/
pollution) with the checkout first on ``PYTHONPATH``, kernel ``python3`` (ipykernel; installed for the user by the fixture when no such
kernelspec is visible), 300 s per-cell timeout. The tour is part of the default suite; the seed
notebooks are marked slow (together they take a few minutes on a loaded 2-core machine).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
jupytext = pytest.importorskip("jupytext")

ROOT = Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"
FAST = ["tour", "architectures"]
SLOW = ["seed000_pc_width_depth", "seed001_mupc_hessian", "seed002_nfd", "seed003_mup_for_pc",
        "seed004_residual_response"]
QUICK_LINE = 'QUICK = os.environ.get("LIMITS_QUICK", "1") == "1"'


@pytest.fixture(scope="session")
def python3_kernel():
    """Make sure a kernelspec named python3 exists (ipykernel ships one; install it if not visible)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        KernelSpecManager().get_kernel_spec("python3")
    except NoSuchKernel:
        subprocess.run([sys.executable, "-m", "ipykernel", "install", "--user", "--name", "python3"],
                       check=True, capture_output=True)
        KernelSpecManager().get_kernel_spec("python3")
    return "python3"


def _read(name):
    path = NB_DIR / f"{name}.py"
    assert path.exists(), f"missing notebook source {path}"
    return jupytext.read(path, fmt="py:percent")


def _execute(name, kernel, tmp_path, monkeypatch):
    nb = _read(name)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert QUICK_LINE in first.source
    monkeypatch.setenv("LIMITS_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # the kernel imports the checkout under test, whatever else is installed
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    monkeypatch.chdir(tmp_path)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name=kernel,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()          # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    assert not (tmp_path / "figures").exists(), "notebook wrote into figures/ of the working directory"
    return nb


def test_notebook_sources_are_valid_percent_notebooks():
    """Every source parses into a valid notebook with markdown and code cells, the quick switch in its
    first code cell, the python3 kernel, and no cell that jupytext would read as raw text."""
    sources = sorted(p.stem for p in NB_DIR.glob("*.py"))
    assert sources == sorted(FAST + SLOW), f"notebooks/ holds {sources}; update FAST/SLOW"
    for name in FAST + SLOW:
        text = (NB_DIR / f"{name}.py").read_text(encoding="utf-8")
        assert "# %% [markdown]" in text and "\n# %%\n" in text, f"{name}: not in percent format"
        nb = _read(name)
        nb = nbformat.from_dict(nbformat.v4.upgrade(nb) if nb.nbformat_minor < 5 else nb)
        nbformat.validate(nb)
        kinds = {c.cell_type for c in nb.cells}
        assert kinds == {"markdown", "code"}, f"{name}: cell types {kinds}"
        assert nb.metadata["kernelspec"]["name"] == "python3"
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert QUICK_LINE in first.source, f"{name}: first code cell must read LIMITS_QUICK"
        assert nb.cells[-1].cell_type == "code" and "notebook wall time" in nb.cells[-1].source
        # the round trip text → notebook → text is the identity (the sources are canonical), up to the
        # version stamp of the jupytext that writes it
        def unstamped(t):
            return re.sub(r"(?m)^#\s+jupytext_version: .*\n", "", t)

        again = jupytext.writes(_read(name), fmt="py:percent")
        assert unstamped(again) == unstamped(text), f"{name}: not in canonical jupytext form"


def test_no_generated_notebooks_committed():
    """The .ipynb files are generated from the sources (notebooks/README.md); none is tracked."""
    proc = subprocess.run(["git", "ls-files", "notebooks"], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip("not a git checkout")
    tracked = [f for f in proc.stdout.split() if f.endswith(".ipynb")]
    assert not tracked, f"generated notebooks are tracked: {tracked}"


@pytest.mark.parametrize("name", FAST)
def test_notebook_runs(name, python3_kernel, tmp_path, monkeypatch):
    _execute(name, python3_kernel, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_seed_notebook_runs(name, python3_kernel, tmp_path, monkeypatch):
    _execute(name, python3_kernel, tmp_path, monkeypatch)
