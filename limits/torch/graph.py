"""Attention and weight ties found in the graph a module executes, not from its class names.

    sites = find_attention(module, example_inputs)      # tuple[AttentionSite], in forward order
    ties = find_ties(module, example_inputs)            # tuple[Tie]
    scal = width_scaling(sites_a, sites_b, n_a, n_b)    # tuple[AttentionScaling]: what scales with width
    with capture_logits(module, sites) as store:        # store[site.name]: [logits of each forward]
        module(x)

**Trace.** ``torch.fx`` symbolic tracing first (leaves: parameter-holding ``torch.nn`` modules —
``Linear``, ``Embedding``, norms … — and ``nn.MultiheadAttention``; user modules and torch containers are
traced through), run on ``example_inputs`` by an ``fx.Interpreter`` that keeps every value. When fx fails
(data-dependent control flow, e.g. ``nn.TransformerEncoderLayer``'s fast-path checks), the forward is run once
under a ``TorchFunctionMode`` with forward hooks on every module, recording each torch call outside the
leaves and every leaf call (``method`` says which: "torch.fx" or "function-mode"). Both give one list of
nodes (op, arguments as references, value, enclosing module); the analysis below reads only that list.

**Attention sites.** (i) every call of an ``nn.MultiheadAttention``; (ii) every
``F.scaled_dot_product_attention`` (scale: its ``scale`` or the default 1/√d_head); (iii) every softmax whose
input is ``q @ kᵀ`` (``matmul``/``@``/``bmm``/``einsum`` of two activations) up to multiplications and
divisions by constants (the scale: their product, e.g. nanoGPT's ``* (1.0 / math.sqrt(k.size(-1)))``) and
additive/filled masks. A softmax over a product of two activations reached through any other op, and
``F.multi_head_attention_forward`` called directly, are sites of kind "unrecognised". For each site the query
and key are followed back through shape ops (view, transpose, split, chunk, getitem, …), constant scalings
and sums of such paths (rotary embeddings) to the ``nn.Linear`` (or ``F.linear`` of a parameter) that
produces them; the rows of its weight that feed q (a packed qkv Linear's first third) are read from the
autograd graph (``∂q/∂(projection output)`` is non-zero exactly on them). A query reached through anything
else (a LayerNorm: QK-norm) has ``query = None`` and the ``reason``.

Not seen: attention computed outside torch's own functions (flash-attn, xformers kernels), a softmax written
as exp/sum, learned queries (one operand a parameter); attention after a data-dependent branch not taken on
``example_inputs``.

**Width.** :func:`width_scaling` compares the sites of the same factory at two widths: whether the head
dimension d_h and the number of heads scale with the width N or stay fixed, and the exponent e of the logit
scale s ∝ N^{−e}. μP (TP5) wants logits ∝ q·k/d_h when d_h ∝ N and a fixed scale when d_h is fixed (heads ∝ N);
:meth:`AttentionScaling.query_exponent` is the power of r = N/N₀ the query must be multiplied by to get
there (−½ for 1/√d_h with d_h ∝ N, 0 with d_h fixed, 0 when the module already divides by d_h).

**Ties.** Parameters that are one tensor under several names (``lm_head.weight is wte.weight``): kind
"embedding-readout" (an ``nn.Embedding`` weight also an ``nn.Linear``'s weight of the same shape),
"same-module-type" (every name the same attribute of the same module type), else "other"; with
``example_inputs``, a leaf module's weight also read by the forward itself (``logits = x @ wte.weight.T``)
is a tie of kind "functional".
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn.utils import parametrize

_SHAPE_OPS = frozenset((
    "view", "reshape", "transpose", "permute", "contiguous", "split", "chunk", "unbind", "getitem", "narrow",
    "select", "squeeze", "unsqueeze", "flatten", "unflatten", "expand", "expand_as", "clone", "to", "float",
    "double", "half", "bfloat16", "type", "type_as", "movedim", "moveaxis", "swapaxes", "swapdims", "T", "mT", "t",
    "view_as", "reshape_as", "tensor_split", "split_with_sizes", "repeat_interleave", "repeat", "neg",
    "getattr", "detach_copy"))
_SUMS = frozenset(("add", "sub", "cat", "stack"))
_SCALINGS = frozenset(("mul", "div"))
_MASKS = frozenset(("masked_fill", "where"))
_MATMULS = frozenset(("matmul", "rmatmul", "bmm", "einsum", "baddbmm"))
_ALIASES = {"truediv": "div", "true_divide": "div", "divide": "div", "multiply": "mul", "rmul": "mul",
            "radd": "add", "iadd": "add", "imul": "mul", "itruediv": "div", "rsub": "sub", "isub": "sub",
            "mm": "matmul", "concat": "cat", "concatenate": "cat", "scaled_dot_product_attention": "sdpa",
            "permute_copy": "permute", "swapdims": "swapaxes"}
KINDS = ("multihead", "sdpa", "explicit", "unrecognised")
_PASS_MODULES = frozenset(("Dropout", "Dropout1d", "Dropout2d", "Identity"))    # followed on a query's path


# ----------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Projection:
    """The weight rows ``[start, stop)`` (along ``dim``) of parameter ``param`` (owned by ``module``) that
    produce a query or key; ``bias``: the bias parameter with the same rows, if any."""

    param: str
    module: str
    dim: int
    start: int
    stop: int
    bias: str | None = None


@dataclass(frozen=True)
class AttentionSite:
    """One attention in the forward. ``name`` = ``module:kind`` (+ ``#ordinal`` after the first in a
    module); ``module``: the enclosing module (the ``nn.MultiheadAttention`` itself for kind "multihead");
    ``kind`` in :data:`KINDS`; ``ordinal``: its index among the same ops of ``module``'s own forward;
    ``query``/``key``: :class:`Projection` or None (then ``reason`` says why); ``scale``: the factor on q·k
    (``scale_expr`` says where it comes from), of which ``path_factor`` is applied on the query/key paths before
    the product (timm's ``q = q * scale``); ``heads``, ``head_dim``; ``method``: how it was traced."""

    name: str
    module: str
    kind: str
    ordinal: int
    query: Projection | None
    key: Projection | None
    scale: float
    scale_expr: str
    heads: int | None
    head_dim: int | None
    method: str
    reason: str | None = None
    path_factor: float = 1.0


@dataclass(frozen=True)
class AttentionScaling:
    """A site traced at two widths n_a < n_b (``site`` at n_a, ``site_b`` at n_b): ``head_dim`` and ``heads``
    are "scales" (∝ width), "fixed" or "unknown"; ``scale_exponent`` e with the logit scale s ∝ N^{−e}."""

    site: AttentionSite
    widths: tuple
    head_dim: str
    heads: str
    scale_exponent: float
    site_b: AttentionSite | None = None

    def query_exponent(self) -> float:
        """Power of r = N/N₀ multiplying the query so that the logits follow μP (module docstring):
        −(e_μP − e) with e_μP = 1 when the head dimension scales, 0 when it is fixed."""
        want = 1.0 if self.head_dim == "scales" else 0.0
        q = -(want - self.scale_exponent)
        return 0.0 if abs(q) < 1e-9 else q


@dataclass(frozen=True)
class Tie:
    """Parameter ``names`` that are one tensor; ``kind``: "embedding-readout", "same-module-type", "functional"
    or "other"; ``embedding``/``readout``: module paths of an embedding-readout tie; ``detail``: what was found."""

    names: tuple
    kind: str
    embedding: str | None = None
    readout: str | None = None
    detail: str = ""


# ----------------------------------------------------------------------------------------------- tracing
@dataclass(frozen=True)
class Ref:
    index: int
    item: int | None = None


@dataclass
class Node:
    index: int
    kind: str          # "input" | "param" | "module" | "call"
    name: str          # canonical op name, module path or parameter name
    args: tuple
    kwargs: dict
    value: object
    act: bool          # depends on the inputs
    scope: str         # innermost enclosing module (non-leaf) path
    module_type: str = ""


@dataclass
class Trace:
    """The nodes of one traced forward (module docstring) and how they were obtained."""

    nodes: list
    method: str
    note: str = ""
    params: dict = field(default_factory=dict)   # id(tensor) -> parameter/buffer name
    outputs: tuple = ()                          # Refs of the tensors the forward returns
    site_nodes: dict = field(default_factory=dict)  # site name -> (op node, softmax node or None), by _sites

    def value(self, ref):
        v = self.nodes[ref.index].value
        return v if ref.item is None else v[ref.item]


def _base_type(mod):
    cls = type(mod)
    return cls.__bases__[0] if parametrize.is_parametrized(mod) else cls


_LEAVES = (nn.MultiheadAttention, nn.Linear, nn.Embedding, nn.modules.conv._ConvNd)


def is_leaf(mod) -> bool:
    """Traced as one call: ``nn.MultiheadAttention``, ``Linear``, ``Embedding`` and ``Conv*d`` (subclasses
    too: a user's ``CastedLinear(nn.Linear)``), and ``torch.nn`` modules without child modules (a parametrized
    module's ``parametrizations`` does not count)."""
    cls = _base_type(mod)
    if issubclass(cls, _LEAVES):
        return True
    if not cls.__module__.startswith("torch.nn") or issubclass(cls, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
        return False
    return not any(name != "parametrizations" for name, _ in mod.named_children())


def _canon(name: str) -> str:
    n = name.strip("_")
    return _ALIASES.get(n, n)


def _func_name(func) -> str:
    name = getattr(func, "__name__", None) or str(func)
    if name == "__get__" and hasattr(func, "__self__"):
        name = getattr(func.__self__, "__name__", name)
    return _canon(name)


def _flat(x):
    if isinstance(x, (tuple, list)):
        for y in x:
            yield from _flat(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _flat(y)
    elif isinstance(x, slice):
        yield from _flat((x.start, x.stop, x.step))
    else:
        yield x


def _tensor_names(module):
    names = {}
    for n, p in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), n)
    for n, b in module.named_buffers(remove_duplicate=False):
        names.setdefault(id(b), n)
    return names


def _fx_trace(module, inputs):
    import torch.fx as fx

    class _Tracer(fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return is_leaf(m)

    sig = inspect.signature(module.forward)
    extra = list(sig.parameters.values())[len(inputs):]
    concrete = {p.name: p.default for p in extra if p.default is not inspect.Parameter.empty}
    graph = _Tracer().trace(module, concrete_args=concrete or None)
    gm = fx.GraphModule(module, graph)

    class _Keep(fx.Interpreter):
        pass

    interp = _Keep(gm, garbage_collect_values=False)
    with torch.enable_grad():
        interp.run(*inputs)
    names = _tensor_names(module)
    nodes, index, outputs = [], {}, ()
    for n in graph.nodes:
        if n.op == "output":
            outputs = tuple(r for r in _flat(fx.node.map_arg(n.args, lambda a: Ref(index[a]))) if isinstance(r, Ref))
            continue
        val = interp.env.get(n)
        args = fx.node.map_arg(n.args, lambda a: Ref(index[a]))
        kwargs = fx.node.map_arg(n.kwargs, lambda a: Ref(index[a]))
        refs = [r for r in _flat((args, kwargs)) if isinstance(r, Ref)]
        act = n.op == "placeholder" or (n.op != "get_attr" and any(nodes[r.index].act for r in refs)
                                        and _tensorish(val))
        stack = n.meta.get("nn_module_stack") or {}
        scopes = [v[0] for v in stack.values()]
        if n.op == "call_module":
            kind, name, mtype = "module", str(n.target), _base_type(module.get_submodule(n.target)).__name__
            scopes = [s for s in scopes if s != name]
        elif n.op == "get_attr":
            kind, name, mtype = "param", str(n.target), ""
        elif n.op == "placeholder":
            kind, name, mtype = "input", n.name, ""
        else:
            tgt = n.target if n.op == "call_method" else getattr(n.target, "__name__", str(n.target))
            kind, name, mtype = "call", _canon(str(tgt)), ""
        index[n] = len(nodes)
        nodes.append(Node(len(nodes), kind, name, args, kwargs, val, act, scopes[-1] if scopes else "", mtype))
    return Trace(nodes, "torch.fx", params=names, outputs=outputs)


class _Recorder:
    """The function-mode trace: a TorchFunctionMode plus forward hooks on every module of the root."""

    def __init__(self, module):
        self.root = module
        self.names = _tensor_names(module)
        self.paths = {id(m): p for p, m in module.named_modules(remove_duplicate=False)}
        self.nodes, self.produced, self.keep = [], {}, []
        self.scope, self.leaf_depth = [], 0

    def ref(self, x):
        """Ref of a tensor argument (a parameter/buffer becomes a "param" node), or the constant itself."""
        if not isinstance(x, torch.Tensor):
            return x
        r = self.produced.get(id(x))
        if r is not None:
            return r
        name = self.names.get(id(x), f"<tensor {tuple(x.shape)}>")
        return self.add("param", name, (), {}, x, act=False)

    def add(self, kind, name, args, kwargs, value, act=None, mtype=""):
        refs = [r for r in _flat((args, kwargs)) if isinstance(r, Ref)]
        if act is None:         # data flow from the inputs (sizes read from them are not activations)
            act = any(self.nodes[r.index].act for r in refs) and _tensorish(value)
        i = len(self.nodes)
        self.nodes.append(Node(i, kind, name, args, kwargs, value, act,
                               self.scope[-1] if self.scope else "", mtype))
        self.keep.append(value)
        if isinstance(value, torch.Tensor):
            self.produced[id(value)] = Ref(i)
        elif isinstance(value, (tuple, list)):
            for j, v in enumerate(value):
                if isinstance(v, torch.Tensor):
                    self.produced[id(v)] = Ref(i, j)
        return Ref(i)

    def convert(self, x):
        if isinstance(x, (tuple, list)):
            return type(x)(self.convert(y) for y in x) if not hasattr(x, "_fields") else tuple(self.convert(y) for y in x)
        if isinstance(x, dict):
            return {k: self.convert(v) for k, v in x.items()}
        return self.ref(x)

    def pre(self, mod, args, kwargs):
        leaf = is_leaf(mod)
        if self.leaf_depth == 0 and leaf:
            self.pending = (self.convert(args), self.convert(kwargs))
        if leaf:
            self.leaf_depth += 1
        else:
            self.scope.append(self.paths.get(id(mod), "?"))

    def post(self, mod, args, kwargs, out):
        if is_leaf(mod):
            self.leaf_depth -= 1
            if self.leaf_depth == 0:
                a, kw = self.pending
                self.add("module", self.paths.get(id(mod), "?"), a, kw, out, mtype=_base_type(mod).__name__)
        elif self.scope:
            self.scope.pop()

    def call(self, func, args, kwargs, out):
        if self.leaf_depth == 0:
            self.add("call", _func_name(func), self.convert(args), self.convert(kwargs), out)


@contextlib.contextmanager
def _module_hooks(module, pre, post):
    hooks = []
    try:
        for _, m in module.named_modules(remove_duplicate=False):
            hooks.append(m.register_forward_pre_hook(pre, with_kwargs=True))
            hooks.append(m.register_forward_hook(post, with_kwargs=True, always_call=True))
        yield
    finally:
        for h in hooks:
            h.remove()


def _function_mode(callback):
    from torch.overrides import TorchFunctionMode

    class _Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            callback(func, args, kwargs, out)
            return out

    return _Mode()


def _function_trace(module, inputs, note=""):
    rec = _Recorder(module)
    for i, x in enumerate(inputs):
        rec.add("input", f"input{i}", (), {}, x, act=True)
    with torch.enable_grad(), _module_hooks(module, rec.pre, rec.post), _function_mode(rec.call):
        out = module(*inputs)
    outputs = tuple(r for r in _flat(rec.convert(out)) if isinstance(r, Ref))
    return Trace(rec.nodes, "function-mode", note, rec.names, outputs)


@contextlib.contextmanager
def _eval_mode(module):
    """Every submodule in eval mode (dropout off: a deterministic forward), restored afterwards."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


def trace(module, example_inputs) -> Trace:
    """Trace ``module(*example_inputs)`` (in eval mode) by torch.fx, else by the function-mode recorder
    (module docstring)."""
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    with _eval_mode(module):
        try:
            return _fx_trace(module, inputs)
        except Exception as exc:          # noqa: BLE001 — any fx failure means: trace the execution instead
            reason = f"torch.fx failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        return _function_trace(module, inputs, reason)


def example_inputs(module, batch=2, seq=8):
    """A guess at inputs for ``module``: token ids for a first ``nn.Embedding``, N(0, 1) rows for a first
    ``nn.Linear``, 8×8 images for a first ``Conv*d`` (registration order), as a tuple."""
    first = next((m for m in module.modules()
                  if isinstance(m, (nn.Embedding, nn.Linear, nn.modules.conv._ConvNd, nn.MultiheadAttention))), None)
    dtype = next((p.dtype for p in module.parameters() if p.is_floating_point()), torch.float32)
    g = torch.Generator().manual_seed(0)
    if isinstance(first, nn.Embedding):
        return (torch.randint(0, first.num_embeddings, (batch, seq), generator=g),)
    if isinstance(first, nn.Linear):
        return (torch.randn((batch, first.in_features), generator=g, dtype=dtype),)
    if isinstance(first, nn.MultiheadAttention):
        x = torch.randn((batch, seq, first.embed_dim) if first.batch_first else (seq, batch, first.embed_dim),
                        generator=g, dtype=dtype)
        return (x, x, x)
    if isinstance(first, nn.modules.conv._ConvNd):
        shape = (batch, first.in_channels) + (8,) * len(first.kernel_size)
        return (torch.randn(shape, generator=g, dtype=dtype),)
    raise ValueError("example inputs: no Embedding/Linear/Conv layer to read the input shape from; pass them")


# ----------------------------------------------------------------------------------------------- analysis
def _acts(t, node, args=None):
    """Refs of the activation (input-dependent) tensor arguments of ``node``."""
    src = (node.args, node.kwargs) if args is None else args
    return [r for r in _flat(src) if isinstance(r, Ref) and t.nodes[r.index].act]


def _tensorish(v):
    return isinstance(v, torch.Tensor) or (isinstance(v, (tuple, list)) and any(isinstance(x, torch.Tensor) for x in v))


def _scalar(x):
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, torch.Tensor) and x.numel() == 1:
        return float(x.detach())
    return None


def _other_arg(t, node, act):
    """The value of the one non-activation argument of a binary op (a number or a tensor)."""
    for a in node.args[:2]:
        if a != act:
            return t.value(a) if isinstance(a, Ref) else a
    return None


def _projection_of(t, node, root):
    """(weight name, module path, bias name, features) of a Linear module node or F.linear of parameters."""
    if node.kind == "module":
        mod = root.get_submodule(node.name)
        if isinstance(mod, nn.Linear):
            pre = f"{node.name}." if node.name else ""
            return pre + "weight", node.name, (pre + "bias") if mod.bias is not None else None
        return None
    if node.kind == "call" and node.name == "linear":
        wn = _param_behind(t, _arg(node, 1, "weight"))
        if wn is not None:
            return wn, wn.rpartition(".")[0], _param_behind(t, _arg(node, 2, "bias"))
    return None


def _param_behind(t, ref):
    """The parameter a tensor argument is, through casts and shape ops (``self.weight.type_as(x)``), or None."""
    while isinstance(ref, Ref):
        n = t.nodes[ref.index]
        if n.kind == "param":
            return None if n.name.startswith("<") else n.name
        refs = [r for r in _flat(n.args[:1]) if isinstance(r, Ref)] if n.kind == "call" else []
        if n.name not in _SHAPE_OPS or len(refs) != 1:
            return None
        ref = refs[0]
    return None


def _source(t, ref, root, depth=0):
    """(node index of the projection producing ``ref``, (weight, module, bias)) or (None, reason): followed
    back through shape ops, constant scalings and sums of such paths (module docstring)."""
    node = t.nodes[ref.index]
    proj = _projection_of(t, node, root)
    if proj is not None:
        return node.index, proj
    where = f"in {node.scope!r}" if node.scope else "in the root module"
    if node.kind == "module" and node.module_type in _PASS_MODULES and len(_acts(t, node)) == 1:
        return _source(t, _acts(t, node)[0], root, depth + 1)
    if node.kind == "module":
        return None, f"comes from {node.module_type} {node.name!r}, not from a Linear projection"
    if node.kind != "call" or depth > 200:
        return None, f"is not produced by a Linear projection ({node.kind} {node.name!r})"
    acts = _acts(t, node)
    ok = node.name in _SHAPE_OPS or node.name in _SUMS or (node.name in _SCALINGS and len(acts) == 1)
    if node.name == "div" and acts and node.args and acts[0] != node.args[0]:
        ok = False
    if not ok or not acts:
        return None, f"passes through {node.name!r} {where} (only shape ops, constant scalings and sums are followed)"
    found = [_source(t, r, root, depth + 1) for r in dict.fromkeys(acts)]
    bad = [f for f in found if f[0] is None]
    if bad:
        return bad[0]
    if len({f[0] for f in found}) > 1:
        return None, f"mixes the outputs of several projections at {node.name!r} {where}"
    return found[0]


def _path_factor(t, ref, depth=0):
    """Product of the constant scalar factors between the tensor ``ref`` and the last op before it that is not a
    shape op or a scaling (timm's ``q = q * self.scale``); nan when summed paths carry different factors."""
    node = t.nodes[ref.index]
    if node.kind != "call" or depth > 200:
        return 1.0
    acts = _acts(t, node)
    if node.name in _SCALINGS and len(acts) == 1 and not (node.name == "div" and node.args[0] != acts[0]):
        v = _scalar(_other_arg(t, node, acts[0]))
        f = 1.0 if v is None else (abs(v) if node.name == "mul" else 1.0 / abs(v))
        return f * _path_factor(t, acts[0], depth + 1)
    if node.name in _SHAPE_OPS and len(acts) == 1:
        return _path_factor(t, acts[0], depth + 1)
    if node.name in _SUMS and acts:
        fs = {round(_path_factor(t, r, depth + 1), 12) for r in dict.fromkeys(acts)}
        return fs.pop() if len(fs) == 1 else math.nan
    return 1.0


def _rows(t, ref, proj_index):
    """[start, stop) of the projection output features that ``ref`` depends on (autograd), or a reason."""
    q, out = t.value(ref), t.nodes[proj_index].value
    if not (isinstance(q, torch.Tensor) and q.requires_grad and out.requires_grad):
        return None, "no autograd graph from the projection (its parameters do not require grad)"
    g = torch.Generator().manual_seed(0)
    w = torch.randn(q.shape, generator=g, dtype=q.dtype)
    (grad,) = torch.autograd.grad(q, out, grad_outputs=w, retain_graph=True, allow_unused=True)
    if grad is None:
        return None, "does not depend on the projection's output"
    used = (grad.detach().abs().reshape(-1, grad.shape[-1]).sum(0) != 0).nonzero().flatten()
    start, stop = int(used.min()), int(used.max()) + 1
    if used.numel() != stop - start:
        return None, "uses non-contiguous output features of its projection"
    return (start, stop), None


def _locate(t, ref, root):
    """:class:`Projection` feeding the tensor ``ref`` (query or key), or (None, reason)."""
    idx, info = _source(t, ref, root)
    if idx is None:
        return None, info
    rows, reason = _rows(t, ref, idx)
    if rows is None:
        return None, reason
    w, mod, b = info
    return Projection(w, mod, 0, rows[0], rows[1], b), None


def _arg(node, i, name, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _mha_site(t, node, root, method, ordinal):
    mod = root.get_submodule(node.name)
    E, h = mod.embed_dim, mod.num_heads
    bias = f"{node.name}.in_proj_bias" if mod.in_proj_bias is not None else None
    if mod._qkv_same_embed_dim:
        q = Projection(f"{node.name}.in_proj_weight", node.name, 0, 0, E, bias)
        k = Projection(f"{node.name}.in_proj_weight", node.name, 0, E, 2 * E, bias)
    else:
        q = Projection(f"{node.name}.q_proj_weight", node.name, 0, 0, E, bias)
        k = Projection(f"{node.name}.k_proj_weight", node.name, 0, 0, E, None)
    d = E // h
    return dict(module=node.name, kind="multihead", ordinal=ordinal, query=q, key=k, scale=1 / math.sqrt(d),
                scale_expr=f"1/√{d} (nn.MultiheadAttention)", heads=h, head_dim=d, method=method)


def _qk_site(t, qref, kref, root):
    q, qr = _locate(t, qref, root)
    k, kr = _locate(t, kref, root)
    qv = t.value(qref)
    d = int(qv.shape[-1])
    heads = (q.stop - q.start) // d if q is not None else (int(qv.shape[-3]) if qv.ndim >= 4 else None)
    reason = None if q is not None else f"the query {qr}"
    return dict(query=q, key=k, heads=heads, head_dim=d, reason=reason,
                path=_path_factor(t, qref) * _path_factor(t, kref))


def _with_path(out, scale, expr):
    """``scale`` and ``expr`` times the constant factors found on the query and key paths."""
    f = out.pop("path")
    if f != 1.0:
        expr += f"; q·k scaled ×{f:.6g} on the query/key path"
    out.update(scale=scale * f, scale_expr=expr, path_factor=f)
    return out


def _sdpa_site(t, node, root):
    qref, kref = _arg(node, 0, "query"), _arg(node, 1, "key")
    scale = _arg(node, 6, "scale")
    scale = t.value(scale) if isinstance(scale, Ref) else scale
    out = _qk_site(t, qref, kref, root)
    if scale is None:
        return _with_path(out, 1 / math.sqrt(out["head_dim"]), f"1/√{out['head_dim']} (SDPA default scale)")
    return _with_path(out, float(scale), f"scale={float(scale):.6g}")


def _logit_walk(t, ref):
    """Back from a softmax input to ``q @ kᵀ`` through constant scalings, masks and casts:
    (matmul node, factor, expression) or (None, the op that stopped the walk)."""
    factor, parts = 1.0, []
    for _ in range(64):
        node = t.nodes[ref.index]
        if node.kind != "call":
            return None, None, f"{node.kind} {node.name!r}"
        acts = _acts(t, node)
        if node.name in _MATMULS:
            ops = _mm_operands(t, node)
            return (node, factor, " ".join(reversed(parts))) if len(ops) == 2 else (None, None, node.name)
        if len(acts) != 1:
            return None, None, node.name
        act = acts[0]
        if node.name in _SCALINGS:
            v = _scalar(_other_arg(t, node, act))
            if node.name == "div" and node.args[0] != act:
                return None, None, "division by the logits"
            if v is not None:
                factor *= v if node.name == "mul" else 1.0 / v
                parts.append(f"{'×' if node.name == 'mul' else '÷'} {v:.6g}")
            else:
                parts.append(f"{'×' if node.name == 'mul' else '÷'} tensor")
        elif node.name not in _MASKS and node.name not in ("add", "sub") and node.name not in _SHAPE_OPS:
            return None, None, node.name
        ref = act
    return None, None, "a chain too long"


def _after_softmax(t, ref):
    """Whether ``ref`` is a softmax's output up to shape ops (the weights of ``att @ v``)."""
    node = t.nodes[ref.index]
    while node.kind == "call" and node.name in _SHAPE_OPS and len(_acts(t, node)) == 1:
        node = t.nodes[_acts(t, node)[0].index]
    return node.kind == "call" and node.name in ("softmax", "log_softmax")


def _matmul_upstream(t, ref):
    """A product q·kᵀ of two activations (not an ``att @ v``) reached from ``ref`` through torch calls (not
    modules), or None."""
    todo, seen = [ref.index], set()
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        n = t.nodes[i]
        if n.kind != "call":
            continue
        ops = _mm_operands(t, n) if n.name in _MATMULS else []
        if len(ops) == 2 and not any(_after_softmax(t, r) for r in ops):
            return n
        if n.name not in ("softmax", "log_softmax") or i == ref.index:    # another softmax: its own site
            todo.extend(r.index for r in _acts(t, n))
    return None


def _softmax_site(t, node, root):
    ref = _arg(node, 0, "input")
    mm, factor, expr = _logit_walk(t, ref)
    if mm is None:
        up = _matmul_upstream(t, ref)
        if up is None:
            return None                    # a softmax, but not over q·kᵀ (a router, a read-out)
        return dict(kind="unrecognised", op=up, query=None, key=None, scale=math.nan, heads=None, head_dim=None,
                    scale_expr="?", reason=f"the softmax's logits come from q·kᵀ through {expr!r}, which is not "
                    "a constant scaling, a mask or a cast: the logit scale cannot be read")
    ops = _mm_operands(t, mm)
    if mm.name == "baddbmm":
        alpha = _scalar(_arg(mm, 4, "alpha", 1.0))
        factor, expr = factor * (1.0 if alpha is None else alpha), f"× {alpha:.6g} (baddbmm alpha) {expr}"
    out = _qk_site(t, ops[0], ops[1], root)
    out.update(kind="explicit", op=mm)
    return _with_path(out, factor, f"(q @ kᵀ) {expr}".strip())


def _mm_operands(t, mm):
    """The two activation operands (query first) of a matmul-like node."""
    if mm.name == "einsum":
        return _acts(t, mm, mm.args[1:])
    if mm.name == "baddbmm":            # Tensor.baddbmm(batch1=…, batch2=…) too (BLOOM's alibi.baddbmm)
        return _acts(t, mm, (_arg(mm, 1, "batch1"), _arg(mm, 2, "batch2")))
    ops = _acts(t, mm, (mm.args, mm.kwargs))
    return ops[::-1] if mm.name == "rmatmul" else ops


def _sites(t, root):
    counts, per_kind, sites = {}, {}, []

    def ordinal(scope, cls, index):
        """Index of node ``index`` among the ``cls`` ops of ``scope`` (matches :func:`capture_logits`)."""
        same = [n.index for n in t.nodes if n.kind == "call" and n.scope == scope and _op_class(n.name) == cls]
        return same.index(index)

    for node in t.nodes:
        info, op_index = None, node.index
        if node.kind == "module" and node.module_type == "MultiheadAttention":
            counts[node.name] = counts.get(node.name, -1) + 1
            info = _mha_site(t, node, root, t.method, counts[node.name])
        elif node.kind == "call" and node.name == "sdpa":
            info = _sdpa_site(t, node, root)
            info.update(module=node.scope, kind="sdpa", ordinal=ordinal(node.scope, "sdpa", node.index))
        elif node.kind == "call" and node.name in ("softmax", "log_softmax"):
            info = _softmax_site(t, node, root)
            if info is not None:
                op = info.pop("op")
                op_index = op.index
                info.update(module=op.scope, ordinal=ordinal(op.scope, "matmul", op.index))
        elif node.kind == "call" and node.name == "multi_head_attention_forward":
            info = dict(module=node.scope, kind="unrecognised", ordinal=0, query=None, key=None, scale=math.nan,
                        heads=None, head_dim=None, scale_expr="?",
                        reason="F.multi_head_attention_forward called outside nn.MultiheadAttention")
        if info is None:
            continue
        key = (info["module"], info["kind"])
        n = per_kind.get(key, 0)
        per_kind[key] = n + 1
        info.setdefault("method", t.method)
        info.setdefault("reason", None)
        name = f"{info['module']}:{info['kind']}" + (f"#{n}" if n else "")
        sites.append(AttentionSite(name=name, **info))
        t.site_nodes[name] = (op_index, node.index if node.name in ("softmax", "log_softmax") else None)
    return tuple(sites)


def _op_class(name):
    return "sdpa" if name == "sdpa" else "matmul" if name in _MATMULS else None


def _inputs(example_inputs):
    return tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)


def find_attention(module, example_inputs) -> tuple:
    """Every attention of ``module(*example_inputs)`` as :class:`AttentionSite` (module docstring)."""
    t = trace(module, _inputs(example_inputs))
    t.method += f" ({t.note})" if t.note else ""
    return _sites(t, module)


def width_scaling(sites_a, sites_b, n_a, n_b) -> tuple:
    """:class:`AttentionScaling` of each site from its traces at widths ``n_a`` and ``n_b`` (the same factory)."""
    if [s.name for s in sites_a] != [s.name for s in sites_b]:
        raise ValueError(f"the attention sites differ between widths {n_a} ({[s.name for s in sites_a]}) and "
                         f"{n_b} ({[s.name for s in sites_b]}); the architecture may change only in its sizes")
    out = []
    for a, b in zip(sites_a, sites_b):
        def how(x, y, what):
            if x is None or y is None:
                return "unknown"
            if x == y:
                return "fixed"
            if x * n_b == y * n_a:
                return "scales"
            raise ValueError(f"attention {a.name!r}: the {what} goes from {x} to {y} between widths {n_a} and "
                             f"{n_b} — neither fixed nor proportional to the width")
        e = -math.log(b.scale / a.scale) / math.log(n_b / n_a) if a.scale > 0 and b.scale > 0 else math.nan
        e = round(e, 9) if math.isfinite(e) else e
        out.append(AttentionScaling(a, (n_a, n_b), how(a.head_dim, b.head_dim, "head dimension"),
                                    how(a.heads, b.heads, "number of heads"), e, b))
    return tuple(out)


def unwrap(net):
    """The module under DistributedDataParallel (``.module``) or torch.compile (``._orig_mod``)."""
    while True:
        inner = getattr(net, "_orig_mod", None) or (getattr(net, "module", None)
                                                     if type(net).__name__ == "DistributedDataParallel" else None)
        if inner is None:
            return net
        net = inner


def plain_key(key: str) -> str:
    """The name a parametrized tensor has in the plain module: ``a.parametrizations.weight.original`` →
    ``a.weight`` (other names unchanged)."""
    parts = key.split(".")
    if len(parts) >= 3 and parts[-3] == "parametrizations" and parts[-1] == "original":
        return ".".join(parts[:-3] + [parts[-2]])
    return key


def _owner(module, name):
    path, _, attr = name.rpartition(".")
    parts = path.split(".")
    if len(parts) >= 2 and parts[-2] == "parametrizations" and attr == "original":
        path, attr = ".".join(parts[:-2]), parts[-1]
    return path, (module.get_submodule(path) if path else module), attr


def _functional_reads(t, module):
    """[(parameter name, op, scope)] of leaf-owned Embedding/Linear weights whose values the forward itself
    multiplies (followed as tensor data through shape ops: ``x.to(w.dtype)`` or ``w.shape`` are not uses)."""
    users = {}
    for n in t.nodes:
        if n.kind != "call":
            continue
        data = n.args[1:] if n.name == "einsum" else n.args[:3] if n.name in _MATMULS | {"linear"} else n.args[:1]
        for r in _flat(data):
            if isinstance(r, Ref) and r.item is None:
                users.setdefault(r.index, []).append(n)
    out = []
    for n in t.nodes:
        if n.kind != "param" or n.name.startswith("<"):
            continue
        path, owner, attr = _owner(module, n.name)
        if not (isinstance(owner, (nn.Embedding, nn.Linear)) and attr == "weight"):
            continue
        todo = list(users.get(n.index, []))
        while todo:
            u = todo.pop()
            if u.name in _MATMULS or u.name == "linear":
                out.append((n.name, u.name, u.scope))
                break
            if u.name in _SHAPE_OPS and isinstance(u.value, torch.Tensor):
                todo.extend(users.get(u.index, []))
    return out


def _module_ties(module):
    groups = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append(name)
    ties = []
    for names in groups.values():
        if len(names) < 2:
            continue
        owners = [_owner(module, n) for n in names]
        types = [(_base_type(m), a) for _, m, a in owners]
        emb = [o for o in owners if isinstance(o[1], nn.Embedding) and o[2] == "weight"]
        lin = [o for o in owners if isinstance(o[1], nn.Linear) and o[2] == "weight"]
        if len(names) == 2 and len(emb) == 1 and len(lin) == 1:
            ties.append(Tie(tuple(names), "embedding-readout", emb[0][0], lin[0][0],
                            f"{lin[0][0]!r} (Linear) reads out with the token embedding {emb[0][0]!r}"))
        elif len(set(types)) == 1:
            ties.append(Tie(tuple(names), "same-module-type", detail=f"one {types[0][0].__name__}.{types[0][1]} "
                            f"shared by {len(names)} modules"))
        else:
            kinds = ", ".join(f"{n} ({t.__name__}.{a})" for n, (t, a) in zip(names, types))
            ties.append(Tie(tuple(names), "other", detail=f"one tensor in different roles: {kinds}"))
    return ties


def _functional_ties(t, module):
    return [Tie((name,), "functional", detail=f"{name!r} is also multiplied by {op!r} in the forward of "
                f"{scope or 'the root module'!r} (a read-out written as a function, not a module)")
            for name, op, scope in _functional_reads(t, module)]


def find_ties(module, example_inputs=None) -> tuple:
    """Parameters shared under several names (module docstring); with ``example_inputs`` also the
    "functional" ties found in the traced forward."""
    ties = _module_ties(module)
    if example_inputs is not None:
        ties += _functional_ties(trace(module, _inputs(example_inputs)), module)
    return tuple(ties)


_AFFINE = (nn.LayerNorm, nn.Linear, nn.GroupNorm) + ((nn.RMSNorm,) if hasattr(nn, "RMSNorm") else ())


def _feeding(t, module, path):
    """The module whose output is the only input of module ``path`` and is used nowhere else, if it is an
    affine layer (LayerNorm/RMSNorm/GroupNorm with weights, Linear): its path, or (None, reason)."""
    calls = [n for n in t.nodes if n.kind == "module" and n.name == path]
    if len(calls) != 1:
        return None, f"{path!r} is called {len(calls)} times in the forward"
    acts = _acts(t, calls[0])
    src = t.nodes[acts[0].index] if len(acts) == 1 else None

    def users_of(node):
        return [n for n in t.nodes if any(isinstance(r, Ref) and r.index == node.index for r in _flat((n.args, n.kwargs)))]

    while (src is not None and src.kind == "call" and src.name in _SHAPE_OPS and len(_acts(t, src)) == 1
           and len(users_of(src)) == 1):          # h[:, -k:] before the read-out (transformers' logits_to_keep)
        src = t.nodes[_acts(t, src)[0].index]
    if src is None or src.kind != "module":
        return None, f"the input of {path!r} is not the output of a module ({src.name if src else 'several'})"
    users = users_of(src)
    mod = module.get_submodule(src.name)
    if len(users) != 1 or not isinstance(mod, _AFFINE) or getattr(mod, "weight", None) is None:
        return None, (f"the input of {path!r} comes from {src.module_type} {src.name!r}, "
                      + ("which is used elsewhere too" if len(users) != 1 else "which has no affine weight"))
    return src.name, None


@dataclass(frozen=True)
class Analysis:
    """:func:`analyse`: ``sites`` (:func:`find_attention`), ``ties`` (:func:`find_ties`), ``method`` of the
    trace, ``readout_inputs``: {read-out path of an embedding-readout tie: (affine module feeding it only, or
    None, reason)}."""

    sites: tuple
    ties: tuple
    method: str
    readout_inputs: dict


def analyse(module, example_inputs, t=None) -> Analysis:
    """Attention sites, ties and the affine layer feeding each tied read-out, from one trace (``t``: made already)."""
    t = trace(module, _inputs(example_inputs)) if t is None else t
    method = t.method + (f" ({t.note})" if t.note else "")
    ties = tuple(_module_ties(module) + _functional_ties(t, module))
    feed = {tie.readout: _feeding(t, module, tie.readout) for tie in ties if tie.kind == "embedding-readout"}
    sites = tuple(dataclasses.replace(x, method=method) for x in _sites(t, module))
    return Analysis(sites, ties, method, feed)


# ----------------------------------------------------------------------------------------------- capture
def _mha_logits(mod, args, kwargs):
    """q·kᵀ/√d_h of an nn.MultiheadAttention call, (B, heads, T_q, T_k), from its effective projections."""
    query = args[0] if args else kwargs["query"]
    key = args[1] if len(args) > 1 else kwargs["key"]
    batched = query.dim() == 3
    if batched and not mod.batch_first:
        query, key = query.transpose(0, 1), key.transpose(0, 1)
    if not batched:
        query, key = query[None], key[None]
    E, h = mod.embed_dim, mod.num_heads
    b = mod.in_proj_bias
    if mod._qkv_same_embed_dim:
        Wq, Wk = mod.in_proj_weight[:E], mod.in_proj_weight[E:2 * E]
    else:
        Wq, Wk = mod.q_proj_weight, mod.k_proj_weight
    q = nn.functional.linear(query, Wq, None if b is None else b[:E])
    k = nn.functional.linear(key, Wk, None if b is None else b[E:2 * E])
    d = E // h
    q = q.reshape(q.shape[0], q.shape[1], h, d).transpose(1, 2)
    k = k.reshape(k.shape[0], k.shape[1], h, d).transpose(1, 2)
    return (q @ k.transpose(-2, -1)) / math.sqrt(d)


def _sdpa_logits(args, kwargs):
    q = args[0] if args else kwargs["query"]
    k = args[1] if len(args) > 1 else kwargs["key"]
    scale = args[6] if len(args) > 6 else kwargs.get("scale")
    if scale is None:
        scale = 1 / math.sqrt(q.shape[-1])
    if k.dim() >= 3 and q.dim() >= 3 and k.shape[-3] != q.shape[-3]:        # grouped-query attention
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
    return (q @ k.transpose(-2, -1)) * scale


@contextlib.contextmanager
def capture_logits(module, sites):
    """Within the block, each forward of ``module`` appends to ``store[site.name]`` the attention logits
    s · q·kᵀ of every site (before masks and softmax; (…, heads, T_q, T_k), detached), as the module computes
    them — its current weights, multipliers and scale. ``sites`` from :func:`find_attention` on this module."""
    sites = tuple(sites)
    bad = [s.name for s in sites if s.kind == "unrecognised"]
    if bad:
        raise ValueError(f"capture_logits: cannot compute the logits of unrecognised attention {bad}")
    store = {s.name: [] for s in sites}
    mha = {(s.module, s.ordinal): s for s in sites if s.kind == "multihead"}
    ops = {(s.module, "sdpa" if s.kind == "sdpa" else "matmul", s.ordinal): s for s in sites if s.kind != "multihead"}
    paths = {id(m): p for p, m in module.named_modules(remove_duplicate=False)}
    st = {"scope": [], "leaf": 0, "counts": {}}

    def pre(mod, args, kwargs):
        path = paths.get(id(mod), "?")
        if mod is module and st["leaf"] == 0:
            st["counts"].clear()
        leaf = is_leaf(mod)
        if leaf and st["leaf"] == 0 and isinstance(mod, nn.MultiheadAttention):
            i = st["counts"][(path, "module")] = st["counts"].get((path, "module"), -1) + 1
            site = mha.get((path, i))
            if site is not None:
                with torch.no_grad():
                    store[site.name].append(_mha_logits(mod, args, kwargs).detach())
        if leaf:
            st["leaf"] += 1
        else:
            st["scope"].append(path)

    def post(mod, args, kwargs, out):
        if is_leaf(mod):
            st["leaf"] -= 1
        elif st["scope"]:
            st["scope"].pop()

    def call(func, args, kwargs, out):
        if st["leaf"] or not st["scope"]:
            return
        cls = _op_class(_func_name(func))
        if cls is None:
            return
        key = (st["scope"][-1], cls)
        i = st["counts"][key] = st["counts"].get(key, -1) + 1
        site = ops.get(key + (i,))
        if site is None:
            return
        with torch.no_grad():
            if cls == "sdpa":
                logits = _sdpa_logits(args, kwargs)
            else:                  # the factors after the product (q/k path factors are inside it already)
                prod = (torch.bmm(args[1] if len(args) > 2 else kwargs["batch1"],
                                  args[2] if len(args) > 2 else kwargs["batch2"])
                        if _func_name(func) == "baddbmm" else out)
                logits = prod * (site.scale / site.path_factor)
        store[site.name].append(logits.detach())

    with _module_hooks(module, pre, post), _function_mode(call):
        yield store


# helpers shared within limits.torch (the offsets of limits.torch.offsets read the same trace)
SHAPE_OPS = _SHAPE_OPS


def flat(x):
    """Every leaf of nested tuples/lists/dicts/slices (a node's arguments)."""
    return _flat(x)


def op_name(func) -> str:
    """The canonical name of a torch function or tensor method, as the traced nodes name it."""
    return _func_name(func)


def mm_operands(t, mm):
    """The two activation operands (query first) of a matmul-like node of trace ``t``."""
    return _mm_operands(t, mm)


def sites_of(t, root) -> tuple:
    """The attention sites of trace ``t`` of module ``root`` (:func:`find_attention` on a made trace)."""
    return _sites(t, root)


def module_kind(mod, pname):
    """(fan-in dims, fan-out dims) of parameter ``pname`` of a known module (Linear, Conv*d, ConvTranspose*d,
    Embedding, MultiheadAttention projections), or None."""
    if isinstance(mod, nn.modules.conv._ConvTransposeNd):
        return ((0,), (1,)) if pname == "weight" else None
    if isinstance(mod, (nn.Linear, nn.modules.conv._ConvNd)):
        return ((1,), (0,)) if pname == "weight" else None
    if isinstance(mod, nn.Embedding):
        return ((0,), (1,)) if pname == "weight" else None
    if isinstance(mod, nn.MultiheadAttention) and pname in ("in_proj_weight", "q_proj_weight", "k_proj_weight",
                                                            "v_proj_weight"):
        return ((1,), (0,))
    return None


__all__ = ["SHAPE_OPS", "flat", "mm_operands", "sites_of", "module_kind", "find_attention", "find_ties", "analyse", "Analysis", "unwrap", "plain_key", "width_scaling", "capture_logits", "example_inputs", "trace", "is_leaf",
           "AttentionSite", "AttentionScaling", "Projection", "Tie", "Trace", "KINDS"]
