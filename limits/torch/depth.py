"""Depth-μP for a residual torch network whose factory takes a depth: ``limits.torch.parameterise(factory,
"depth-muP", depths=…)`` with ``factory(width, depth) -> nn.Module`` (:func:`parameterise`, the package's entry
point: without ``depths`` it is :func:`limits.torch.apply_params.parameterise`).

Blocks. The factory is built at two depths; the parameters that exist only at the larger one name the block
container (``blocks.7.fc1.weight`` → container ``blocks``): every parameter under ``<container>.<i>.`` belongs to
block i, all blocks carry the same parameter names, and every other parameter has the same name at every depth
(refused otherwise, with the reason).

Branches. Each block is traced with ``torch.fx``: when its output is ``x + g₁(…) + g₂(…)`` (its input plus
submodule outputs, chained), the g's are its residual branches; when it does not add its input back, the whole
block is the branch (the network adds it to the stream: ``h = h + block(h)``). A branch that is not a
submodule's output cannot be scaled from outside and is refused.

Table (``limits.params.named(name, …)``, base depth L0 = the smallest depth):

    branch output  × (L/L0)^{−α}                  (a forward hook; α = ``p.depth_alpha``, 0 for a width-only table)
    block tensors  lr × (L/L0)^{e_L}               (e_L = ``p.depth_lr_exponent``: Adam −γ, SGD α − γ; 0 width-only)

plus the width rules of :mod:`limits.torch.apply_params` (from the network at depth L0, the same rule for block i
as for block 0), so at base width and depth the network is the factory's own. Depth-μP: α = γ = ½ (Adam rates
∝ L^{−½}, SGD depth-independent).

:func:`depth_coord_check` is the coordinate check across depth: the scale at init and the change after each
step of the stream entering the read-out and of the output, fitted as L^e over the depths, against TP6's
exponents (stream at init: 0 when 1 − 2α ≤ 0; change: max(0, 1 − α − γ)). The stream is the last block's output h_L
(before any final normalisation, which would hide its growth: a pre-LN transformer's read-out sees LN(h_L)).
"""
from __future__ import annotations

import math
import operator
import time
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from ..stats import loglog_fit, mean_se
from .apply_params import Parameterised, build_module, parameterise as _width_parameterise
from .coordcheck import default_loss
from .depth_result import QUANTITIES, DepthCoordCheck  # noqa: F401 — re-exported (the result is torch-free)
from .network import torch_threads


class AtDepth:
    """``factory(width, depth)`` at a fixed depth, as a width factory (picklable when the factory is)."""

    def __init__(self, factory, depth):
        self.factory, self.depth = factory, int(depth)

    def __call__(self, width):
        return self.factory(int(width), self.depth)


def _is_int(s):
    return s.isdigit()


@dataclass(frozen=True)
class BlockLayout:
    """The block container (``prefix``) and the parameter names inside one block (``rest``)."""

    prefix: str
    rest: tuple

    def block_of(self, name):
        """Block index of a parameter name, or None outside the blocks."""
        head = self.prefix + "." if self.prefix else ""
        if not name.startswith(head):
            return None
        part = name[len(head):].split(".", 1)[0]
        return int(part) if _is_int(part) else None

    def count(self, names):
        return len({self.block_of(n) for n in names} - {None})


