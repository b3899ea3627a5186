"""Parameter grids of a sweep: product axes, zipped axes, fixed keywords and a ``seed`` axis.

A grid point is the keyword set passed to the swept function. Its position is a multi-index
``(i_1, …, i_D)`` over the dims (product axes in the order given, then one dim per zipped
group, then ``seed``), flattened in C order to the point's *flat index*. Per-point seeds come
from ``numpy.random.SeedSequence(root).spawn`` and are chosen by grid index, never by the order
in which points run, so a point's result does not depend on order, chunking or backend::

    seed_by="point"      child = SeedSequence(root).spawn(n_points)[flat index]   (independent points)
    seed_by="replicate"  child = SeedSequence(root).spawn(n_seeds)[seed index]    (common random numbers
                                                                                 across parameters)

The integer passed to the function is ``child.generate_state(1, uint64)[0]``.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import math
import numbers
import re
from typing import Any, Iterator

import numpy as np

SEED_DIM = "seed"


def _scalar(v, name):
    """A JSON-able scalar parameter value (numpy scalars become Python ones)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        v = float(v)
        if not math.isfinite(v):
            raise ValueError(f"grid axis {name!r}: non-finite value {v}")
        return v
    raise ValueError(f"grid axis {name!r}: values must be numbers, strings or bools, got {type(v).__name__}")


def _values(vals, name) -> tuple:
    if isinstance(vals, (str, bytes)) or not hasattr(vals, "__iter__"):
        raise ValueError(f"grid axis {name!r}: give a list of values, got {vals!r}")
    out = tuple(_scalar(v, name) for v in (np.asarray(vals).tolist() if isinstance(vals, np.ndarray) else vals))
    if not out:
        raise ValueError(f"grid axis {name!r} is empty")
    return out


# names of the dataset's bookkeeping variables and of outputs' array dims: no coordinate may take them
RESERVED = ("failed", "n_seeds")
_DIM_NAME = re.compile(r"_dim_\d+$")


DIM_NAME = _DIM_NAME          # public within the package


def _check_name(name, what):
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"{what} names must be Python identifiers, got {name!r}")
    return name


def _check_coord(name, what):
    _check_name(name, what)
    if name in RESERVED or _DIM_NAME.search(name):
        raise ValueError(f"{what} {name!r}: the sweep dataset uses {', '.join(RESERVED)} and <output>_dim_<k> "
                         "for its own variables and dims; rename it")
    return name


@dataclasses.dataclass(frozen=True)
class Point:
    index: tuple            # multi-index over Grid.dims
    flat: int               # C-order flat index
    params: dict            # keyword arguments for the function (fixed + swept, without the seed)
    seed: int | None        # the seed passed as ``seed_arg`` (None without a seeds axis)
    seed_index: int | None


