"""Declared functions: what a user may name without allowing code of their own — an allowlist that a
function joins by a decorator beside its definition (as pytest's markers or numpy's dispatch tables), so a
new module, whatever it writes, joins nothing by accident::

    from ..registry import sweep_computation

    @sweep_computation
    def critical_line(activation, sigma_b2=0.0): ...

Kinds: ``"sweep"`` — pure computations returning numbers, arrays or results, named by a sweep file's
``function`` or ``[inputs] function`` (``limits sweep functions`` lists them); ``"factory"`` — torch
networks ``width -> nn.Module`` for ``--factory``; ``"data"`` — ``() -> (X, Y)`` for ``--data``.

The rule, checked when a function is declared (:func:`check_signature`): a plain public function defined at
module level in ``limits`` none of whose parameters takes a path — none named like one (``path``, ``file``,
``dir``, ``out``, ``store``, ``save``, … or ``model``, which also accepts a model file) or annotated
``Path``/``PathLike``; a ``**kwargs`` is allowed only with ``forwards=`` naming the callables it goes to, whose
parameters obey the same rule. So nothing a user names this way writes (or reads) a file it is given.

Declaring imports nothing heavy. :data:`MODULES` lists the modules that declare, per kind: :func:`entries`
imports them (only to list); resolving a name imports just the module named (:mod:`limits.resolver`).
``tests/test_registry.py`` checks :data:`MODULES` against the decorators in the source.
"""
from __future__ import annotations

import dataclasses
import re
import types

KINDS = {"sweep": "sweep computation", "factory": "torch model factory", "data": "torch data function"}

# the modules that declare functions, per kind (tests/test_registry.py keeps this equal to the source)
MODULES = {
    "sweep": ("limits.dmft", "limits.finite.data", "limits.finite.gia", "limits.finite.residual_response",
              "limits.gaussian.engine", "limits.kernels.fluctuations", "limits.kernels.nngp",
              "limits.kernels.optimal", "limits.kernels.response", "limits.kernels.signal", "limits.nfd.gia",
              "limits.nfd.kernel_ode", "limits.nfd.sde", "limits.nfd.training", "limits.params.depth",
              "limits.params.named", "limits.pc.equilibrium", "limits.pc.inference", "limits.pc.spectra"),
    "factory": ("limits.torch.demos", "limits.torch.handwritten", "limits.torch.suite", "limits.torch.transfer_demos"),
    "data": ("limits.torch.demos", "limits.torch.handwritten", "limits.torch.suite", "limits.torch.transfer_demos"),
}

# parameter names that take a path, a file or a directory (``model`` too: a Model argument also accepts a
# model file, limits.model.as_model)
PATH_PARAMETER = re.compile(
    r"^(path|paths|file|files|filename|filenames|fname|dir|dirs|directory|folder|out|outdir|output|outfile|"
    r"store|save|dest|destination|cache|log|logfile|checkpoint|model)$"
    r"|_(path|paths|file|files|filename|filenames|dir|dirs|directory|folder|store|outdir|outfile)$"
    r"|^(save|write|load|read)_")


@dataclasses.dataclass(frozen=True)
class Entry:
    fn: object
    kind: str
    name: str               # module.qualname where it is defined
    forwards: tuple = ()    # the callables its **kwargs go to
    not_paths: tuple = ()   # (parameter, why it is not a path)

    @property
    def summary(self) -> str:
        doc = (self.fn.__doc__ or "").strip()
        return " ".join(doc.split("\n\n")[0].split())


_ENTRIES: dict = {}         # id(fn) -> Entry (the function itself is kept alive by the Entry)


def _path_annotation(p) -> bool:
    a = p.annotation
    text = a if isinstance(a, str) else getattr(a, "__name__", "") + " " + str(a)
    return bool(re.search(r"\b(Path|PathLike|PurePath)\b", text))