def block_layout(factory, width, depths) -> BlockLayout:
    """:class:`BlockLayout` from ``factory(width, L)`` at the two smallest depths (module docstring)."""
    ds = sorted({int(d) for d in depths})
    if len(ds) < 2:
        ds = [ds[0], ds[0] + 1]
    la, lb = ds[0], ds[1]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        sa = {n: tuple(q.shape) for n, q in build_module(AtDepth(factory, la), width).named_parameters()}
        sb = {n: tuple(q.shape) for n, q in build_module(AtDepth(factory, lb), width).named_parameters()}
    na, nb = list(sa), list(sb)
    extra = [n for n in nb if n not in set(na)]
    if not extra:
        raise ValueError(f"parameterise: factory(width, {la}) and factory(width, {lb}) have the same parameters; "
                         "the factory does not use its depth argument")
    prefixes = set()
    for n in extra:
        parts = n.split(".")
        j = next((i for i, p in enumerate(parts) if _is_int(p)), None)
        if j is None:
            raise ValueError(f"parameterise: parameter {n!r} appears only at depth {lb} but has no block index; keep "
                             "the residual blocks in one nn.ModuleList / nn.Sequential")
        prefixes.add(".".join(parts[:j]))
    if len(prefixes) != 1:
        raise ValueError(f"parameterise: the depth changes parameters under several containers {sorted(prefixes)}; "
                         "keep the residual blocks in one nn.ModuleList / nn.Sequential")
    lay = BlockLayout(prefixes.pop(), ())
    outside_a = [n for n in na if lay.block_of(n) is None]
    outside_b = [n for n in nb if lay.block_of(n) is None]
    if outside_a != outside_b or any(sa[n] != sb[n] for n in outside_a):
        diff = sorted(set(outside_a) ^ set(outside_b)) or [n for n in outside_a if sa[n] != sb[n]]
        raise ValueError(f"parameterise: parameters outside the blocks change with depth ({diff[:3]}); only the "
                         f"number of blocks in {lay.prefix!r} may depend on the depth")
    rests = {}
    for n in nb:
        i = lay.block_of(n)
        if i is not None:
            rests.setdefault(i, []).append(n.split(".", len(lay.prefix.split(".")) + 1 if lay.prefix else 1)[-1])
    shapes = {tuple(v) for v in rests.values()}
    if len(shapes) != 1:
        raise ValueError(f"parameterise: the blocks of {lay.prefix!r} do not all have the same parameters")
    return BlockLayout(lay.prefix, shapes.pop())


# ---------------------------------------------------------------------- branches (torch.fx)
_ADDS = {operator.add, operator.iadd, torch.add}


def _is_add(node):
    return ((node.op == "call_function" and node.target in _ADDS)
            or (node.op == "call_method" and node.target in ("add", "add_")))


def _reaches(node, target):
    """Whether ``node`` is ``target`` or an add chain containing it."""
    if node is target:
        return True
    return _is_add(node) and any(isinstance(a, torch.fx.Node) and _reaches(a, target) for a in node.args[:2])


def branch_modules(block) -> tuple:
    """Names (relative to ``block``) of the submodules whose outputs are the residual branches, or ``("",)``
    when the block itself is the branch (module docstring)."""
    try:
        gm = torch.fx.symbolic_trace(block)
    except Exception as exc:  # noqa: BLE001 — any tracing failure: say what to do
        raise ValueError(f"parameterise: cannot trace the residual block {type(block).__name__} with torch.fx "
                         f"({type(exc).__name__}: {exc}); write its forward without data-dependent control flow") from None
    inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    if not inputs or not isinstance(out, torch.fx.Node) or not _reaches(out, inputs[0]) or out is inputs[0]:
        return ("",)
    names, node = [], out
    while node is not inputs[0]:
        a, b = node.args[:2]
        stream, branch = (a, b) if isinstance(a, torch.fx.Node) and _reaches(a, inputs[0]) else (b, a)
        if (isinstance(branch, torch.fx.Node) and branch.op == "call_function" and branch.target is operator.getitem
                and branch.args[1] == 0 and isinstance(branch.args[0], torch.fx.Node)):
            branch = branch.args[0]             # module(...)[0]: e.g. nn.MultiheadAttention's (output, weights)
        if not (isinstance(branch, torch.fx.Node) and branch.op == "call_module"):
            raise ValueError(f"parameterise: a residual branch of {type(block).__name__} is {branch} — not the "
                             "output of a submodule, so its multiplier cannot be applied; end each branch with a "
                             "module (e.g. the branch's last nn.Linear)")
        names.append(str(branch.target))
        node = stream
    return tuple(reversed(names))


def _scale_output(mult):
    def hook(module, args, out):
        if isinstance(out, tuple):              # (output, attention weights): scale the output
            return (out[0] * mult,) + out[1:]
        return out * mult
    return hook


