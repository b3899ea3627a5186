"""The data of a torch training command checked at the edge, before the first training step: one function,
:func:`check_data`, called by :func:`limits.torch.coord_check`, :func:`limits.torch.transfer` and the
``coord-check`` / ``transfer`` commands, so that a wrong pair, dtype, shape, number of features, class id,
non-finite value, unusable loss or batch size is the user's error — a ValueError naming ``--data`` (or the
argument) and what was expected — never a crash inside training.

What a pair (X, Y) must be, for the module ``m = factory(smallest size)``:

* X, Y: tensors or arrays of numbers (not None, text or Python objects), rows first, the same number of rows;
  floating X and Y finite (NaN/inf changes measure nothing); integers are ids (cast to int64);
* ``m(X)`` runs (floating X in the module's dtype): otherwise the first input layer says what it takes —
  Linear(d, N): floating rows (…, d); Embedding(V, N): integer ids in [0, V); Conv: (rows, channels, …);
* with the default loss, Y is either real targets with as many values as the output (reshaped to it) or
  integer class ids in [0, C) over the output's last axis (cross-entropy), one per output row;
* the loss at init is one finite number (targets of 1e30 overflow float32's squares);
* every parameter of ``m`` is finite (a NaN parameter is named, not mistaken for dropout).
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ..errors import elide
from .losses import default_loss

_INPUT_LAYERS = (nn.Embedding, nn.Linear, nn.modules.conv._ConvNd)


def pair(data, what="data", inputs_only=False):
    """(X, Y) of a pair, or (X, None) for inputs alone when ``inputs_only``; a ValueError naming ``what``."""
    expected = "a pair (X, Y) of arrays or tensors, rows first" + (" (or the inputs X alone)" if inputs_only else "")
    if data is None:
        raise ValueError(f"{what} is None; expected {expected}")
    if isinstance(data, (tuple, list)):
        if len(data) == 2:
            return data[0], data[1]
        raise ValueError(f"{what} is a {type(data).__name__} of {len(data)} item{'s' if len(data) != 1 else ''}; "
                         f"expected {expected}")
    if isinstance(data, dict):
        raise ValueError(f"{what} is a dict (keys {elide(str(sorted(map(str, data))), 80)}); expected {expected}")
    if inputs_only:
        return data, None
    raise ValueError(f"{what} is a {type(data).__name__}; expected {expected}")


def as_tensor(a, name, what="data") -> torch.Tensor:
    """``a`` as a tensor of numbers, rows first (integers as int64); a ValueError naming ``what`` and ``name``."""
    if a is None:
        raise ValueError(f"{what}: {name} is None; expected an array or tensor of numbers, rows first")
    if isinstance(a, (str, bytes)):
        raise ValueError(f"{what}: {name} is text ({elide(repr(a), 60)}), not an array of numbers")
    if isinstance(a, torch.Tensor):
        t = a.detach()
    else:
        try:
            arr = np.asarray(a)
        except (ValueError, TypeError) as exc:          # ragged lists and the like
            raise ValueError(f"{what}: {name} is not an array of numbers ({type(a).__name__}: "
                             f"{elide(str(exc).split('. ')[0], 100)}; rows of different lengths?)") from None
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{what}: {name} has dtype {arr.dtype} ({type(a).__name__}); expected floating-point "
                             "values or integer ids")
        if arr.dtype.kind == "u" and arr.size and arr.max() >= 2 ** 63:
            raise ValueError(f"{what}: {name} has unsigned ids ≥ 2^63")
        t = torch.as_tensor(arr.astype(np.int64) if arr.dtype.kind == "u" else arr)
    if t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"{what}: {name} has dtype {t.dtype}; expected floating-point values or integer ids")
    if t.ndim == 0 or t.shape[0] == 0:
        raise ValueError(f"{what}: {name} has shape {tuple(t.shape)}; expected rows first (at least one row)")
    if t.is_floating_point():
        bad = ~torch.isfinite(t)
        if bool(bad.any()):
            nan = int(torch.isnan(t).sum())
            raise ValueError(f"{what}: {name} has {int(bad.sum())} non-finite entries ({nan} NaN, "
                             f"{int(bad.sum()) - nan} ±inf) of {t.numel()}; training on them changes nothing "
                             "measurable — expected finite values")
        return t
    return t.to(torch.int64)


def nonfinite_parameters(module) -> list:
    """[(name, NaN count, ±inf count)] of the module's parameters that are not finite."""
    out = []
    for name, p in module.named_parameters():
        if p.is_floating_point():
            bad = ~torch.isfinite(p.detach())
            if bool(bad.any()):
                nan = int(torch.isnan(p.detach()).sum())
                out.append((name, nan, int(bad.sum()) - nan))
    return out


