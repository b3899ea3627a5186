"""Short ``repr`` of parameterised factories (:class:`limits.torch.apply_params.Parameterised`,
:class:`limits.torch.depth.DepthParameterised`): a few lines — the table, the factory, the base sizes, the tensors
by role, the attention sites and tied read-outs — and where the full per-tensor table is (``P.to_markdown()``).
The dataclass repr listed every rule and traced site: kilobytes for a small transformer."""
from __future__ import annotations

from collections import Counter

ROLE_ORDER = ("input", "hidden", "output", "vector", "constant")


def factory_name(f) -> str:
    """``module:qualname`` of a factory (or its type for other callables)."""
    if type(f).__name__ == "AtDepth":                   # limits.torch.depth.AtDepth(factory, depth)
        f = f.factory
    mod, name = getattr(f, "__module__", None), getattr(f, "__qualname__", None)
    return f"{mod}:{name}" if mod and name else type(f).__name__


def roles_text(rules) -> str:
    """``27 tensors: 1 input, 8 hidden, 1 output, 16 vector, 1 constant``."""
    c = Counter(q.role for q in rules)
    parts = [f"{c[r]} {r}" for r in ROLE_ORDER if c.get(r)] + [f"{n} {r}" for r, n in c.items() if r not in ROLE_ORDER]
    return f"{len(rules)} tensor{'s' if len(rules) != 1 else ''}: " + ", ".join(parts)


def attention_text(attention, readouts) -> str:
    """``attention: 2 sites (multihead; head dim ∝ N); tied read-outs: lm_head.weight`` (or none)."""
    if attention:
        kinds = sorted({a.site.kind for a in attention})
        dims = sorted({str(getattr(a, "head_dim", "?")) for a in attention})
        head = {"scales": "head dim ∝ N", "fixed": "head dim fixed"}
        att = (f"attention: {len(attention)} site{'s' if len(attention) != 1 else ''} ({', '.join(kinds)}; "
               + ", ".join(head.get(d, f"head dim {d}") for d in dims) + ")")
    else:
        att = "attention: none traced"
    tied = ", ".join(t.name for t in readouts) if readouts else "none"
    return f"{att}; tied read-outs: {tied}"


def parameterised_repr(P) -> str:
    """The short repr of a :class:`Parameterised` (module docstring)."""
    return (f"Parameterised({P.name} of {factory_name(P.factory)}, {P.optimizer_name}, gauge {P.gauge or 'as derived'}, "
            f"base width {P.base_width})\n"
            f"  {roles_text(P.rules)}; {attention_text(P.attention, P.readouts)}\n"
            f"  build: P(width); optimizer: P.optimizer(module, lr); full table: print(P.to_markdown(width))")


def depth_parameterised_repr(P) -> str:
    """The short repr of a :class:`DepthParameterised`."""
    W = P.width_rules
    return (f"DepthParameterised({P.name} of {factory_name(P.factory)}, {P.optimizer_name}, gauge "
            f"{P.gauge or 'as derived'}, base width {P.base_width}, base depth {P.base_depth})\n"
            f"  blocks in {P.layout.prefix!r}: branch multiplier (L/{P.base_depth})^-{P.alpha:g}, block learning rates "
            f"× (L/{P.base_depth})^{P.depth_lr_exponent:g}\n"
            f"  at the base depth {roles_text(W.rules)}; {attention_text(W.attention, W.readouts)}\n"
            f"  build: P(width, depth); optimizer: P.optimizer(module, lr); full table: "
            f"print(P.to_markdown(width, depth))")


def coordcheck_repr(r) -> str:
    """``TorchCoordCheck(muP (parameterised): widths 64–512, 4 seeds × 3 steps, 27 rows, 84 fits → passed)``."""
    ws = [int(w) for w in r.widths]
    if r.passed:
        verdict = "passed"
    else:
        bad, none = r.failing_tensors(), [n for n, _ in r.unmeasured()]
        verdict = ", ".join(x for x in ((f"not as predicted: {', '.join(bad[:3])}" + (" …" if len(bad) > 3 else ""))
                                       if bad else "", f"no measurement: {len(none)} row(s)" if none else "") if x)
    return (f"TorchCoordCheck({r.name}: widths {ws[0]}–{ws[-1]}, {r.seeds} seeds × {r.steps} steps, "
            f"{len(r.tensors)} rows, {r.tests} fits → {verdict}; print(r) for the table)")


__all__ = ["coordcheck_repr", "parameterised_repr", "depth_parameterised_repr", "factory_name", "roles_text", "attention_text"]