# ---------------------------------------------------------------------- the parameterised factory
@dataclass(frozen=True)
class DepthParameterised:
    """``P(width, depth, seed=None)`` builds the module (width rules, branch multipliers), ``P.optimizer(m, lr)``
    its per-tensor rates (width and depth factors)."""

    factory: object
    name: str
    optimizer_name: str
    gauge: str | None
    base_width: int
    base_depth: int
    width_rules: Parameterised          # the width parameterisation at the base depth
    layout: BlockLayout
    alpha: float
    depth_lr_exponent: float
    table: object

    branches: tuple                     # submodules (relative to a block) whose outputs are the branches
    names_by_depth: dict                # parameter names at each depth given (others: built on demand)

    @property
    def feature_learning(self):
        return self.width_rules.feature_learning

    def __repr__(self):
        from .reprs import depth_parameterised_repr

        return depth_parameterised_repr(self)

    def _rules_at(self, depth):
        """The width rules for the parameters at ``depth`` (block i takes block 0's rule, renamed)."""
        head = self.layout.prefix + "." if self.layout.prefix else ""
        base = {q.name: q for q in self.width_rules.rules}
        names = self.names_by_depth.get(int(depth)) or _names(self.factory, self.base_width, depth)
        out = []
        for n in names:
            i = self.layout.block_of(n)
            if i is None:
                out.append(base[n])
                continue
            rest = n[len(head):].split(".", 1)[1]
            q = base[f"{head}0.{rest}"]
            mod = q.module.replace(f"{head}0", f"{head}{i}", 1) if q.module.startswith(f"{head}0") else q.module
            out.append(replace(q, name=n, module=mod))
        return tuple(out)

    def at_depth(self, depth) -> Parameterised:
        """The width :class:`Parameterised` of ``factory(·, depth)`` (no depth factors)."""
        return replace(self.width_rules, factory=AtDepth(self.factory, depth), rules=self._rules_at(depth))

    def __call__(self, width, depth, seed=None):
        depth = int(depth)
        m = self.at_depth(depth)(int(width), seed=seed)
        ratio = depth / self.base_depth
        mult = ratio ** (-self.alpha)
        lr_f = ratio ** self.depth_lr_exponent
        head = self.layout.prefix
        container = m.get_submodule(head) if head else m
        if mult != 1.0:
            for block in container.children():
                for name in self.branches:
                    (block.get_submodule(name) if name else block).register_forward_hook(_scale_output(mult))
        mults = tuple((n, p, f * (lr_f if self.layout.block_of(n) is not None else 1.0))
                      for n, p, f in m.limits_lr_multipliers)
        object.__setattr__(m, "limits_lr_multipliers", mults)
        object.__setattr__(m, "limits_depth", (depth, mult, lr_f))
        return m

    def param_groups(self, module, lr):
        return self.width_rules.param_groups(module, lr)

    def optimizer(self, module, lr, **kw):
        return self.width_rules.optimizer(module, lr, **kw)

    def to_markdown(self, width=None, depth=None) -> str:
        L = self.base_depth if depth is None else int(depth)
        r = L / self.base_depth
        return (f"**{self.name}** across depth: base depth {self.base_depth}, blocks in {self.layout.prefix!r}; at "
                f"depth {L}: branch multiplier (L/L0)^-{self.alpha:g} = {r ** -self.alpha:.4g}, block learning rates "
                f"× (L/L0)^{self.depth_lr_exponent:g} = {r ** self.depth_lr_exponent:.4g}\n\n"
                + self.at_depth(L).to_markdown(width))


