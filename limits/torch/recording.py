"""What :func:`limits.torch.coord_check` measures in one training run, per row and step t = 0…steps, on a fixed
batch (rms over all entries):

* a **module** row (owner of an input/hidden/output weight, a normalisation): its output y_t —
  ``scale`` rms(y_t), ``change`` rms(y_t − y_0);
* an **attention logits** row (``nn.MultiheadAttention``: q·k/√d from its packed in-projection;
  ``F.scaled_dot_product_attention`` wherever it is called, seen through a ``TorchFunctionMode``: q·kᵀ·scale
  from its own arguments, default scale 1/√d), named after the module that calls it: the same two quantities,
  and the head dimension (to tell heads ∝ width from head dimension ∝ width);
* a **tensor** row (every trainable parameter W): ``scale`` rms(W_t) and ``update`` rms(W_t − W_0) of the
  tensor as stored, and ``change`` — its effect: rms(M(x_0; W_t, rest at init) − M(x_0; all at init)), the
  owning module M's output on its own init input when only this tensor has moved (``torch.func.functional_call``;
  M is the nearest ancestor the forward calls). The effect is what a learning-rate or multiplier mistake on this
  tensor changes, whichever gauge (forward multipliers) the module uses.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

NORMS = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._BatchNorm) + ((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ())


def display_name(pname):
    """``a.parametrizations.weight.original`` → ``a.weight``."""
    parts = pname.split(".")
    if len(parts) >= 3 and parts[-3] == "parametrizations" and parts[-1] == "original":
        return ".".join(parts[:-3] + [parts[-2]])
    return pname


def module_rows(model, rules):
    """{module name: role} of the modules recorded as rows: owners of input/hidden/output weights, norms."""
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
        elif name in role_of:
            out[name] = role_of[name]
        if isinstance(mod, nn.MultiheadAttention) and name in role_of and not mod._qkv_same_embed_dim:
            raise ValueError(f"coord_check: attention {name!r} has separate q/k/v projections; only the packed "
                             "in_proj is recorded")
    return out


def _mha_logits(mod, args, kwargs):
    query = args[0] if args else kwargs["query"]
    key = args[1] if len(args) > 1 else kwargs["key"]
    if not mod.batch_first:
        query, key = query.transpose(0, 1), key.transpose(0, 1)
    E, h = mod.embed_dim, mod.num_heads
    W, b = mod.in_proj_weight, mod.in_proj_bias
    q = F.linear(query, W[:E], None if b is None else b[:E])
    k = F.linear(key, W[E:2 * E], None if b is None else b[E:2 * E])
    B, T, _ = q.shape
    d = E // h
    q = q.reshape(B, T, h, d)
    k = k.reshape(B, key.shape[1], h, d)
    return torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(d), d


_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


def _sdpa_logits(args, kwargs):
    a = dict(zip(_SDPA_ARGS, args))
    a.update(kwargs)
    if float(a.get("dropout_p") or 0.0) > 0:
        raise ValueError(f"coord_check: F.scaled_dot_product_attention is called with dropout_p = "
                         f"{a['dropout_p']}; use 0 (the check compares deterministic forwards)")
    q, k = a["query"], a["key"]
    if k.shape[-3:-2] != q.shape[-3:-2] and q.ndim >= 3 and k.shape[-3] and q.shape[-3] % k.shape[-3] == 0:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)           # grouped-query attention
    d = q.shape[-1]
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    return (q @ k.transpose(-2, -1)) * scale, d


class _SDPAMode(TorchFunctionMode):
    def __init__(self, callback):
        super().__init__()
        self.callback = callback

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            self.callback(args, kwargs)
        return func(*args, **kwargs)


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

    def __init__(self, model, rules):
        self.model = model
        self.mods = dict(model.named_modules())
        self.row_role = module_rows(model, rules)
        self.params = dict(model.named_parameters())
        self.on, self.first = True, True
        self.stack, self.order, self.store, self.calls = [], [], {}, {}
        self.inputs0, self.hooks, self.sdpa_count = {}, [], {}
        rule = {display_name(q.name): q for q in rules}
        by_mod = {}
        for pn in self.params:
            q = rule.get(display_name(pn))
            if q is not None:
                by_mod.setdefault(q.module, []).append(pn)
        self.by_mod = by_mod
        for name, mod in self.mods.items():
            self.hooks.append(mod.register_forward_pre_hook(self._pre(name), with_kwargs=True))
            self.hooks.append(mod.register_forward_hook(self._post(name)))
        self.mode = _SDPAMode(self._sdpa)

    # ------------------------------------------------------------------ hooks
    def _add(self, key, kind, extra):
        if self.first and key not in self.calls:
            self.order.append((key, kind, extra))
        self.calls[key] = self.calls.get(key, 0) + 1

    def _pre(self, name):
        def hook(mod, args, kwargs):
            if not self.on:
                return
            self.stack.append(name)
            if self.first and name not in self.inputs0:
                self.inputs0[name] = (tuple(_detach(a) for a in args), {k: _detach(v) for k, v in kwargs.items()})
                for pn in self.by_mod.get(name, ()):
                    self._add(pn, "tensor", pn)
            if isinstance(mod, nn.MultiheadAttention) and name in self.row_role:
                lg, d = _mha_logits(mod, args, kwargs)
                self.store[name + ":logits"] = lg.detach().clone()
                self._add(name + ":logits", "logits", d)
        return hook

    def _post(self, name):
        def hook(mod, args, out):
            if not self.on:
                return
            if self.stack and self.stack[-1] == name:
                self.stack.pop()
            if name in self.row_role:
                self.store[name] = _first(out).detach().clone()
                self._add(name, "module", self.row_role[name])
        return hook

    def _sdpa(self, args, kwargs):
        if not self.on:
            return
        lg, d = _sdpa_logits(args, kwargs)
        site = (self.stack[-1] if self.stack else "") + ":logits"
        n = self.sdpa_count.get(site, 0)
        self.sdpa_count[site] = n + 1
        key = site if n == 0 else f"{site}#{n + 1}"
        self.store[key] = lg.detach().clone()
        self._add(key, "logits", d)

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
        """Init copies of every parameter and each owner's output at init (after the first forward)."""
        self.p0 = {n: p.detach().clone() for n, p in self.params.items()}
        self.y0 = {}
        self.own = {}
        with torch.no_grad():
            for key, kind, pn in self.order:
                if kind != "tensor":
                    continue
                m, rel = self.owner(pn)
                self.own[pn] = (m, rel)
                if m is not None and m not in self.y0:
                    self.y0[m] = self._call(m, {})

    def _call(self, mname, override):
        mod = self.mods[mname]
        pre = mname + "." if mname else ""
        params = {n[len(pre):]: self.p0[n] for n in self.p0 if n.startswith(pre) or not mname}
        params.update(override)
        args, kwargs = self.inputs0[mname]
        self.on = False
        try:
            return _first(functional_call(mod, params, args, kwargs)).detach()
        finally:
            self.on = True

    def effect(self, pname):
        m, rel = self.own[pname]
        if m is None:
            return math.nan
        with torch.no_grad():
            y = self._call(m, {rel: self.params[pname].detach()})
        return _rms(y - self.y0[m])


def _detach(a):
    return a.detach().clone() if isinstance(a, torch.Tensor) else a


def run_one(model, rules, groups, X, Y, optimizer, lr, steps, loss_fn):
    """(rows, values (n_rows, steps+1, 3)) of one training run (module docstring)."""
    model.train()
    check_deterministic(model)
    rec = Recorder(model, rules)
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[optimizer]
    opt = cls(groups, lr=float(lr))
    res = first = None
    try:
        for t in range(steps + 1):
            opt.zero_grad()
            rec.sdpa_count = {}
            with rec.mode:
                out = model(X)
            if rec.first:
                rec.first = False
                rec.init_tensors()
                res = np.full((len(rec.order), steps + 1, 3), np.nan)
                first = {k: rec.store[k] for k, kind, _ in rec.order if kind != "tensor"}
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
            if t == steps:
                break
            loss = loss_fn(out, Y)
            if not torch.isfinite(loss):
                break
            loss.backward()
            opt.step()
    finally:
        rec.remove()
    return rec.order, res


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


__all__ = ["Recorder", "run_one", "describe", "label", "display_name", "module_rows", "check_deterministic", "NORMS"]
