"""limits._lazy.lazy_attributes: the ``__getattr__``/``__dir__`` of the lazy packages (limits, limits.kernels,
limits.nfd, limits.torch, limits.torch.zoo) — nothing named is imported before it is used, each name resolves to its
module's attribute (or the submodule, or a moved module), once, and unknown names raise the usual AttributeError."""
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from limits._lazy import lazy_attributes

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def pkg(tmp_path, monkeypatch):
    """A throw-away package ``lazypkg`` whose modules count their own imports."""
    root = tmp_path / "lazypkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text(
        "from limits._lazy import lazy_attributes\n"
        "__getattr__, __dir__ = lazy_attributes(__name__, globals(), exports={'f': 'a', 'g': 'a'},\n"
        "    submodules={'a': 'a', 'inner': 'sub.inner'}, wrap={'g': lambda v: (v, 'wrapped')})\n")
    (root / "a.py").write_text("import builtins\nbuiltins.LAZY_COUNT = getattr(builtins, 'LAZY_COUNT', 0) + 1\n"
                               "def f():\n    return 1\ndef g():\n    return 2\n")
    (root / "sub" / "__init__.py").write_text("")
    (root / "sub" / "inner.py").write_text("X = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for m in [m for m in sys.modules if m == "lazypkg" or m.startswith("lazypkg.")]:
        monkeypatch.delitem(sys.modules, m)
    import builtins

    monkeypatch.setattr(builtins, "LAZY_COUNT", 0, raising=False)
    yield importlib.import_module("lazypkg")
    for m in [m for m in sys.modules if m == "lazypkg" or m.startswith("lazypkg.")]:
        del sys.modules[m]


def test_names_resolve_once_on_first_use(pkg):
    import builtins

    assert "lazypkg.a" not in sys.modules and builtins.LAZY_COUNT == 0
    assert sorted(n for n in dir(pkg) if not n.startswith("_")) == ["a", "f", "g", "inner", "lazy_attributes"]
    f = pkg.f
    assert f() == 1 and "f" in vars(pkg) and pkg.f is f and pkg.a is sys.modules["lazypkg.a"]
    g = pkg.g
    assert g[1] == "wrapped" and g[0]() == 2 and pkg.g is g          # wrapped once, then a plain attribute
    assert pkg.inner.X == 3 and pkg.inner is sys.modules["lazypkg.sub.inner"]
    assert builtins.LAZY_COUNT == 1


def test_unknown_name_raises_the_usual_error(pkg):
    with pytest.raises(AttributeError, match=r"^module 'lazypkg' has no attribute 'nope'$"):
        pkg.nope
    assert not hasattr(pkg, "f_")


def test_conflicting_tables_are_refused():
    with pytest.raises(ValueError, match="both exported and submodules"):
        lazy_attributes("x", {}, exports={"a": "a"}, submodules=("a",))
    with pytest.raises(ValueError, match="wrapped but not exported"):
        lazy_attributes("x", {}, exports={"a": "b"}, wrap={"c": id})


@pytest.mark.parametrize("package, lazy", [("limits", "model"), ("limits.kernels", "optimal_rho"),
                                           ("limits.nfd", "train_particles"), ("limits.torch", "coord_check"),
                                           ("limits.torch.zoo", "factory")])
def test_the_packages_are_lazy(package, lazy):
    """Each package (limits.torch and its zoo without torch or transformers) imports without the modules it names;
    ``dir`` lists them; an unknown name's error names the package."""
    code = (f"import sys, {package} as p\n"
            f"print({lazy!r} in dir(p), 'torch' in sys.modules, 'transformers' in sys.modules,"
            " 'limits.checking' in sys.modules, 'limits.kernels.optimal' in sys.modules, 'limits.nfd.training' in"
            " sys.modules)\n"
            "try:\n    p.no_such_name\nexcept AttributeError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}).stdout.splitlines()
    assert out == ["True False False False False False", f"module '{package}' has no attribute 'no_such_name'"]


def test_kernels_and_nfd_resolve_their_lazy_names():
    import limits
    from limits.kernels import fluctuations, optimal
    from limits.nfd import training

    assert limits.kernels.optimal_rho is optimal.optimal_rho and limits.kernels.KernelFluctuations is \
        fluctuations.KernelFluctuations
    assert limits.kernels.kernel_fluctuations.__wrapped__ is fluctuations.kernel_fluctuations
    assert limits.nfd.train_particles is training.train_particles
    assert limits.mehler is importlib.import_module("limits.gaussian.mehler") and limits.mlp is limits.model.mlp