def parameterise_depth(factory, parameterisation, widths=(64, 128), optimizer="adam", gauge="a0", base_width=None,
                       roles=None, example_inputs=None, *, depths=(2, 4), base_depth=None,
                       check_init=True) -> DepthParameterised:
    """``parameterise(factory, name, depths=…)`` for ``factory(width, depth)`` (module docstring);
    ``example_inputs``: inputs for tracing the forward, ``check_init``: refuse a non-SP init
    (:func:`limits.torch.apply_params.parameterise`)."""
    if not callable(factory):
        raise ValueError(f"factory must be a callable (width, depth) -> nn.Module, got {type(factory).__name__}")
    ds = sorted({int(d) for d in np.atleast_1d(depths)})
    if not ds or ds[0] < 1:
        raise ValueError(f"depths must be positive integers, got {depths}")
    L0 = ds[0] if base_depth is None else int(base_depth)
    ws = sorted({int(w) for w in widths})
    layout = block_layout(factory, ws[0], ds)
    Pw = _width_parameterise(AtDepth(factory, L0), parameterisation, widths=ws, optimizer=optimizer, gauge=gauge,
                             base_width=base_width, roles=roles, example_inputs=example_inputs,
                             check_init=check_init)
    p = Pw.table
    alpha = 0.0 if p.depth_alpha is None else float(p.depth_alpha)
    e_lr = 0.0 if p.depth_gamma is None else float(p.depth_lr_exponent)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        m = build_module(AtDepth(factory, L0), ws[0])
    head = layout.prefix
    block = next(iter((m.get_submodule(head) if head else m).children()))
    branches = _branches(m, block, example_inputs)    # found once here: a block without branches is refused now
    names = {L: _names(factory, Pw.base_width, L) for L in ds}
    return DepthParameterised(factory, Pw.name, optimizer, gauge, Pw.base_width, L0, Pw, layout, alpha, e_lr, p,
                              branches, names)


def _branches(model, block, example_inputs):
    """:func:`branch_modules` of ``block`` by torch.fx, or, where fx cannot trace it (transformers' layers), from
    one run of ``model`` on ``example_inputs`` (:func:`limits.torch.branches.executed_branches`)."""
    try:
        torch.fx.symbolic_trace(block)
    except Exception:  # noqa: BLE001 — any tracing failure: find the branches by running the network
        from .branches import executed_branches
        from .graph import example_inputs as guess

        x = guess(model) if example_inputs is None else example_inputs
        return executed_branches(model, block, x if isinstance(x, (tuple, list)) else (x,))
    return branch_modules(block)


def parameterise(factory, parameterisation, *args, depths=None, base_depth=None, **kw):
    """``limits.torch.parameterise``: the table applied to ``factory(width)``
    (:func:`limits.torch.apply_params.parameterise`, every argument passed on) or, with ``depths``, to a residual
    ``factory(width, depth)`` (:func:`parameterise_depth`: a :class:`DepthParameterised`; "depth-muP" adds the
    branch multiplier and block rates of its depth exponents, a width-only table such as "muP" none)."""
    if depths is None:
        if base_depth is not None:
            raise ValueError("base_depth is for a depth study: give depths= too")
        return _width_parameterise(factory, parameterisation, *args, **kw)
    return parameterise_depth(factory, parameterisation, *args, depths=depths, base_depth=base_depth, **kw)


def _names(factory, width, depth):
    with torch.random.fork_rng(devices=[]):
        return tuple(n for n, _ in build_module(AtDepth(factory, depth), width).named_parameters())


# ---------------------------------------------------------------------- coordinate check across depth
def _readout(model, P):
    outs = [q.module for q in P.width_rules.rules if q.role == "output"]
    if not outs:
        raise ValueError("depth_coord_check: no output-like tensor (read-out) to record")
    return model.get_submodule(outs[-1])


def _one_depth(P, width, depth, X, Y, lr, steps, seed, loss_fn):
    torch.manual_seed(seed)
    model = P(width, depth)
    opt = P.optimizer(model, lr)
    ro = _readout(model, P)
    store = {}
    h = ro.register_forward_hook(lambda m, a, o: store.update(out=o.detach().double().clone()))
    h_stream = _last_block(model, P).register_forward_hook(lambda m, a, o: store.update(stream=_stream(o)))
    res = np.full((steps + 1, 3), np.nan)
    try:
        first = None
        for t in range(steps + 1):
            opt.zero_grad()
            out = model(X)
            if first is None:
                first = dict(store)
            res[t, 0] = store["stream"].pow(2).mean().sqrt().item()
            if t:
                res[t, 1] = (store["stream"] - first["stream"]).pow(2).mean().sqrt().item()
                res[t, 2] = (store["out"] - first["out"]).pow(2).mean().sqrt().item()
            if t == steps:
                break
            loss = loss_fn(out, Y)
            if not torch.isfinite(loss):
                break
            loss.backward()
            opt.step()
    finally:
        h.remove()
        h_stream.remove()
    return res


