"""Cold start: importing limits and computing a first closed-form kernel, a cross kernel and loading
limits.predict / limits.finite pull in neither scipy.optimize, scipy.special, scipy.stats nor sympy,
matplotlib, xarray, dask or joblib (their import costs ~0.1–0.5 s each; benchmarks/bench_cli.py times the
cold start). scipy.optimize is imported by the functions that solve (fixed points, noise="auto")."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("scipy.optimize", "scipy.special", "scipy.stats", "sympy", "matplotlib", "xarray", "dask", "joblib")


def _loaded(code):
    code += f"\nimport sys\nprint(sorted(m for m in sys.modules if m.startswith({HEAVY!r})))\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""}).stdout.strip().splitlines()[-1]


def test_first_kernel_and_predict_import_no_heavy_module():
    code = ("import numpy as np, limits\n"
            "X = np.random.default_rng(0).standard_normal((20, 5))\n"
            "for act in ('relu', 'erf', 'gelu'):\n"
            "    m = limits.mlp(5, 3, activation=act)\n"
            "    limits.kernels.kernel(m, X); limits.kernels.kernel(m, X, X[:3])\n"
            "import limits.predict, limits.finite, limits.model\n")
    assert _loaded(code) == "[]"


def test_heavy_modules_load_when_used():
    """The lazy imports are still there when needed: a fixed point imports scipy.optimize, erf scipy.special."""
    code = ("import limits, numpy as np\n"
            "limits.kernels.fixed_point('tanh', 1.5, 0.05)\n"
            "limits.activation('erf').phi(np.array([0.5]))\n")
    out = _loaded(code)
    assert "'scipy.optimize'" in out and "'scipy.special'" in out


def test_symmetric_kernel_of_a_model_leaves_the_spectra_uncomputed():
    """``kernel(m, X)`` reports explosions only: it must not force the lazy spectral diagnostics of the
    recursion (two O(P³) factorisations and the scipy.linalg import above MAX_EIG_P inputs)."""
    from limits.kernels.diagnostics import MAX_EIG_P

    P = MAX_EIG_P + 50
    code = ("import numpy as np, limits, sys\n"
            f"X = np.random.default_rng(0).standard_normal(({P}, 5))\n"
            "r = limits.kernels.kernel(limits.mlp(5, 3, activation='gelu'), X)\n"
            "print('linalg', 'scipy.linalg' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}).stdout
    assert "linalg False" in out, out