def check_parameters(module, who) -> None:
    """A ValueError naming the first parameters of ``module`` (built by ``who``) that are NaN or ±inf."""
    bad = nonfinite_parameters(module)
    if bad:
        parts = [f"{n!r} ({a} NaN, {b} ±inf)" for n, a, b in bad[:4]]
        raise ValueError(f"{who}: parameter{'s' if len(bad) > 1 else ''} {', '.join(parts)}"
                         f"{f' and {len(bad) - 4} more' if len(bad) > 4 else ''} not finite at init; no change "
                         "of a non-finite tensor can be measured — check the factory's init")


def expected_inputs(module) -> str:
    """What the module's first input layer (in registration order) takes, in words."""
    first = next((m for m in module.modules() if isinstance(m, _INPUT_LAYERS)), None)
    if isinstance(first, nn.Embedding):
        return f"integer token ids in [0, {first.num_embeddings}) for its Embedding({first.num_embeddings}, …)"
    if isinstance(first, nn.Linear):
        return f"floating-point rows of shape (rows, …, {first.in_features}) for its Linear({first.in_features}, …)"
    if isinstance(first, nn.modules.conv._ConvNd):
        nd = len(first.kernel_size)
        return (f"floating-point inputs of shape (rows, {first.in_channels}" + ", size" * nd
                + f") for its {type(first).__name__}({first.in_channels}, …)")
    return "inputs its forward accepts"


def _forward(module, X, what, who):
    """The module's output on X (train mode, no grad, torch's RNG untouched); a ValueError naming ``what``."""
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            out = module(X)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 — the user's module rejected the data: say what it expects
        ids = ""
        if not X.is_floating_point():
            ids = f", ids in [{int(X.min())}, {int(X.max())}]"
        raise ValueError(f"{what}: {who} fails on X of shape {tuple(X.shape)} ({str(X.dtype).removeprefix('torch.')}"
                         f"{ids}): {type(exc).__name__}: {elide(str(exc).splitlines()[0] if str(exc) else '', 160)} "
                         f"— it expects {expected_inputs(module)}") from None
    out = out[0] if isinstance(out, (tuple, list)) and out else out
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        raise ValueError(f"{who} returns {type(out).__name__}"
                         + (f" of dtype {out.dtype}" if isinstance(out, torch.Tensor) else "")
                         + "; the check trains on a floating-point output tensor (or a tuple whose first item is one)")
    if out.ndim == 0 or out.shape[0] != X.shape[0]:
        raise ValueError(f"{who} maps X of shape {tuple(X.shape)} to an output of shape {tuple(out.shape)}: the "
                         "output must keep the rows of X first")
    return out


def _check_targets(out, Y, what):
    """Y against the output for the default loss (module docstring)."""
    shape = tuple(out.shape)
    if Y.is_floating_point():
        if Y.shape[0] != shape[0] or Y.numel() != out.numel():
            raise ValueError(f"{what}: Y has shape {tuple(Y.shape)} but the module's output on X has shape {shape}; "
                             f"expected real targets of shape {shape} (or integer class ids of shape {shape[:-1]} "
                             "for cross-entropy)")
        return
    C = shape[-1] if len(shape) > 1 else 1
    n = out.numel() // C
    if len(shape) < 2 or Y.numel() != n:
        raise ValueError(f"{what}: Y holds integers, which are class ids for cross-entropy over the output's last "
                         f"axis ({C} classes at output shape {shape}): {n} ids expected, got shape {tuple(Y.shape)}; "
                         f"for regression give floating-point targets of shape {shape}")
    lo, hi = int(Y.min()), int(Y.max())
    if lo < 0 or hi >= C:
        raise ValueError(f"{what}: class ids must lie in [0, {C}) (the output's last axis), got [{lo}, {hi}]")


def _check_loss(loss, out, Y, what, custom):
    """The loss at init: one finite number."""
    try:
        v = loss(out, Y)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 — the user's loss (or its data) failed
        raise ValueError(f"{what}: loss(output, Y) at init failed ({type(exc).__name__}: "
                         f"{elide(str(exc).splitlines()[0] if str(exc) else '', 160)})") from None
    if not isinstance(v, torch.Tensor) or v.numel() != 1:
        raise ValueError(f"{'loss' if custom else what}: loss(output, Y) must return one number (a scalar tensor), "
                         f"got {type(v).__name__}" + (f" of shape {tuple(v.shape)}" if isinstance(v, torch.Tensor) else ""))
    value = float(v.detach())
    if not math.isfinite(value):
        big = f"; the largest |Y| is {float(Y.abs().max()):.3g}" if Y.is_floating_point() else ""
        raise ValueError(f"{what}: the loss at init is {value} in {str(out.dtype).removeprefix('torch.')}{big} — "
                         "no training step can be measured from it; scale the targets (or the inputs)")