def _last_block(model, P):
    """The last residual block: its output is the stream h_L (before a final normalisation and the read-out)."""
    head = P.layout.prefix
    return list((model.get_submodule(head) if head else model).children())[-1]


def _stream(out):
    out = out[0] if isinstance(out, (tuple, list)) else out
    return out.detach().double().clone()


def depth_coord_check(P, depths, data, width=None, lr=1e-3, steps=2, seeds=4, tol=0.15, seed=0, threads=None,
                      loss=None, name=None) -> DepthCoordCheck:
    """Coordinate check of a :class:`DepthParameterised` across ``depths`` at one ``width`` (module docstring;
    predictions from ``limits.params.depth_regime`` of the applied α and the rate's γ)."""
    t_cpu = time.process_time()
    if not isinstance(P, DepthParameterised):
        raise ValueError("depth_coord_check needs parameterise(factory, name, depths=…) (a DepthParameterised)")
    depths = sorted({int(d) for d in depths})
    if len(depths) < 3:
        raise ValueError(f"depths: need at least 3 distinct depths for a slope fit, got {depths}")
    if int(seeds) < 2:
        raise ValueError("seeds must be >= 2")
    width = P.base_width if width is None else int(width)
    loss_fn = loss or default_loss
    samples = np.full((len(depths), int(seeds), int(steps) + 1, 3), np.nan)
    for i, L in enumerate(depths):
        for s in range(int(seeds)):
            with torch.random.fork_rng(devices=[]), torch_threads(threads):
                probe = P(width, L)
                dtype = next(q.dtype for q in probe.parameters() if q.is_floating_point())
                X = data[0] if isinstance(data[0], torch.Tensor) else torch.as_tensor(np.asarray(data[0]))
                X = X.to(dtype) if X.is_floating_point() else X
                Y = data[1] if isinstance(data[1], torch.Tensor) else torch.as_tensor(np.asarray(data[1]))
                Y = Y.to(dtype) if Y.is_floating_point() else Y
                samples[i, s] = _one_depth(P, width, L, X, Y, lr, int(steps), int(seed) * 1_000_003 + s, loss_fn)
    gamma = _gamma(P)
    init_pred = 0.0 if 1 - 2 * P.alpha <= 0 else math.nan
    change = max(0.0, 1 - P.alpha - gamma)
    pred = np.array([init_pred, change, change])
    slope, lo, hi = (np.full(3, np.nan) for _ in range(3))
    cons = np.full(3, -1, np.int64)
    for q in range(3):
        y = samples[:, :, 0 if q == 0 else -1, q]
        m, se = mean_se(y, axis=1)
        if np.all(np.isfinite(m)) and np.all(m > 0):
            f = loglog_fit(np.asarray(depths, float), m, yerr=np.maximum(se, 1e-300))
            slope[q], lo[q], hi[q] = f.slope, f.ci_low, f.ci_high
            if np.isfinite(pred[q]):
                cons[q] = int(lo[q] - tol <= pred[q] <= hi[q] + tol)
        elif np.isfinite(pred[q]):
            cons[q] = 0
    return DepthCoordCheck(name or f"{P.name} ({P.optimizer_name}), α = {P.alpha:g}", np.asarray(depths, float),
                           width, int(steps), int(seeds), samples, slope, lo, hi, pred, cons, float(tol),
                           time.process_time() - t_cpu, {"lr": float(lr), "alpha": P.alpha, "gamma": gamma,
                                                         "optimizer": P.optimizer_name})


def _gamma(P):
    """TP6's γ of the applied rate: Adam lr ∝ L^{−γ}, SGD lr ∝ L^{α−γ}."""
    return -P.depth_lr_exponent if P.optimizer_name != "sgd" else P.alpha - P.depth_lr_exponent


__all__ = ["parameterise", "parameterise_depth", "DepthParameterised", "BlockLayout", "block_layout", "branch_modules",
           "depth_coord_check", "DepthCoordCheck", "AtDepth"]