def check_signature(fn, forwards=(), not_paths=None, _seen=None) -> None:
    """Raise ``TypeError`` when a parameter of ``fn`` (or of the callables its ``**kwargs`` go to) takes a
    path (module docstring). ``not_paths``: ``{name: reason}`` for a parameter whose name looks like a path
    but is not one (``store_path=True`` keeps a path of an SDE in memory), stated where it is declared."""
    import inspect

    _seen = set() if _seen is None else _seen
    if id(fn) in _seen:
        return
    _seen.add(id(fn))
    name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"
    sig = inspect.signature(fn)
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            if not forwards:
                raise TypeError(f"{name}: **{p.name} needs forwards=(the callables it goes to) to be declared")
            for target in forwards:
                check_signature(target, (), None, _seen)
            continue
        if p.name in (not_paths or {}) and not _path_annotation(p):
            continue
        if PATH_PARAMETER.search(p.name) or _path_annotation(p) or type(p.default).__name__.endswith("Path"):
            raise TypeError(f"{name}: parameter {p.name!r} takes a path; a declared function may not read or "
                            "write files it is given")


def _declare(kind, fn, forwards, not_paths):
    if not isinstance(fn, types.FunctionType) or fn.__name__.startswith("_") or fn.__qualname__ != fn.__name__:
        raise TypeError(f"only a public function defined at module level can be declared, got {fn!r}")
    if not fn.__module__.startswith("limits."):
        raise TypeError(f"{fn.__module__}.{fn.__qualname__}: only functions of limits are declared here")
    if not all(isinstance(r, str) and r for r in (not_paths or {}).values()):
        raise TypeError(f"{fn.__qualname__}: not_paths maps each parameter to the reason it is not a path")
    check_signature(fn, tuple(forwards), not_paths)
    _ENTRIES[id(fn)] = Entry(fn, kind, f"{fn.__module__}.{fn.__qualname__}", tuple(forwards),
                             tuple((not_paths or {}).items()))
    return fn


def _decorator(kind):
    def declare(fn=None, *, forwards=(), not_paths=None):
        if fn is None:
            return lambda f: _declare(kind, f, forwards, not_paths)
        return _declare(kind, fn, forwards, not_paths)

    declare.__name__ = declare.__qualname__ = {"sweep": "sweep_computation", "factory": "torch_factory",
                                               "data": "torch_data"}[kind]
    declare.__doc__ = f"Declare a {KINDS[kind]} (module docstring for the rule); returns the function unchanged."
    return declare


sweep_computation = _decorator("sweep")
torch_factory = _decorator("factory")
torch_data = _decorator("data")


def declared(obj, kind: str) -> bool:
    """Whether ``obj`` itself was declared as a ``kind``."""
    e = _ENTRIES.get(id(obj))
    return e is not None and e.fn is obj and e.kind == kind


def declared_target(obj, kind: str):
    """The declared ``kind`` function ``obj`` is or wraps (``functools.wraps`` chains of limits, such as the
    ``model=`` entry points of :func:`limits.model.with_model`), else None."""
    for _ in range(8):
        if declared(obj, kind):
            return obj
        obj = getattr(obj, "__wrapped__", None)
        if obj is None:
            return None
    return None


def public_name(entry: Entry) -> str:
    """The shortest dotted name under which the declared function is reachable (``limits.kernels.critical_line``
    for ``limits.kernels.signal.critical_line``)."""
    import importlib

    parts = entry.name.split(".")[:-1]
    attr = entry.fn.__name__
    for i in range(2, len(parts) + 1):
        mod = importlib.import_module(".".join(parts[:i]))
        try:
            obj = getattr(mod, attr)
        except AttributeError:
            continue
        if declared_target(obj, entry.kind) is entry.fn:
            return f"{'.'.join(parts[:i])}.{attr}"
    return entry.name


def entries(kind: str) -> list:
    """Every declared ``kind`` function (imports the modules of :data:`MODULES`; those that need an optional
    extra that is not installed are skipped), sorted by public name."""
    import importlib
    import importlib.util

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    for module in MODULES[kind]:
        if module.startswith("limits.torch") and importlib.util.find_spec("torch") is None:
            continue
        importlib.import_module(module)
    return sorted((e for e in _ENTRIES.values() if e.kind == kind), key=public_name)


__all__ = ["KINDS", "MODULES", "Entry", "sweep_computation", "torch_factory", "torch_data", "declared",
           "declared_target", "entries", "public_name", "check_signature", "PATH_PARAMETER"]
