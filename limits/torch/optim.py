"""Optimizer groups of a parameterised module: per-tensor learning rates, width-scaled weight decay, and
learning-rate schedules that keep the per-tensor ratios.

    groups = P.param_groups(net, lr, weight_decay=0.1)     # one group per tensor: lr_t = lr·m_t, wd_t = wd/m_t
    opt = P.optimizer(net, lr, weight_decay=0.1)           # AdamW (or SGD) over those groups
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=group_lrs(opt, 3e-3), total_steps=T)
    check_ratios(opt)                                      # raises if a scheduler broke the ratios

**Learning rates.** Tensor t gets lr_t = lr · m_t with m_t = r^{−c_t} (``lr_mult`` in its group).

**Weight decay (AdamW, SGD): lr_t · wd_t = lr · wd for every tensor**, i.e. wd_t = wd / m_t. AdamW updates
p ← (1 − lr_t wd_t) p − lr_t u_t, so the decay factor per step, 1 − lr·wd, and the decay time 1/(lr·wd) are the
same for every tensor at every width, and the equilibrium under a steady update direction u,
p* = −u / wd_t = −(m_t / (lr·wd)) · lr·u, is the tensor's own μP update size (∝ m_t) times a width-independent
number of steps: a hidden weight's equilibrium W* moves W*x by Θ(1), as its updates do. torch's default (the
same wd in every group) gives lr_t·wd = lr·wd·m_t: decay ∝ 1/N slower on hidden weights under μP and an
equilibrium p* = −u/wd with Θ(1) entries, so W*x ∝ N. The rule is mup's ``MuAdamW`` default (wd multiplied by
width_mult where lr is divided by it) and reproduces ``AdamW(lr, wd)`` of the factory at the base width (all
m_t = 1). "Independent" decay (p ← (1 − λ) p, λ fixed) would also be width-independent but would not follow
a learning-rate schedule; with this rule the decay follows the schedule, as in AdamW. ``Adam``'s own
``weight_decay`` is an L2 term inside Adam's normalisation (no width rule): refused — use AdamW.

**Schedulers.** ``LambdaLR``, ``StepLR``, ``CosineAnnealingLR``, ``LinearLR``, ``SequentialLR`` … multiply each
group's own initial lr: the ratios survive. ``OneCycleLR(opt, max_lr=3e-3)`` and ``CyclicLR(opt, base_lr=…,
max_lr=…)`` with *floats* overwrite every group's lr with the same value — every tensor back to one rate, μP
silently undone. Pass one value per group: ``max_lr=group_lrs(opt, 3e-3)`` (lr·m_t).
"""
from __future__ import annotations

import math

import torch

_DECAYED = ("adamw", "sgd")


def current_parameters(module) -> dict:
    """{name as at build time: parameter} of ``module`` as it is now — under DistributedDataParallel or
    torch.compile (unwrapped), FSDP2's ``fully_shard`` (same names, parameters replaced by DTensors) or FSDP1
    (``_fsdp_wrapped_module`` segments dropped; needs ``use_orig_params=True``)."""
    from .graph import plain_key, unwrap

    out = {}
    for name, p in unwrap(module).named_parameters():
        parts = [x for x in name.split(".") if x not in ("_fsdp_wrapped_module", "_checkpoint_wrapped_module")]
        out[plain_key(".".join(parts))] = p
    return out


def param_groups(multipliers, lr, weight_decay=0.0, no_decay=(), optimizer="adamw", current=None) -> list:
    """One group per tensor from ``multipliers`` [(name, tensor, m_t)]: ``lr`` = lr·m_t, ``lr_mult`` = m_t and,
    with ``weight_decay``, ``weight_decay`` = wd/m_t (0 for names in ``no_decay``) — module docstring.
    ``current``: {name: parameter} of the module now (:func:`current_parameters`), preferred by name."""
    wd = float(weight_decay)
    if wd < 0 or not math.isfinite(wd):
        raise ValueError(f"weight_decay must be a finite number >= 0, got {weight_decay!r}")
    if wd and optimizer not in _DECAYED:
        raise ValueError(f"weight_decay with {optimizer!r}: Adam's weight_decay is an L2 term inside its "
                         "normalisation and has no width rule; parameterise(..., optimizer='adamw') decouples it")
    skip = set(no_decay)
    unknown = skip - {n for n, _, _ in multipliers}
    if unknown:
        raise ValueError(f"no_decay: no parameter named {sorted(unknown)}")
    groups = []
    current = current or {}
    for name, p, m in multipliers:
        g = {"params": [current.get(name, p)], "lr": float(lr) * m, "lr_mult": m, "name": name}
        if wd:
            g["weight_decay"] = 0.0 if name in skip else wd / m
        groups.append(g)
    return groups


def group_lrs(optimizer, lr) -> list:
    """lr · ``lr_mult`` of each group of ``optimizer`` (built from :func:`param_groups`): the per-group form of
    a scheduler's ``max_lr``/``base_lr`` (``OneCycleLR``, ``CyclicLR``)."""
    out = []
    for i, g in enumerate(optimizer.param_groups):
        if "lr_mult" not in g:
            raise ValueError(f"group {i} ({g.get('name', '?')}) has no 'lr_mult': build the optimizer from "
                             "P.param_groups / P.optimizer")
        out.append(float(lr) * g["lr_mult"])
    return out


def check_ratios(optimizer, rtol=1e-9) -> float:
    """The common base rate lr_t / m_t of every group; ValueError naming the groups where it differs (a
    scheduler given one float for all groups)."""
    bases = [(g.get("name", str(i)), g["lr"] / g["lr_mult"]) for i, g in enumerate(optimizer.param_groups)
             if "lr_mult" in g]
    if not bases:
        raise ValueError("check_ratios: no group has 'lr_mult' (not built from P.param_groups)")
    ref = bases[0][1]
    bad = [(n, b) for n, b in bases if not math.isclose(b, ref, rel_tol=rtol, abs_tol=0.0)]
    if bad:
        raise ValueError(f"per-tensor learning-rate ratios broken: lr/lr_mult is {ref:.6g} for {bases[0][0]!r} but "
                         + ", ".join(f"{b:.6g} for {n!r}" for n, b in bad[:4])
                         + (f" (+{len(bad) - 4} more)" if len(bad) > 4 else "")
                         + " — a scheduler given one float for every group (OneCycleLR/CyclicLR max_lr=…)? "
                         "pass max_lr=limits.torch.optim.group_lrs(opt, lr)")
    return ref


def build(optimizer_name, groups, lr, **kw):
    """``torch.optim.{SGD, Adam, AdamW}`` over ``groups``."""
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[optimizer_name]
    if optimizer_name == "adamw":
        kw.setdefault("weight_decay", 0.0)     # the groups carry theirs; torch's default 0.01 would decay the rest
    return cls(groups, lr=float(lr), **kw)


__all__ = ["param_groups", "current_parameters", "group_lrs", "check_ratios", "build"]
