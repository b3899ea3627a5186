"""Execute every notebook in notebooks/ (quick mode) and fail on any cell error.

Each notebook runs with ``LIMITS_QUICK=1`` in a fresh temporary working directory (no figures/
pollution), kernel ``python3`` (ipykernel; installed for the user by the fixture when no such
kernelspec is visible), 300 s per-cell timeout. The tour is part of the default suite; the seed
notebooks are marked slow (together they take a few minutes on a loaded 2-core machine).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NB_DIR = Path(__file__).resolve().parent.parent / "notebooks"
FAST = ["tour"]
SLOW = ["seed000_pc_width_depth", "seed001_mupc_hessian", "seed002_nfd", "seed003_mup_for_pc",
        "seed004_residual_response"]


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


def _execute(name, kernel, tmp_path, monkeypatch):
    path = NB_DIR / f"{name}.ipynb"
    assert path.exists(), f"missing notebook {path}"
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert 'QUICK = os.environ.get("LIMITS_QUICK", "1") == "1"' in first.source
    monkeypatch.setenv("LIMITS_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name=kernel,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()          # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    assert not (tmp_path / "figures").exists(), "notebook wrote into figures/ of the working directory"
    return nb


def test_notebooks_stored_without_outputs():
    for name in FAST + SLOW:
        path = NB_DIR / f"{name}.ipynb"
        if not path.exists():
            pytest.fail(f"missing notebook {path}")
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for c in nb.cells:
            if c.cell_type == "code":
                assert not c.outputs and c.execution_count is None, f"{name}: stored with outputs"


@pytest.mark.parametrize("name", FAST)
def test_notebook_runs(name, python3_kernel, tmp_path, monkeypatch):
    _execute(name, python3_kernel, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_seed_notebook_runs(name, python3_kernel, tmp_path, monkeypatch):
    _execute(name, python3_kernel, tmp_path, monkeypatch)
