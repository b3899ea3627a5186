"""The declared functions (limits/registry.py, issue 31 item 1): the list of declaring modules equals the
decorators in the source, every declared function obeys the rule (no path parameter), is reachable by its
public name and is listed by `limits sweep functions`; declaring imports nothing heavy."""
import ast
import importlib.util
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from limits import registry
from limits.cli import main
from limits.resolver import resolve

ROOT = Path(__file__).resolve().parents[1]
HAVE_TORCH = importlib.util.find_spec("torch") is not None
DECORATORS = {"sweep_computation": "sweep", "torch_factory": "factory", "torch_data": "data"}


def _declaring_modules_in_source() -> dict:
    """{kind: {module}} of every function decorated with a registry decorator, read from the source."""
    found = {k: set() for k in registry.KINDS}
    for path in (ROOT / "limits").rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
                if name in DECORATORS:
                    found[DECORATORS[name]].add(module)
    return found


def test_declaring_modules_are_listed():
    """registry.MODULES (what `limits sweep functions` imports) names exactly the modules that declare."""
    found = _declaring_modules_in_source()
    for kind in registry.KINDS:
        assert set(registry.MODULES[kind]) == found[kind], (kind, set(registry.MODULES[kind]) ^ found[kind])


@pytest.mark.parametrize("kind", sorted(registry.KINDS))
def test_every_declared_function_obeys_the_rule(kind):
    if kind != "sweep" and not HAVE_TORCH:
        pytest.skip("the torch demos need the optional extra")
    entries = registry.entries(kind)
    assert len(entries) >= (40 if kind == "sweep" else 2)
    for e in entries:
        registry.check_signature(e.fn, e.forwards, dict(e.not_paths))  # the rule, again, on the live object
        for p in inspect.signature(e.fn).parameters.values():
            assert p.kind is p.VAR_KEYWORD or not registry.PATH_PARAMETER.search(p.name) or \
                p.name in dict(e.not_paths)
        assert e.summary, f"{e.name}: a declared function needs a docstring (its line in `limits sweep functions`)"
        name = registry.public_name(e)
        module, attr = name.rsplit(".", 1)
        spec = name if kind == "sweep" else f"{module}:{attr}"
        assert resolve(spec, kind=kind, syntax="dotted" if kind == "sweep" else "colon") is e.fn, name


def test_the_documented_examples_are_declared():
    """Every limits function a documented sweep names (docs/sweeps/*.toml, docs/sweep.rst, README, the tests'
    sweep files) is a declared sweep computation."""
    import re

    docs = ROOT / "docs"
    texts = [p.read_text() for p in [*(docs / "sweeps").glob("*.toml"), *docs.glob("*.md"), ROOT / "README.md",
                                     *(ROOT / "tests" / "sweep").glob("*.py")]]
    names = {m for t in texts for m in re.findall(r'function = "(limits\.[A-Za-z0-9_.]+)"', t)}
    assert {"limits.kernels.critical_line", "limits.dmft.solve", "limits.dmft.toy_task",
            "limits.kernels.response"} <= names
    for n in names:
        assert resolve(n) is not None


def test_the_rule_refuses_path_parameters():
    def ok(X, depth, activation="erf", sigma_w2_out=None, d_out=1, store_gb=0.5):
        """fine"""

    registry.check_signature(ok)
    for src in ("def f(x, path): pass", "def f(x, out=None): pass", "def f(x, *, store=None): pass",
                "def f(model, X): pass", "def f(x, save_to=None): pass", "def f(x, cache_dir=None): pass",
                "def f(x, filename='a'): pass", "def f(x, dest: 'Path' = None): pass", "def f(x, where: 'os.PathLike'): pass",
                "def f(x, **kw): pass"):
        ns = {}
        exec(src, ns)                      # noqa: S102 — test fixtures written here
        with pytest.raises(TypeError):
            registry.check_signature(ns["f"])
    ns = {}
    exec("def g(x, y=0): pass\ndef f(x, **kw): return g(x, **kw)\ndef h(x, out=None): pass\n"
         "def k(x, **kw): return h(x, **kw)\ndef m(x, store_path=True): pass", ns)
    registry.check_signature(ns["f"], forwards=(ns["g"],))
    with pytest.raises(TypeError):
        registry.check_signature(ns["k"], forwards=(ns["h"],))          # forwards to a file writer
    registry.check_signature(ns["m"], not_paths={"store_path": "a flag"})
    with pytest.raises(TypeError, match="module level|public"):
        registry.sweep_computation(lambda x: x)


def test_cli_lists_the_registry(capsys):
    assert main(["sweep", "functions"]) == 0
    out = capsys.readouterr().out
    assert "limits.kernels.critical_line(activation, sigma_b2=0.0)" in out and "limits.dmft.solve(" in out
    assert "write_tiles" not in out and "kernel_blocked" not in out and "kernel_tiles" not in out
    assert main(["sweep", "functions", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == {registry.public_name(e) for e in registry.entries("sweep")}
    assert all(r["summary"] and r["signature"].startswith("(") for r in rows)


def test_declaring_and_resolving_import_nothing_heavy():
    """Importing the registry and the resolver, and resolving a name, import only the module named — not
    every declaring module, nor sympy/scipy.stats/matplotlib/xarray/dask/torch."""
    code = ("import sys\nimport limits.registry, limits.resolver\n"
            "limits.resolver.resolve('limits.kernels.critical_line')\n"
            "heavy = ('sympy', 'scipy.stats', 'matplotlib', 'xarray', 'dask', 'torch', 'limits.pc', 'limits.dmft',"
            " 'limits.nfd', 'limits.finite', 'limits.params')\n"
            "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}).stdout.strip()
    assert out == "[]", out
