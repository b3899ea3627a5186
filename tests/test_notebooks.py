"""Execute every notebook in notebooks/ (quick mode) and fail on any cell error.

The notebooks are plain-text sources in jupytext's percent format (``notebooks/NAME.py``: ``# %%``
code cells, ``# %% [markdown]`` text cells); they are read with ``jupytext`` and executed with
``nbclient``. Each runs with ``LIMITS_QUICK=1`` in a fresh temporary working directory (no figures/
pollution) with the checkout first on ``PYTHONPATH``, in a kernel of the interpreter running the tests (a kernelspec
the fixture writes to a temporary folder), 1800 s per-cell timeout (a hang bound). The tour is part of the default suite; the seed
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
def python3_kernel(tmp_path_factory):
    """A kernelspec of this very interpreter (``sys.executable -m ipykernel_launcher``), in a temporary folder put
    first on JUPYTER_PATH: the notebooks run with the packages under test — never with a ``python3`` kernelspec
    that the user's home or another environment happens to hold — and nothing is installed into the home."""
    import json

    pytest.importorskip("ipykernel")
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / "limits-tests"
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "limits tests", "language": "python"}))
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", os.pathsep.join([str(root)] + [p for p in [os.environ.get("JUPYTER_PATH")] if p]))
    from jupyter_client.kernelspec import KernelSpecManager

    assert KernelSpecManager().get_kernel_spec("limits-tests").argv[0] == sys.executable
    yield "limits-tests"
    mp.undo()


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
    # bounds for a hang, not for speed: a cell or a kernel start may take many times longer on a loaded machine
    client = nbclient.NotebookClient(nb, timeout=1800, startup_timeout=600, kernel_name=kernel,
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
