"""What :func:`limits.torch.coord_check` measures in one training run, per row and step t = 0…steps, on a fixed
batch (rms over all entries):

* a **module** row (owner of an input/hidden/output weight, a normalisation, a read-out tied to the embedding):
  its output y_t —
  ``scale`` rms(y_t), ``change`` rms(y_t − y_0);
* an **attention logits** row for every attention site :func:`limits.torch.graph.find_attention` locates in the
  traced forward (``nn.MultiheadAttention``, ``F.scaled_dot_product_attention`` with its own or the default
  scale, explicit softmax(q·kᵀ·s)), logits s·q·kᵀ as the module computes them
  (:func:`limits.torch.graph.capture_logits`), named ``<module>:logits``: the same two quantities;
* a **tensor** row (every trainable parameter W): ``scale`` rms(W_t) and ``update`` rms(W_t − W_0) of the
  tensor as stored, and ``change`` — its effect: rms(M(x_0; W_t, rest at init) − M(x_0; all at init)), the
  owning module M's output on its own init input when only this tensor has moved (M is the nearest ancestor the
  forward calls). The effect is what a learning-rate or multiplier mistake on this
  tensor changes, whichever gauge (forward multipliers) the module uses. A tensor that M's own forward reads
  while M also calls other layers (a class token or position embedding on the root, a layer scale on a block) has
  its effect read where it enters the stream — the output of the first op that reads it other than through shape
  ops (``cat``, ``x + pos_embed``, ``gamma * x``) — not at M's output: read through the layers after it (a μP
  read-out ∝ 1/N last), the correlated Θ(N^e) part of its effect hides at widths ≤ 256 under an uncorrelated
  N^(e−½) part, and the row would judge those layers, not the tensor.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np
import torch
from torch import nn

from .data_checks import check_parameters
from .graph import SHAPE_OPS, capture_logits, flat, op_name, plain_key

NORMS = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm) + ((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ())


def site_key(site):
    """The row name of an attention site: ``<module>:logits`` (``#k`` for the k-th in one module's forward)."""
    return f"{site.module}:logits" + (f"#{site.ordinal + 1}" if site.ordinal else "")


class _Appender(list):
    """Stands in for capture_logits' list of one site: every captured logits tensor goes to the recorder."""

    def __init__(self, rec, site):
        super().__init__()
        self.rec, self.site = rec, site

    def append(self, logits):
        if self.rec.on:
            key = site_key(self.site)
            self.rec.store[key] = logits.clone()
            self.rec._add(key, "logits", self.site.head_dim)


def module_rows(model, rules, readouts=()):
    """{module name: role} of the modules recorded as rows: owners of input/hidden/output weights, norms, and
    ``readouts`` — the read-outs tied to an embedding (no rule of their own: their weight is the embedding's
    tensor), recorded as output rows."""
    role_of = {}
    for q in rules:
        if q.role in ("input", "hidden", "output"):
            prev = role_of.get(q.module)
            if prev is None or q.role == "output" or (q.role == "hidden" and prev == "input"):
                role_of[q.module] = q.role
    out = {}
    for name, mod in model.named_modules():
        if isinstance(mod, NORMS) and any(True for _ in mod.parameters(recurse=False)):
            out[name] = "norm"
        elif name in readouts:
            out[name] = "output"
        elif name in role_of:
            out[name] = role_of[name]
    missing = sorted(set(readouts) - set(out))
    if missing:
        raise ValueError(f"coord_check: tied read-out module(s) {missing} not found in the module")
    return out


def check_deterministic(model):
    for name, mod in model.named_modules():
        if isinstance(mod, nn.modules.dropout._DropoutNd) and mod.p > 0:
            raise ValueError(f"coord_check: dropout module {name!r} has p = {mod.p}; build the network with "
                             "dropout 0 (the check compares deterministic forwards)")
        if isinstance(mod, nn.MultiheadAttention) and mod.dropout > 0:
            raise ValueError(f"coord_check: attention {name!r} has dropout {mod.dropout}; use dropout 0")


def _first(o):
    return o[0] if isinstance(o, (tuple, list)) else o


def _rms(t):
    return t.double().pow(2).mean().sqrt().item()


class Recorder:
    """Hooks on one model (module docstring). ``rows``: [(key, kind, extra)] in forward order after the first
    forward; kind "module" (extra: role), "logits" (extra: head dim), "tensor" (extra: parameter name)."""

    def __init__(self, model, rules, sites=(), readouts=()):
        self.model = model
        self.sites = tuple(s for s in sites if s.kind != "unrecognised")
        self.mods = dict(model.named_modules())
        self.row_role = module_rows(model, rules, readouts)
        self.params = dict(model.named_parameters())
        self.on, self.first = True, True
        self.order, self.store, self.calls = [], {}, {}
        self.inputs0, self.hooks = {}, []
        rule = {plain_key(q.name): q for q in rules}
        by_mod = {}
        for pn in self.params:
            q = rule.get(plain_key(pn))
            if q is not None:
                by_mod.setdefault(q.module, []).append(pn)
        self.by_mod = by_mod
        for name, mod in self.mods.items():
            self.hooks.append(mod.register_forward_pre_hook(self._pre(name), with_kwargs=True))
            self.hooks.append(mod.register_forward_hook(self._post(name)))

    @contextlib.contextmanager
    def capturing(self):
        """Around one forward: the attention logits of every located site go to the recorder."""
        with capture_logits(self.model, self.sites) as store:
            for s in self.sites:
                store[s.name] = _Appender(self, s)
            yield

    # ------------------------------------------------------------------ hooks
    def _add(self, key, kind, extra):
        if self.first and key not in self.calls:
            self.order.append((key, kind, extra))
        self.calls[key] = self.calls.get(key, 0) + 1

    def _pre(self, name):
        def hook(mod, args, kwargs):
            if not self.on:
                return
            if self.first and name not in self.inputs0:
                self.inputs0[name] = (tuple(_detach(a) for a in args), {k: _detach(v) for k, v in kwargs.items()})
                for pn in self.by_mod.get(name, ()):
                    self._add(pn, "tensor", pn)
        return hook

    def _post(self, name):
        def hook(mod, args, out):
            if not self.on:
                return
            if name in self.row_role:
                self.store[name] = _first(out).detach().clone()
                self._add(name, "module", self.row_role[name])
        return hook

    def remove(self):
        for h in self.hooks:
            h.remove()

    # ------------------------------------------------------------------ tensor effects
    def owner(self, pname):
        """(module name, relative parameter name) of the nearest called ancestor owning ``pname``."""
        parts = pname.split(".")
        for cut in range(len(parts) - 1, -1, -1):
            mname = ".".join(parts[:cut])
            if mname in self.inputs0 and "parametrizations" not in parts[:cut]:
                return mname, ".".join(parts[cut:])
        return None, pname

    def init_tensors(self):
        """Init copies of every parameter and each owner's output at init — or, for a tensor read where it enters
        the stream (:meth:`enters_stream`), that op's output at init — after the first forward."""
        self.p0 = {n: p.detach().clone() for n, p in self.params.items()}
        self.name_of = {id(p): n for n, p in self.params.items()}      # a shared tensor under any of its names
        self.y0, self.own, self.at_use = {}, {}, {}
        with torch.no_grad():
            for key, kind, pn in self.order:
                if kind != "tensor":
                    continue
                m, rel = self.owner(pn)
                self.own[pn] = (m, rel)
                if m is not None and self.enters_stream(m, rel):
                    y = self._call(m, use=self.params[pn])
                    if y is not None:
                        self.at_use[pn] = y
                        continue
                if m is not None and m not in self.y0:
                    self.y0[m] = self._call(m)

    def enters_stream(self, mname, rel) -> bool:
        """Whether the owner's own forward reads tensor ``rel`` (not a child's) and also calls other layers."""
        if "." in rel:
            return False
        prefix = mname + "." if mname else ""
        return any(k != mname and k.startswith(prefix) for k in self.inputs0)

    def _call(self, mname, keep=None, use=None):
        """The owner's output on its init input with every parameter at its init value but ``keep`` (a relative
        name), which stays at its current value — or, with ``use`` (a parameter), the output of the first op that
        reads it (:func:`first_use`; None if none does). Values are swapped in place (``copy_``), so parameters
        keep attributes their module's forward reads (e.g. mup's ``infshape``), then restored."""
        mod = self.mods[mname]
        saved = []
        self.on = False
        try:
            with torch.no_grad():
                for rel, p in mod.named_parameters():
                    if rel != keep:
                        saved.append((p, p.detach().clone()))
                        p.copy_(self.p0[self.name_of[id(p)]])
                args, kwargs = self.inputs0[mname]
                if use is None:
                    return _first(mod(*args, **kwargs)).detach().clone()
                with first_use(use) as seen:
                    mod(*args, **kwargs)
                return seen.out
        finally:
            with torch.no_grad():
                for p, v in saved:
                    p.copy_(v)
            self.on = True

    def effect(self, pname):
        m, rel = self.own[pname]
        if m is None:
            return math.nan
        if pname in self.at_use:
            y, y0 = self._call(m, keep=rel, use=self.params[pname]), self.at_use[pname]
            return _rms(y - y0) if y is not None and y.shape == y0.shape else math.nan
        return _rms(self._call(m, keep=rel) - self.y0[m])


def first_use(param):
    """A TorchFunctionMode whose ``out`` becomes the output of the first op that reads ``param`` other than
    through shape ops (a view, ``expand``, indexing — whose outputs are followed in turn)."""
    from torch.overrides import TorchFunctionMode

    class FirstUse(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.ids, self.held, self.out = {id(param)}, [param], None

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if self.out is None and any(isinstance(a, torch.Tensor) and id(a) in self.ids for a in flat((args, kwargs))):
                if op_name(func) in SHAPE_OPS and isinstance(out, torch.Tensor):
                    self.ids.add(id(out))
                    self.held.append(out)              # held, so its id is not reused by another tensor
                elif isinstance(_first(out), torch.Tensor):
                    self.out = _first(out).detach().clone()
            return out

    return FirstUse()


def _detach(a):
    return a.detach().clone() if isinstance(a, torch.Tensor) else a


def run_one(model, rules, sites, groups, X, Y, optimizer, lr, steps, loss_fn, readouts=()):
    """(rows, values (n_rows, steps+1, 3)) of one training run (module docstring); ``readouts``: module paths of
    read-outs tied to an embedding (output rows)."""
    model.train()
    check_parameters(model, "coord_check")           # NaN parameters are named (two NaN forwards also differ)
    check_deterministic(model)
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        a, b = _first(model(X)), _first(model(X))
    if not torch.equal(a, b):
        raise ValueError("coord_check: two forwards of the same module on the same batch differ (dropout inside the "
                         "forward, e.g. F.dropout or dropout_p in F.scaled_dot_product_attention?); the check "
                         "compares deterministic forwards")
    rec = Recorder(model, rules, sites, readouts)
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[optimizer]
    opt = cls(groups, lr=float(lr))
    res = first = None
    try:
        for t in range(steps + 1):
            opt.zero_grad()
            with rec.capturing():
                out = model(X)
            loss = None
            if t < steps:                  # backward before any in-place swap of the effects below
                loss = loss_fn(out, Y)
                if torch.isfinite(loss):
                    loss.backward()
            if rec.first:
                rec.first = False
                rec.init_tensors()
                res = np.full((len(rec.order), steps + 1, 3), np.nan)
                first = {k: rec.store[k] for k, kind, _ in rec.order if kind != "tensor"}
            _record(rec, res, first, t)
            if loss is None or not torch.isfinite(loss):
                break
            opt.step()
    finally:
        rec.remove()
    return rec.order, res


def _record(rec, res, first, t):
    """Row values after step t into ``res[:, t]`` (module docstring)."""
    for i, (key, kind, pn) in enumerate(rec.order):
        if kind == "tensor":
            w = rec.params[pn].detach()
            res[i, t, 0] = _rms(w)
            if t > 0:
                res[i, t, 2] = _rms(w - rec.p0[pn])
                res[i, t, 1] = rec.effect(pn)
            continue
        y = rec.store[key]
        res[i, t, 0] = _rms(y)
        if t > 0:
            res[i, t, 1] = _rms(y - first[key])


def describe(mod):
    """(type name, sizes) of a module for its row label: Linear (in, out), Embedding (num, dim), …"""
    t = type(mod).__name__
    if isinstance(mod, nn.Linear):
        return t, (mod.in_features, mod.out_features)
    if isinstance(mod, nn.modules.conv._ConvNd):
        return t, (mod.in_channels, mod.out_channels)
    if isinstance(mod, nn.Embedding):
        return t, (mod.num_embeddings, mod.embedding_dim)
    if isinstance(mod, nn.LayerNorm):
        return t, tuple(mod.normalized_shape)
    if isinstance(mod, nn.MultiheadAttention):
        return t, (mod.embed_dim,)
    return t, ()


def size_text(a, b, na, nb):
    """A size at widths na, nb as text: fixed (16), N, 2N, N/2."""
    if a == b:
        return str(a)
    k = a / na
    if k == 1:
        return "N"
    return f"{k:g}N" if k >= 1 else f"N/{1 / k:g}"


def label(name, desc_a, desc_b, na, nb):
    """``0`` → ``0 (Linear 16→N)`` (a bare index says what it is); other names unchanged."""
    last = name.split(".")[-1] if name else ""
    if not last.isdigit() or desc_a is None:
        return name
    t, sa = desc_a
    sb = desc_b[1] if desc_b is not None else sa
    sizes = [size_text(x, y, na, nb) for x, y in zip(sa, sb)]
    return f"{name} ({t} {'→'.join(sizes)})" if sizes else f"{name} ({t})"


__all__ = ["Recorder", "run_one", "describe", "label", "module_rows", "check_deterministic", "NORMS"]