@dataclasses.dataclass(frozen=True)
class Grid:
    """``Grid(product={"width": [64, 128]}, zipped={"pt": {"sigma_w2": [...], "sigma_b2": [...]}},
    seeds=4, root=0, fixed={"activation": "erf"})``.

    ``product``: dim → values (Cartesian product). ``zipped``: dim → {param: values} (the params of
    one group vary together along one dim). ``seeds``: number of replicates (dim ``seed``), passed
    to the function as keyword ``seed_arg``. ``fixed``: keywords passed unchanged to every point
    (numbers, strings, arrays — anything the function accepts; arrays enter the point key by value).
    """
    product: dict = dataclasses.field(default_factory=dict)
    zipped: dict = dataclasses.field(default_factory=dict)
    seeds: int | None = None
    root: int = 0
    fixed: dict = dataclasses.field(default_factory=dict)
    seed_arg: str = "seed"
    seed_by: str = "point"

    def __post_init__(self):
        product = {_check_coord(k, "axis"): _values(v, k) for k, v in dict(self.product or {}).items()}
        zipped = {}
        for dim, group in dict(self.zipped or {}).items():
            _check_coord(dim, "zipped dim")
            if not isinstance(group, dict) or not group:
                raise ValueError(f"zipped dim {dim!r}: give a non-empty {{param: values}} table")
            g = {_check_coord(k, "axis"): _values(v, k) for k, v in group.items()}
            lens = {k: len(v) for k, v in g.items()}
            if len(set(lens.values())) != 1:
                raise ValueError(f"zipped dim {dim!r}: axes must have equal lengths, got {lens}")
            zipped[dim] = g
        fixed = dict(self.fixed or {})
        for k in fixed:
            _check_name(k, "fixed")
        if self.seeds is not None:
            if isinstance(self.seeds, bool) or not isinstance(self.seeds, numbers.Integral) or self.seeds < 1:
                raise ValueError(f"seeds must be a positive integer or None, got {self.seeds!r}")
            object.__setattr__(self, "seeds", int(self.seeds))
        if isinstance(self.root, bool) or not isinstance(self.root, numbers.Integral) or self.root < 0:
            raise ValueError(f"root must be a non-negative integer, got {self.root!r}")
        object.__setattr__(self, "root", int(self.root))
        if self.seed_by not in ("point", "replicate"):
            raise ValueError(f"seed_by must be 'point' or 'replicate', got {self.seed_by!r}")
        _check_name(self.seed_arg, "seed_arg")
        params = list(product) + [p for g in zipped.values() for p in g] + list(fixed)
        if self.seeds is not None:
            params.append(self.seed_arg)
        dup = {p for p in params if params.count(p) > 1}
        if dup:
            raise ValueError(f"grid: parameter(s) {sorted(dup)} given more than once")
        dims = list(product) + [d for d in zipped if d not in product]
        if len(dims) != len(product) + len(zipped) or SEED_DIM in dims:
            raise ValueError(f"grid: dim names must be distinct and not {SEED_DIM!r}: {list(product) + list(zipped)}")
        for d, g in zipped.items():
            if d in product or (d in params and d not in g):
                raise ValueError(f"zipped dim {d!r} clashes with a parameter of the same name")
        object.__setattr__(self, "product", product)
        object.__setattr__(self, "zipped", zipped)
        object.__setattr__(self, "fixed", fixed)

    # ---------------------------------------------------------------- shape
    @property
    def dims(self) -> tuple:
        d = list(self.product) + list(self.zipped)
        return tuple(d + ([SEED_DIM] if self.seeds is not None else []))

    @property
    def shape(self) -> tuple:
        s = [len(v) for v in self.product.values()] + [len(next(iter(g.values()))) for g in self.zipped.values()]
        return tuple(s + ([self.seeds] if self.seeds is not None else []))

    @property
    def n_points(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    def seed_of(self, index: tuple) -> int | None:
        if self.seeds is None:
            return None
        if self.seed_by == "replicate":
            key = (int(index[-1]),)
        else:
            key = (int(np.ravel_multi_index(index, self.shape)),)
        child = np.random.SeedSequence(self.root, spawn_key=key)      # = SeedSequence(root).spawn(n)[key]
        return int(child.generate_state(1, np.uint64)[0])

    def point(self, index: tuple) -> Point:
        index = tuple(int(i) for i in index)
        params = dict(self.fixed)
        k = 0
        for name, vals in self.product.items():
            params[name] = vals[index[k]]
            k += 1
        for group in self.zipped.values():
            for name, vals in group.items():
                params[name] = vals[index[k]]
            k += 1
        flat = int(np.ravel_multi_index(index, self.shape)) if self.shape else 0
        seed_index = index[-1] if self.seeds is not None else None
        return Point(index=index, flat=flat, params=params, seed=self.seed_of(index), seed_index=seed_index)

    def points(self) -> Iterator[Point]:
        for index in itertools.product(*(range(n) for n in self.shape)):
            yield self.point(index)

    def kwargs(self, point: Point) -> dict:
        kw = dict(point.params)
        if point.seed is not None:
            kw[self.seed_arg] = point.seed
        return kw

    # ---------------------------------------------------------------- description
    def coords(self) -> dict:
        """xarray coordinates: product dims, zipped params along their dim, seed indices."""
        c: dict[str, Any] = {name: (name, list(vals)) for name, vals in self.product.items()}
        for dim, group in self.zipped.items():
            for name, vals in group.items():
                c[name] = (dim, list(vals))
        if self.seeds is not None:
            c[SEED_DIM] = (SEED_DIM, list(range(self.seeds)))
        return c

    def to_dict(self) -> dict:
        """JSON description (fixed arrays are summarised by shape and dtype)."""
        fixed = {k: (v if isinstance(v, (bool, int, float, str, type(None)))
                     else {"array_shape": list(np.shape(v)), "dtype": str(np.asarray(v).dtype)})
                 for k, v in self.fixed.items()}
        return {"product": {k: list(v) for k, v in self.product.items()},
                "zipped": {d: {k: list(v) for k, v in g.items()} for d, g in self.zipped.items()},
                "seeds": self.seeds, "root": self.root, "seed_arg": self.seed_arg, "seed_by": self.seed_by,
                "fixed": fixed}

    def describe(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def as_grid(grid) -> Grid:
    """A :class:`Grid` from a Grid or a plain ``{param: values}`` dict (all product axes; the keys
    ``seeds``/``root``/``fixed``/``zipped`` keep their Grid meaning)."""
    if isinstance(grid, Grid):
        return grid
    if isinstance(grid, dict):
        g = dict(grid)
        special = {k: g.pop(k) for k in ("seeds", "root", "fixed", "zipped", "seed_arg", "seed_by") if k in g}
        product = g.pop("product", {})
        product = {**product, **g}
        return Grid(product=product, **special)
    raise ValueError(f"grid must be a limits.sweep.Grid or a dict of axes, got {type(grid).__name__}")
