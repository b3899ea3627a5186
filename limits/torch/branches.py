"""Residual branches of a block found by running it, for blocks ``torch.fx`` cannot trace (transformers' decoder
layers: keyword inputs, decorators, cache objects) — the fallback of :func:`limits.torch.depth.branch_modules`.

The whole network runs once on example inputs with forward hooks on the first block and its submodules and a
``TorchFunctionMode`` recording every addition inside the block. The block's output y (its first tensor) is
written as a sum of terms by following additions back (``x + a``, ``a + b + x``, ``h = x + f(x); y = h + g(h)``):

    y = x + t₁ + t₂ + …      (x: the tensor the block received as its stream — its first tensor argument)

Exactly one term must be the stream x; each other term is a residual branch and must be the output (its first
tensor) of a submodule of the block — the outermost such submodule is the branch (e.g. ``self_attn``, ``mlp``).
An addition inside a submodule that contains the stream (BLOOM adds the residual inside its attention and MLP)
is followed too, so its branch is the submodule before that addition (``self_attention.dense``); an in-place
``mlp_out += attn_out`` (Falcon's parallel attention) counts both modules.
A block whose output is not x plus terms is the branch itself (``("",)``: the network adds it); a term that is
no submodule's output (a scaled sum, an in-place update) is refused by name.
"""
from __future__ import annotations

import contextlib
import operator

import torch

_ADDS = {operator.add, operator.iadd, torch.add, torch.Tensor.add, torch.Tensor.__add__, torch.Tensor.__radd__,
         torch.Tensor.__iadd__, torch.Tensor.add_}


def _first_tensor(x):
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, dict):
        x = tuple(x.values())
    if isinstance(x, (tuple, list)):
        return next((v for v in x if isinstance(v, torch.Tensor)), None)
    return None


class _Adds(torch.overrides.TorchFunctionMode):
    """Every tensor addition while the block runs: {id(out): (a, b)} (the tensors kept alive)."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.state["inside"] and func in _ADDS and len(args) >= 2 and isinstance(out, torch.Tensor):
            a, b = args[0], args[1]
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape == out.shape:
                self.state["adds"][id(out)] = (a, b, out)
        return out


def _run(model, block, inputs):
    """(stream x, output y, {id(tensor): outermost submodule path}, adds) of one forward."""
    st = {"inside": False, "adds": {}, "outs": {}, "x": None, "y": None, "keep": []}
    hooks = []

    def pre(mod, args, kwargs):
        if st["x"] is None:
            st["x"] = _first_tensor(args) if _first_tensor(args) is not None else _first_tensor(kwargs)
            st["inside"] = True

    def post(mod, args, kwargs, out):
        if st["y"] is None:
            st["y"] = _first_tensor(out)
            st["inside"] = False

    def sub(path):
        def hook(mod, args, out):
            t = _first_tensor(out)
            if t is not None and st["inside"]:
                st["keep"].append(t)
                prev = st["outs"].get(id(t))
                if prev is None or len(path.split(".")) < len(prev.split(".")):
                    st["outs"][id(t)] = path
        return hook

    hooks.append(block.register_forward_pre_hook(pre, with_kwargs=True))
    hooks.append(block.register_forward_hook(post, with_kwargs=True))
    for path, m in block.named_modules():
        if path:
            hooks.append(m.register_forward_hook(sub(path)))
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]), _Adds(st), _eval(model):
            model(*inputs)
    finally:
        for h in hooks:
            h.remove()
    return st


@contextlib.contextmanager
def _eval(module):
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for m, t in modes:
            m.training = t


def _reaches(t, st, depth=0):
    """Whether the sum ``t`` contains the stream x (followed back through additions)."""
    if t is st["x"]:
        return True
    add = st["adds"].get(id(t))
    if add is None or depth > 64:
        return False
    a, b, out = add
    return (a is not out and _reaches(a, st, depth + 1)) or _reaches(b, st, depth + 1)


def _terms(t, st, depth=0):
    """The terms of the sum ``t``: the stream, and submodule outputs (as paths) or other tensors. An addition is
    followed back unless it is a submodule's own output that does not contain the stream (a bias add inside a
    Linear); an in-place ``a += b`` counts ``a``'s value before it (a submodule output)."""
    if t is st["x"] or depth > 64:
        return [t]
    add = st["adds"].get(id(t))
    if add is None:
        return [st["outs"].get(id(t), t)]
    a, b, out = add
    if a is out:
        return [st["outs"].get(id(a), a)] + _terms(b, st, depth + 1)
    if id(t) in st["outs"] and not _reaches(t, st):
        return [st["outs"][id(t)]]
    return _terms(a, st, depth + 1) + _terms(b, st, depth + 1)


def executed_branches(model, block, inputs, name="") -> tuple:
    """Names (relative to ``block``) of the submodules whose outputs are its residual branches, from one run of
    ``model(*inputs)`` (module docstring); ``("",)`` when the block is the branch."""
    st = _run(model, block, tuple(inputs))
    x, y = st["x"], st["y"]
    what = name or type(block).__name__
    if x is None or y is None:
        raise ValueError(f"parameterise: the residual block {what} did not run on the example inputs")
    if y is x:
        raise ValueError(f"parameterise: the residual block {what} updates its input in place (x += …); its "
                         "branches cannot be told apart from the stream")
    terms = _terms(y, st)
    if sum(t is x for t in terms) != 1:
        return ("",)
    out = []
    for t in terms:
        if t is x:
            continue
        if not isinstance(t, str):
            raise ValueError(f"parameterise: a residual branch of {what} is not the output of one of its submodules "
                             "(a scaled or combined term), so its multiplier cannot be applied; end each branch "
                             "with a module")
        out.append(t)
    return tuple(out)


__all__ = ["executed_branches"]