def check_data(data, module, *, what="data", who=None, loss=None, inputs_only=False):
    """(X, Y) validated against ``module`` (module docstring), as tensors (integers int64, floats as given);
    Y is None when ``inputs_only`` allows inputs alone and none are given. ``what``: the option or argument
    named in errors (``--data``), ``who``: the module's origin (``factory(64)``); ``loss``: the training loss
    (None: :func:`limits.torch.losses.default_loss`)."""
    who = who or "the module"
    Xa, Ya = pair(data, what, inputs_only)
    X = as_tensor(Xa, "X", what)
    Y = None if Ya is None else as_tensor(Ya, "Y", what)
    if Y is not None and Y.shape[0] != X.shape[0]:
        raise ValueError(f"{what}: X has {X.shape[0]} rows and Y {Y.shape[0]}; expected one target row per input row")
    check_parameters(module, who)
    dtype = next((q.dtype for q in module.parameters() if q.is_floating_point()), torch.float32)
    Xm = X.to(dtype) if X.is_floating_point() else X
    for name, a, b in (("X", X, Xm), ("Y", Y, None if Y is None else Y.to(dtype) if Y.is_floating_point() else Y)):
        if a is not None and a.is_floating_point() and not bool(torch.isfinite(b).all()):
            raise ValueError(f"{what}: {name} has values beyond the range of the module's "
                             f"{str(dtype).removeprefix('torch.')} (largest |{name}| {float(a.abs().max()):.3g})")
    module.train()
    out = _forward(module, Xm, what, who)
    if not bool(torch.isfinite(out).all()):
        raise ValueError(f"{what}: {who}'s output on X is not finite at init ({int((~torch.isfinite(out)).sum())} "
                         f"entries; the largest |X| is {float(Xm.abs().max()) if X.is_floating_point() else 'ids'}): "
                         "no change could be measured")
    if Y is not None:
        if loss is None:
            _check_targets(out, Y, what)
        Yl = Y.to(out.dtype) if Y.is_floating_point() else Y
        _check_loss(loss or default_loss, out, Yl, what, loss is not None)
    return X, Y


def check_batch_size(batch_size, rows, what="batch_size"):
    """``batch_size`` as an int in [1, rows] (None: full batch)."""
    if batch_size is None:
        return None
    if isinstance(batch_size, bool) or not float(batch_size).is_integer() or int(batch_size) < 1:
        raise ValueError(f"{what} must be a positive integer (rows per step) or omitted for full batches, "
                         f"got {batch_size!r}")
    if int(batch_size) > rows:
        raise ValueError(f"{what} {int(batch_size)} exceeds the {rows} training rows; a step draws at most that "
                         "many (omit it for full batches)")
    return int(batch_size)


MAX_SEED = (2 ** 63 - 1) // 1_000_003 - 1024      # coord_check seeds torch with seed · 1 000 003 + s (int64)


def check_seed(seed, what="seed"):
    """``seed`` as an int in [0, MAX_SEED] (torch's generators take int64)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) <= MAX_SEED:
        raise ValueError(f"{what} must be an integer in [0, {MAX_SEED}], got {elide(repr(seed), 40)}")
    return int(seed)


def build_at(factory, width, depth=None):
    """``factory(width)`` (``factory(width, depth)`` with a depth) as a module, torch's RNG untouched; a
    factory returning (module, groups) gives its module."""
    from .apply_params import build_module

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        if depth is None:
            return build_module(factory, int(width))
        return build_module(lambda w: factory(w, int(depth)), int(width))


def check_factory_data(factory, width, data, *, depth=None, what="data", loss=None, inputs_only=False):
    """:func:`check_data` against ``factory(width)`` (``factory(width, depth)``; a Parameterised builds its own)."""
    if not callable(factory):
        raise ValueError(f"factory must be a callable width -> nn.Module, got {type(factory).__name__}")
    who = f"factory({int(width)}{'' if depth is None else f', {int(depth)}'})"
    return check_data(data, build_at(factory, width, depth), what=what, who=who, loss=loss, inputs_only=inputs_only)


__all__ = ["check_data", "check_factory_data", "check_batch_size", "check_seed", "MAX_SEED", "check_parameters", "nonfinite_parameters", "pair",
           "as_tensor", "expected_inputs", "build_at"]
