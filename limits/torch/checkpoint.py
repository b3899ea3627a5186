"""Checkpoints of a parameterised module as plain weights of ``factory(width)``, and back.

    sd = P.export_state_dict(net)                 # loads into factory(width) unchanged: same function
    factory(width).load_state_dict(sd)            # strict: every key, every shape
    P.import_state_dict(net, sd)                  # a plain checkpoint into P(width): same function again

**Export** folds every multiplier into the weights: a tensor with a forward multiplier (the derived gauge's
r^{−a}, the μP query rows' r^{q}) is stored as its effective value W = s ⊙ w. A read-out tied to the embedding
(one tensor w; the read-out's forward multiplier c = r^{−a_r}) cannot carry c in the plain module, where the two
uses are one tensor again: c moves into the affine layer feeding only the read-out (``ln_f``: γ, β ← c·γ, c·β;
a Linear: W, b ← c·W, c·b), since lm_head(c·h) = c·W h + b is the parameterised read-out. Without such a layer
the export is refused with the reason. **Import** inverts each fold (w = W ⊘ s). Both check the plain keys and
shapes against ``factory(width).state_dict()`` and refuse a mismatch (missing, unexpected, wrong shape, the two
names of a tied tensor holding different values, a value that is not a finite tensor of the key's kind) with a
ValueError naming the keys — never a partial or silently wrong load: every key and value is checked before the
first tensor is written, and a load that still fails restores the module's previous values.
"""
from __future__ import annotations

import torch
from torch.nn.utils import parametrize

from .graph import plain_key, unwrap


def _width(net):
    w = getattr(net, "limits_width", None)
    if w is None:
        raise ValueError("checkpoint: the module was not built by a Parameterised (P(width)); its width is unknown")
    return int(w)


def _owner(net, pkey):
    path, _, attr = pkey.rpartition(".")
    return (net.get_submodule(path) if path else net), attr


def _reference(P, width, build):
    """(key order, {key: shape}, tied key groups, {key: dtype}) of ``factory(width).state_dict()``
    (``build(factory, width)``)."""
    with torch.random.fork_rng(devices=[]):
        ref = build(P.factory, width)
    sd = ref.state_dict()
    groups = {}
    for k, v in sd.items():
        groups.setdefault((v.data_ptr(), tuple(v.shape), v.dtype), []).append(k)
    tied = [g for g in groups.values() if len(g) > 1 and sd[g[0]].numel()]
    return list(sd), {k: tuple(v.shape) for k, v in sd.items()}, tied, {k: v.dtype for k, v in sd.items()}


def _check_keys(plain, order, shapes, what):
    missing = [k for k in order if k not in plain]
    unexpected = [k for k in plain if k not in shapes]
    wrong = [f"{k}: {tuple(plain[k].shape)} ≠ {shapes[k]}" for k in order if k in plain
             and tuple(plain[k].shape) != shapes[k]]
    if missing or unexpected or wrong:
        raise ValueError(f"{what}: the keys do not match factory(width).state_dict() — "
                         + "; ".join(x for x in (f"missing {missing[:6]}" if missing else "",
                                                 f"unexpected {unexpected[:6]}" if unexpected else "",
                                                 f"shapes {wrong[:4]}" if wrong else "") if x))


def _fold_factors(P, net, r):
    """{plain key: factor} carrying each tied read-out's multiplier c into the layer feeding it (docstring)."""
    rules = {q.name: q for q in P.rules}
    out = {}
    for t in P.readouts:
        c = r ** (-t.exponent + rules[t.storage].a)        # read-out multiplier relative to the embedding's
        if c == 1.0:
            continue
        if t.fold is None:
            raise ValueError(f"checkpoint: the tied read-out {t.name!r} carries a multiplier {c:.6g} that the plain "
                             f"module cannot hold ({t.fold_reason}); untie it or feed it from a LayerNorm")
        fold = net.get_submodule(t.fold)
        for attr in ("weight", "bias"):
            if getattr(fold, attr, None) is not None:
                out[f"{t.fold}.{attr}"] = c
    return out


