"""The package's import graph, read from the source with :mod:`ast` (nothing is imported).

An edge ``a → b`` means module ``a`` imports module ``b`` somewhere (at module level or inside a
function: both count). ``from .x import y`` points at ``….x.y`` when that is a module, else at
``….x``; a module importing its own ancestor package only to reach a submodule (``from . import y``)
points at the submodule, since Python runs the ancestor's ``__init__`` first anyway.

``python -m limits.devtools.importgraph`` prints the cycles (none expected), the cross-module
private imports (none expected) and the package-level graph; ``--out docs/_static/architecture.txt``
writes the package-level graph as a layered text diagram (included by docs/architecture.rst).
"""
from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def module_files(root: Path = PACKAGE_ROOT) -> dict[str, Path]:
    """Dotted module name → source file for every ``.py`` under ``root`` (a package directory)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def is_package(name: str, files: dict[str, Path]) -> bool:
    return files[name].name == "__init__.py"


@dataclass(frozen=True)
class Import:
    """One imported name: ``importer`` reads ``name`` from module ``target`` (``name`` None: the
    module itself); ``line`` is where."""
    importer: str
    target: str
    name: str | None
    line: int


def _base(importer: str, node: ast.ImportFrom, files) -> str:
    if node.level == 0:
        return node.module or ""
    pkg = importer if is_package(importer, files) else importer.rpartition(".")[0]
    for _ in range(node.level - 1):
        pkg = pkg.rpartition(".")[0]
    return f"{pkg}.{node.module}" if node.module else pkg


def _nearest(name: str, files) -> str | None:
    while name and name not in files:
        name = name.rpartition(".")[0]
    return name or None


def imports(files: dict[str, Path] | None = None) -> list[Import]:
    """Every import of a package module by a package module (third-party imports are dropped)."""
    files = module_files() if files is None else files
    top = next(iter(files)).split(".")[0]
    out = []
    for mod, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == top:
                        target = _nearest(alias.name, files)
                        if target:
                            out.append(Import(mod, target, None, node.lineno))
            elif isinstance(node, ast.ImportFrom):
                base = _base(mod, node, files)
                if base.split(".")[0] != top:
                    continue
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if sub in files:
                        out.append(Import(mod, sub, None, node.lineno))
                    else:
                        target = _nearest(base, files)
                        if target:
                            out.append(Import(mod, target, alias.name, node.lineno))
    return out


def graph(files: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Module → set of modules it imports (self-imports and imports of one's own ancestors dropped)."""
    files = module_files() if files is None else files
    g = {m: set() for m in files}
    for imp in imports(files):
        if imp.target != imp.importer and not imp.importer.startswith(imp.target + "."):
            g[imp.importer].add(imp.target)
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(g[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def _private_attributes(files) -> list[Import]:
    """``mod._name`` where ``mod`` is a package module bound by an import in another module."""
    top = next(iter(files)).split(".")[0]
    out = []
    for mod, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        bound = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and _base(mod, node, files).split(".")[0] == top:
                base = _base(mod, node, files)
                bound.update({a.asname or a.name: f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in files})
            elif isinstance(node, ast.Import):
                bound.update({a.asname: a.name for a in node.names if a.asname and a.name in files})
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                    and node.attr.startswith("_") and not node.attr.startswith("__")
                    and bound[node.value.id] != mod):
                out.append(Import(mod, bound[node.value.id], node.attr, node.lineno))
    return out


def private_imports(files: dict[str, Path] | None = None) -> list[Import]:
    """Imports of a ``_private`` name (or a ``_private`` module) from another module, except a
    package's private module imported by the package itself or its own submodules; also ``mod._name``
    on a module imported from the package."""
    files = module_files() if files is None else files
    out = _private_attributes(files)
    for imp in imports(files):
        if imp.target == imp.importer:
            continue
        if imp.name is not None and imp.name.startswith("_") and not imp.name.startswith("__"):
            out.append(imp)
            continue
        leaf = imp.target.rpartition(".")[2]
        if imp.name is None and leaf.startswith("_") and not leaf.startswith("__"):
            owner = imp.target.rpartition(".")[0]          # the package the private module belongs to
            if not (imp.importer == owner or imp.importer.startswith(owner + ".")):
                out.append(imp)
    return out


def package_of(module: str, depth: int = 2) -> str:
    """The package a module belongs to at the given depth (``limits.kernels.nngp`` → ``limits.kernels``)."""
    return ".".join(module.split(".")[:depth])


def package_graph(g: dict[str, set[str]], files, depth: int = 2) -> dict[str, set[str]]:
    """The graph collapsed onto packages (and top-level modules) ``depth`` dots deep."""
    pg = {}
    for a, targets in g.items():
        pa = package_of(a, depth)
        pg.setdefault(pa, set())
        for b in targets:
            pb = package_of(b, depth)
            if pb != pa and not pa.startswith(pb + ".") and pb != package_of(a, 1):
                pg[pa].add(pb)
    return pg


def levels(pg: dict[str, set[str]]) -> dict[str, int]:
    """Layer of each node: 0 without imports, else 1 + the highest layer it imports (the members of a
    cycle share one layer)."""
    comps = {n: (n,) for n in pg}
    for c in cycles(pg):
        for n in c:
            comps[n] = tuple(c)
    memo: dict[tuple, int] = {}

    def level(comp):
        if comp not in memo:
            memo[comp] = -1                                  # guard (the condensed graph is acyclic)
            deps = {comps[d] for n in comp for d in pg[n] if d in pg} - {comp}
            memo[comp] = 1 + max((level(d) for d in deps), default=-1)
        return memo[comp]

    return {n: level(comps[n]) for n in pg}


def foundation(pg: dict[str, set[str]], files) -> set[str]:
    """Top-level modules (not packages) that import only other such modules: the shared base layer."""
    mods = {n for n in pg if not is_package(n, files) and n.count(".") == 1 and not n.endswith("__main__")}
    changed = True
    while changed:
        bad = {n for n in mods if not pg[n] <= mods}
        changed = bool(bad)
        mods -= bad
    return mods


def diagram(pg: dict[str, set[str]], files) -> str:
    """The package graph as text, one layer per line block, highest first (deterministic)."""
    base = foundation(pg, files)
    top = {n for n in pg if n not in base}
    sub = {n: {d for d in pg[n] if d in top} for n in top}
    lev = levels(sub)
    short = lambda n: n.split(".", 1)[1] if "." in n else n  # noqa: E731
    ROOT = min(pg, key=len)                                       # the package itself (its __init__)
    cyc = {n: c for c in cycles(sub) for n in c}
    lines = ["limits: import graph of the packages (generated by",
             "`python -m limits.devtools.importgraph --out docs/_static/architecture.txt`; do not edit).",
             "A → B: some module of A imports some module of B (at module level or inside a function).",
             "Layer n imports only layers below n; ⇄ marks packages that import each other.",
             ""]
    label = {n: ("__init__" if n == ROOT else short(n))
             + (" ⇄ " + ", ".join(short(m) for m in cyc[n] if m != n) if n in cyc else "") for n in pg}
    width = max(len(v) for v in label.values()) + 2
    for k in range(max(lev.values()), -1, -1):
        lines.append(f"layer {k}")
        for n in sorted(m for m in top if lev[m] == k):
            deps = ", ".join(short(d) for d in sorted(sub[n])) or "-"
            found = ", ".join(short(d) for d in sorted(pg[n] & base))
            lines.append(f"  {label[n]:<{width}}→ {deps}" + (f"   [+ {found}]" if found else ""))
        lines.append("")
    lines.append("foundation (imported from every layer; imports only foundation modules):")
    for n in sorted(base):
        deps = ", ".join(short(d) for d in sorted(pg[n])) or "-"
        lines.append(f"  {label[n]:<{width}}→ {deps}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m limits.devtools.importgraph", description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the package-level graph as a text diagram to this file")
    args = ap.parse_args(argv)
    files = module_files()
    g = graph(files)
    pg = package_graph(g, files)
    if args.out:
        from ..results import atomic_write_text

        atomic_write_text(args.out, diagram(pg, files))
    cyc = cycles(g)
    priv = private_imports(files)
    print(f"{len(files)} modules, {sum(map(len, g.values()))} import edges; "
          f"{len(pg)} packages/top-level modules, {sum(map(len, pg.values()))} package edges")
    print(f"cycles: {len(cyc)}")
    for c in cyc:
        print("  " + " ↔ ".join(c))
    print(f"cross-module private imports: {len(priv)}")
    for p in priv:
        print(f"  {p.importer}:{p.line} imports {p.target}{'.' + p.name if p.name else ''}")
    for a in sorted(pg):
        print(f"{a} → {', '.join(sorted(pg[a])) or '-'}")
    return 1 if cyc or priv else 0


if __name__ == "__main__":
    sys.exit(main())
