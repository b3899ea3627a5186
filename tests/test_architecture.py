"""The package's architecture, read from the source (limits/devtools/importgraph.py; docs/architecture.rst):
no import cycles between modules, no private name imported across modules, theory never imports the
finite simulators, the command line imports nothing heavy for ``--help``, public names survive every
submodule import, and the committed diagram is the one the source gives."""
import importlib
import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from limits.devtools import importgraph as ig

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def files():
    return ig.module_files()


@pytest.fixture(scope="module")
def graph(files):
    return ig.graph(files)


def _package(tmp_path, sources: dict) -> dict:
    for rel, text in sources.items():
        p = tmp_path / "pkg" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return ig.module_files(tmp_path / "pkg")


def test_graph_finds_cycles_through_function_level_and_relative_imports(tmp_path):
    files = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from .sub import b\n",
        "sub/__init__.py": "",
        "sub/b.py": "def f():\n    from ..c import g\n",
        "c.py": "import pkg.a\nfrom pkg.sub.b import _hidden\n",
        "d.py": "from . import c\n",
    })
    g = ig.graph(files)
    assert g["pkg.a"] == {"pkg.sub.b"} and g["pkg.sub.b"] == {"pkg.c"} and g["pkg.d"] == {"pkg.c"}
    assert ig.cycles(g) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    assert [(p.importer, p.name) for p in ig.private_imports(files)] == [("pkg.c", "_hidden")]
    # a private module may be used inside its own package, not from outside it
    files = _package(tmp_path, {"sub/_impl.py": "", "sub/e.py": "from . import _impl\n", "f.py": "from .sub import _impl\n",
                                "g.py": "from .sub import b as bb\n\ndef h():\n    return bb._state, bb.public\n"})
    assert {(p.importer, p.target, p.name) for p in ig.private_imports(files)} == {
        ("pkg.c", "pkg.sub.b", "_hidden"), ("pkg.f", "pkg.sub._impl", None), ("pkg.g", "pkg.sub.b", "_state")}


# module cycles still allowed: none (ModelError lives in the foundation, limits.errors; torch.network is
# handed the Model instead of reading it back)
KNOWN_CYCLES = []


def test_no_import_cycles(graph):
    assert ig.cycles(graph) == KNOWN_CYCLES, "import cycles (python -m limits.devtools.importgraph)"


# package pairs that still import each other, with the reason; nothing else may join them. None: the depth-cost
# refusal lives on the kernel side (limits.kernels.modelview), available_memory in the foundation (limits.memory),
# and Model.to_torch reaches the optional extra through the allowlist of limits._plugins.optional_extra.
KNOWN_PACKAGE_CYCLES = []


def test_model_imports_neither_kernels_nor_torch(graph):
    """The Model is the description every theory reads: it imports no theory and no optional extra."""
    assert not {b for b in graph["limits.model"] if b.startswith(("limits.kernels", "limits.torch"))}


def test_packages_form_layers(files, graph):
    """No two packages import each other (directly or through others) beyond the listed exceptions."""
    assert ig.cycles(ig.package_graph(graph, files)) == KNOWN_PACKAGE_CYCLES


def test_no_private_names_imported_across_modules(files):
    found = [f"{p.importer}:{p.line} imports {p.target}{'.' + p.name if p.name else ''}"
             for p in ig.private_imports(files)]
    assert found == [], "make shared helpers public (and documented) within their package:\n" + "\n".join(found)


# limits.torch needs the optional extra torch: without it its modules are not imported here (its own tests,
# tests/torch_bridge, run once the extra is installed; CI installs it after the main suite)
HAVE_TORCH = importlib.util.find_spec("torch") is not None


def _needs_missing_torch(module_name):
    return not HAVE_TORCH and (module_name == "limits.torch" or module_name.startswith("limits.torch."))


def test_every_imported_name_exists(files):
    """``from .x import y`` inside the package names something x defines (catches renames that missed a caller,
    also in function-level imports that no test runs)."""
    missing = []
    for imp in ig.imports(files):
        if imp.name in (None, "*") or _needs_missing_torch(imp.target):
            continue
        mod = importlib.import_module(imp.target)
        if not hasattr(mod, imp.name) and f"{imp.target}.{imp.name}" not in files:
            missing.append(f"{imp.importer}:{imp.line} imports {imp.target}.{imp.name}")
    assert missing == []


THEORY = ("limits.gaussian", "limits.activations", "limits.params", "limits.kernels", "limits.pc", "limits.dmft",
          "limits.nfd", "limits.predict")


def test_layers(graph):
    """Theory never imports the finite simulators; nothing imports the command line; devtools is not used
    by the package."""
    pk = lambda m: ig.package_of(m)  # noqa: E731
    bad = [(a, b) for a, targets in graph.items() for b in targets
           if (pk(a) in THEORY and pk(b) == "limits.finite")
           or (pk(b) == "limits.cli" and pk(a) not in ("limits.cli", "limits.__main__"))
           or (pk(b) == "limits.devtools" and pk(a) != "limits.devtools")]
    assert bad == []


def test_public_names_survive_importing_every_submodule():
    import limits

    for info in pkgutil.walk_packages(limits.__path__, "limits."):
        if not _needs_missing_torch(info.name):
            importlib.import_module(info.name)
    from limits.checking.core import CheckResult, check

    assert limits.check is check and callable(limits.check) and limits.CheckResult is CheckResult
    assert callable(limits.gaussian.gram) and callable(limits.gaussian.expect2) and callable(limits.activation)
    assert callable(limits.params.classify) and callable(limits.params.named)
    assert callable(limits.cli.main) and limits.mehler is importlib.import_module("limits.gaussian.mehler")
    assert limits.activations.activation("erf") is limits.activation("erf")


HEAVY = ("sympy", "scipy.stats", "matplotlib", "xarray", "dask")


def test_help_imports_no_heavy_module():
    """``limits --help`` and every ``limits CMD --help`` answer without sympy, scipy.stats, matplotlib,
    xarray or dask (their CPU time is benchmarked in benchmarks/bench_cli.py)."""
    code = ("import contextlib, io, sys\n"
            "from limits.cli import build_parser, main\n"
            "sub = next(a for a in build_parser()._actions if a.__class__.__name__ == '_SubParsersAction')\n"
            "for argv in [['--help']] + [[c, '--help'] for c in sub.choices]:\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        try:\n"
            "            main(argv)\n"
            "        except SystemExit:\n"
            "            pass\n"
            f"print(len(sub.choices), sorted(m for m in sys.modules if m.startswith({HEAVY!r})))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}).stdout.split(" ", 1)
    assert int(out[0]) > 15 and out[1].strip() == "[]"


def test_committed_diagram_is_up_to_date(files, graph):
    committed = (ROOT / "docs" / "_static" / "architecture.txt").read_text(encoding="utf-8")
    assert committed == ig.diagram(ig.package_graph(graph, files), files), (
        "run: python -m limits.devtools.importgraph --out docs/_static/architecture.txt")