def export_state_dict(P, net, build) -> dict:
    """Plain state dict of ``factory(width)`` computing what the parameterised ``net`` computes (docstring);
    ``build(factory, width)`` makes the plain module whose keys it must match."""
    net = unwrap(net)
    width = _width(net)
    r = width / P.base_width
    tied_names = {t.name: t for t in P.readouts}
    plain = {}
    for key, val in net.state_dict().items():
        pk = plain_key(key)
        if pk in tied_names:
            continue                                     # the shared tensor: stored under the embedding's key
        if pk != key:
            mod, attr = _owner(net, pk)
            val = getattr(mod, attr)
        plain[pk] = val.detach().clone()
    for pk, c in _fold_factors(P, net, r).items():
        plain[pk] = plain[pk] * c
    for t in P.readouts:
        plain[t.name] = plain[t.storage]
    order, shapes, _, _ = _reference(P, width, build)
    _check_keys(plain, order, shapes, "export_state_dict")
    return {k: plain[k] for k in order}


def _inverse(mod, attr, value):
    plist = mod.parametrizations[attr]
    if len(plist) != 1 or not hasattr(plist[0], "inverse"):
        raise ValueError(f"checkpoint: {attr!r} of {type(mod).__name__} has parametrizations not set by parameterise")
    return plist[0].inverse(value)


def import_state_dict(P, net, state_dict, build):
    """Load a plain checkpoint of ``factory(width)`` into the parameterised ``net`` (same function); returns net."""
    mod_net = unwrap(net)
    width = _width(mod_net)
    r = width / P.base_width
    order, shapes, tied, dtypes = _reference(P, width, build)
    if not isinstance(state_dict, dict):
        raise ValueError(f"import_state_dict: expected a dict of tensors (a state dict), got {type(state_dict).__name__}")
    plain = dict(state_dict)
    _check_values(plain, dtypes)
    _check_keys(plain, order, shapes, "import_state_dict")
    for group in tied:
        bad = [k for k in group[1:] if not torch.equal(plain[k], plain[group[0]])]
        if bad:
            raise ValueError(f"import_state_dict: {group} are one tensor in factory(width) but the checkpoint holds "
                             f"different values under {group[0]!r} and {bad}: it was not saved from this module")
    for pk, c in _fold_factors(P, mod_net, r).items():
        plain[pk] = plain[pk] / c
    readout_of = {t.name: t.storage for t in P.readouts}
    raw = {}
    for key in mod_net.state_dict():
        pk = plain_key(key)
        src = readout_of.get(pk, pk)                     # a tied read-out loads the embedding's tensor
        value = plain[src]
        mod, attr = _owner(mod_net, src)
        if parametrize.is_parametrized(mod, attr):
            value = _inverse(mod, attr, value.to(getattr(mod, attr).dtype))
        raw[key] = value
    backup = {k: v.detach().clone() for k, v in mod_net.state_dict().items()}
    try:
        mod_net.load_state_dict(raw, strict=True)
    except BaseException:
        mod_net.load_state_dict(backup, strict=True)      # never a partial load, whatever failed
        raise
    return net


def _check_values(plain, dtypes):
    """Every value a finite tensor of its key's kind (floating for floating tensors, integer for integer
    buffers), all checked before anything is loaded."""
    bad = []
    for k, v in plain.items():
        if k not in dtypes:
            continue                                     # reported by _check_keys
        want = dtypes[k]
        if not isinstance(v, torch.Tensor):
            bad.append(f"{k}: a {type(v).__name__}, not a tensor")
        elif v.is_complex() or v.is_floating_point() != want.is_floating_point or (v.dtype == torch.bool) != (
                want == torch.bool):
            bad.append(f"{k}: dtype {v.dtype}, expected {want}")
        elif v.is_floating_point() and not bool(torch.isfinite(v).all()):
            bad.append(f"{k}: {int((~torch.isfinite(v)).sum())} NaN/inf entries")
    if bad:
        raise ValueError("import_state_dict: nothing loaded — " + "; ".join(bad[:6])
                         + (f" (+{len(bad) - 6} more)" if len(bad) > 6 else ""))


__all__ = ["export_state_dict", "import_state_dict"]
