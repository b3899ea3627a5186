"""μP / Depth-μP on Hugging Face transformers models built from configs (``limits.torch.zoo``): the survey, the
calibrated coordinate checks, the μTransfer studies and the Depth-μP check behind ``docs/zoo.rst``. Needs the
``zoo`` extra; every piece is stored as JSON under ``benchmarks/results/zoo/`` as soon as it is done, and a run
skips the pieces already stored (delete a file to redo it)::

    nice -n 10 python benchmarks/zoo_study.py survey --label main       # parameterise + a small check, both head layouts
    nice -n 10 python benchmarks/zoo_study.py check [FAMILY …]          # false alarms (K checks × 10 seeds) + injected bugs
    nice -n 10 python benchmarks/zoo_study.py transfer [FAMILY …]       # SP and μP learning-rate transfer
    nice -n 10 python benchmarks/zoo_study.py depth                     # Depth-μP on Llama's decoder layers
    nice -n 10 python benchmarks/zoo_study.py eps                       # ConvNeXt under Adam's ε (gradients, scan)
    python benchmarks/zoo_study.py scaling                              # the HF pull request's `scaling` criterion, measured
    python benchmarks/zoo_study.py table --write                        # docs/zoo.rst's tables from the stored results
    python benchmarks/zoo_study.py table --short                        # the coverage table in short (markdown)
    python benchmarks/zoo_study.py figure                               # docs/zoo_transfer.png from the stored studies

CPU time (``time.process_time``) is stored with every piece.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
RESULTS = ROOT / "benchmarks" / "results" / "zoo"
WIDTHS = (32, 64, 128, 256)
CHECK = dict(lr=1e-2, steps=2, batch=8)


def _write(path, obj):
    from limits.results import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=True, default=_jsonable) + "\n")


def _jsonable(v):
    if hasattr(v, "item"):
        return v.item()
    if hasattr(v, "tolist"):
        return v.tolist()
    return str(v)


def _git_head():
    import subprocess

    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()


# ---------------------------------------------------------------------- data
def check_data(key, batch=CHECK["batch"]):
    """The coordinate check's batch of family ``key``'s task (the first ``batch`` training rows)."""
    from limits.torch.zoo import families as F

    X, Y = F.data(key)["train"]
    return X[:batch], Y[:batch]


# ---------------------------------------------------------------------- survey
def describe_parameterised(P):
    """Roles, attention and tied read-outs of a Parameterised, as JSON."""
    roles = {}
    for q in P.rules:
        roles[q.role] = roles.get(q.role, 0) + 1
    att = []
    for a in P.attention:
        s = a.site
        att.append({"site": s.name, "kind": s.kind, "head_dim": a.head_dim, "heads": a.heads,
                    "scale_exponent": a.scale_exponent, "query_exponent": a.query_exponent(),
                    "scale_expr": s.scale_expr, "query": None if s.query is None else
                    [s.query.param, s.query.start, s.query.stop], "reason": s.reason})
    ties = [{"readout": t.name, "storage": t.storage, "exponent": t.exponent, "fold": t.fold} for t in P.readouts]
    return {"roles": roles, "tensors": len(P.rules), "attention": att, "readouts": ties, "traced": P.traced}


def failures_json(r, limit=10):
    return [list(f) for f in r.failures()[:limit]]


def survey_one(key, layout, seeds=4):
    """parameterise(…, "muP") and a small coordinate check of one family in one head layout."""
    import torch

    import limits.torch as lt
    from limits.torch.zoo import families as F

    fam = F.family(key)
    rec = {"family": key, "layout": layout, "class": fam.class_name, "note": fam.note}
    t0 = time.process_time()
    if fam.refused:
        return dict(rec, status="refused by name", stage="family", message=fam.refused, cpu_s=0.0)
    stage = "build"
    try:
        f = F.factory(key, layout=layout)
        X, Y = check_data(key)
        with torch.no_grad():
            f(WIDTHS[0])(X[:2])
        stage = "parameterise"
        P = lt.parameterise(f, "muP", widths=WIDTHS[:2], example_inputs=(X[:4],), roles=fam_roles(key, f))
        rec.update(describe_parameterised(P))
        stage = "check"
        r = lt.coord_check(P, WIDTHS, (X, Y), lr=CHECK["lr"], steps=CHECK["steps"], seeds=seeds, seed=0)
        rec.update(status="passed" if r.passed else "check fails", stage="check", message=r.summary(),
                   check={"passed": r.passed, "tests": r.tests, "failures": failures_json(r),
                          "cpu_s": r.cpu_seconds, "seeds": seeds, "not_measured": r.settings.get(
                              "attention_not_measured", {})})
    except Exception as exc:     # noqa: BLE001 — recorded: the survey is of what happens
        kind = "refused" if isinstance(exc, ValueError) and stage == "parameterise" else "crash"
        rec.update(status=kind, stage=stage, message=f"{type(exc).__name__}: {exc}",
                   traceback=traceback.format_exc(limit=-4) if kind == "crash" else None)
    rec["cpu_s"] = time.process_time() - t0
    return rec


def fam_roles(key, f=None):
    """Roles passed to parameterise: the zoo factory's for transformers' Conv1D (GPT-2), nothing else — every
    other role is the bridge's to decide from the graph."""
    from limits.torch.zoo import families as F

    return (f or F.factory(key)).roles() or None


def survey(label, keys, seeds=4, layouts=None):
    from limits.torch.zoo import families as F

    out = RESULTS / "survey" / f"{label}.json"
    done = json.loads(out.read_text()) if out.exists() else {"label": label, "commit": _git_head(), "rows": []}
    have = {(r["family"], r["layout"]) for r in done["rows"]}
    for key in keys:
        fam = F.family(key)
        for layout in (layouts or fam.layouts()):
            if (key, layout) in have or layout not in fam.layouts():
                continue
            rec = survey_one(key, layout, seeds)
            print(f"[{label}] {key:9s} {layout:13s} {rec['status']:16s} {rec['cpu_s']:6.1f} CPU-s  "
                  f"{rec.get('message', '')[:220]}", flush=True)
            done["rows"].append(rec)
            _write(out, done)
    return done


# ---------------------------------------------------------------------- injected bugs
BUG_TEXT = {
    "attention 1/sqrt(d)": "the logits left at 1/√d_head (query rows × √r back): the HF PR's inlined-scale case",
    "read-out x sqrt(r)": "the read-out's output × √r (its multiplier left at SP's scale)",
    "embedding lr / r": "input-like tensors (embeddings, patch convolution) at lr/r",
    "hidden lr x r": "hidden tensors at SP's Adam rate (lr not divided by r)",
}


def _bug_targets(P, bug):
    """(modules or tensors the bug touches, culprit row-name prefixes)."""
    if bug == "attention 1/sqrt(d)":
        qs = [a.site.query for a in P.attention if a.head_dim == "scales" and a.site.query is not None]
        mods = sorted({q.module for q in qs})
        return qs, mods + [a.site.module + ":logits" for a in P.attention]
    if bug == "read-out x sqrt(r)":
        mods = sorted({q.module for q in P.rules if q.role == "output"} | {t.module for t in P.readouts})
        return mods, mods
    role = "input" if bug == "embedding lr / r" else "hidden"
    names = [q.name for q in P.rules if q.role == role]
    return names, names + sorted({q.module for q in P.rules if q.role == role})


def applicable_bugs(P):
    return [b for b in BUG_TEXT if _bug_targets(P, b)[0]]


def _scale_rows(start, stop, c):
    def hook(mod, args, out):
        f = torch_ones_like_rows(out, start, stop, c)
        return out * f
    return hook


def torch_ones_like_rows(out, start, stop, c):
    import torch

    f = torch.ones(out.shape[-1], dtype=out.dtype)
    f[start:stop] = c
    return f


def _scale_out(c):
    def hook(mod, args, out):
        return out * c
    return hook


def apply_bug(P, bug, m, width):
    """Inject ``bug`` into the module ``m = P(width)`` (forward hooks, lr multipliers)."""
    r = width / P.base_width
    targets, _ = _bug_targets(P, bug)
    if bug == "attention 1/sqrt(d)":
        for q in targets:
            m.get_submodule(q.module).register_forward_hook(_scale_rows(q.start * int(r), q.stop * int(r), r ** 0.5))
    elif bug == "read-out x sqrt(r)":
        for mod in targets:
            m.get_submodule(mod).register_forward_hook(_scale_out(r ** 0.5))
    else:
        f = 1 / r if bug == "embedding lr / r" else r
        names = set(targets)
        mults = tuple((n, p, k * f if n in names else k) for n, p, k in m.limits_lr_multipliers)
        object.__setattr__(m, "limits_lr_multipliers", mults)
    return m


def bugged(P, bug):
    """A Parameterised that builds P's modules with ``bug`` injected (the check still predicts P's table)."""
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Bugged(type(P)):
        bug: str = ""

        def __call__(self, width, seed=None):
            return apply_bug(self, self.bug, super().__call__(width, seed), int(width))

    return Bugged(**{f.name: getattr(P, f.name) for f in dataclasses.fields(P)}, bug=bug)


def culprit_first(failing, culprits):
    """Whether the first failing row is one of the bug's culprits (row labels before " (")."""
    if not failing:
        return False
    first = failing[0].split(" (")[0]
    return any(first == c or first.startswith(c + ".") or first == c.split(":")[0] + ":logits" for c in culprits)


# ---------------------------------------------------------------------- calibrated checks
def _one_check(P, key, seed, seeds):
    import limits.torch as lt

    X, Y = check_data(key)
    r = lt.coord_check(P, WIDTHS, (X, Y), lr=CHECK["lr"], steps=CHECK["steps"], seeds=seeds, seed=seed)
    return {"seed": seed, "passed": bool(r.passed), "failing": r.failing_tensors()[:5], "cpu_s": r.cpu_seconds,
            "tests": r.tests}


def parameterised(key, layout=None, depth=False):
    """(factory, Parameterised) of family ``key`` under μP — with the study's Adam ε where :data:`ADAM_EPS`
    sets one (ConvNeXt)."""
    import limits.torch as lt
    from limits.torch.zoo import families as F

    f = F.factory(key, layout=layout)
    X, _ = check_data(key)
    P = lt.parameterise(f, "muP", widths=WIDTHS[:2], example_inputs=(X[:4],), roles=fam_roles(key, f))
    return f, (with_eps(P, ADAM_EPS[key]) if key in ADAM_EPS else P)


def check(key, checks=20, bug_checks=5, seeds=10, label="study"):
    """False-alarm rate over ``checks`` independent checks of the parameterised family and the rate each bug is
    flagged (and named first) over ``bug_checks`` checks; stored incrementally. Adam's ε is torch's 1e-8 but
    where :data:`ADAM_EPS` names the family (stored as ``adam_eps``)."""
    from limits.torch.zoo import families as F

    out = RESULTS / label / f"{key}.check.json"
    rec = json.loads(out.read_text()) if out.exists() else None
    fam = F.family(key)
    if rec is not None and rec.get("adam_eps") != ADAM_EPS.get(key):
        raise ValueError(f"{out} was measured at Adam eps {rec.get('adam_eps')}, the study's is "
                         f"{ADAM_EPS.get(key)}: delete it to redo the study")
    if rec is None:
        rec = {"family": key, "layout": fam.layout, "class": fam.class_name, "widths": WIDTHS, "seeds": seeds,
               "settings": CHECK, "commit": _git_head(), "false_alarm": [], "bugs": {}}
        if key in ADAM_EPS:
            rec["adam_eps"] = ADAM_EPS[key]
        if fam.refused:
            rec.update(status="refused by name", message=fam.refused)
            _write(out, rec)
            return rec
        try:
            _, P = parameterised(key)
        except ValueError as exc:
            rec.update(status="refused", message=f"{exc}")
            _write(out, rec)
            return rec
        rec.update(status="parameterised", **describe_parameterised(P))
        _write(out, rec)
    if rec["status"] != "parameterised":
        return rec
    _, P = parameterised(key)
    while len(rec["false_alarm"]) < checks:
        k = len(rec["false_alarm"])
        rec["false_alarm"].append(_one_check(P, key, k, seeds))
        _write(out, rec)
        fa = rec["false_alarm"]
        print(f"[check] {key}: correct {k + 1}/{checks}: {'pass' if fa[-1]['passed'] else 'FAIL ' + str(fa[-1]['failing'][:2])}"
              f" ({fa[-1]['cpu_s']:.1f} CPU-s); flagged so far {sum(not x['passed'] for x in fa)}", flush=True)
    for bug in applicable_bugs(P):
        runs = rec["bugs"].setdefault(bug, {"what": BUG_TEXT[bug], "culprits": _bug_targets(P, bug)[1], "runs": []})
        while len(runs["runs"]) < bug_checks:
            k = len(runs["runs"])
            x = _one_check(bugged(P, bug), key, 1000 + k, seeds)
            x["culprit_first"] = culprit_first(x["failing"], runs["culprits"])
            runs["runs"].append(x)
            _write(out, rec)
            print(f"[check] {key}: bug {bug!r} {k + 1}/{bug_checks}: {'flagged' if not x['passed'] else 'missed'}"
                  f", culprit first {x['culprit_first']} {x['failing'][:2]}", flush=True)
    return rec


# ---------------------------------------------------------------------- the HF pull request's criterion
EXTRA_CAUSAL = {        # causal LMs the pull request names as inlined-scale, measured here too (scaling survey only)
    "mpt": ("MptForCausalLM", dict(vocab_size=256, d_model=32, n_heads=2, n_layers=2, max_seq_len=16,
                                   attn_config={"softmax_scale": None})),
    "codegen": ("CodeGenForCausalLM", dict(vocab_size=256, n_embd=32, n_head=2, n_layer=2, n_positions=16,
                                           rotary_dim=8, bos_token_id=0, eos_token_id=0)),
    "mistral": ("MistralForCausalLM", dict(vocab_size=256, hidden_size=32, intermediate_size=96,
                                           num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                           head_dim=16, max_position_embeddings=16)),
}


def scaling_one(name, f, X):
    """Whether every attention module (as the graph finds them) has a ``scaling`` attribute its forward uses: the
    module's traced logit scale with ``scaling`` doubled must double (measured, not read from the code)."""
    import torch

    from limits.torch import graph
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    m = f(32)
    causal = f.class_name in set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    sites = [s for s in graph.find_attention(m, (X,)) if s.kind != "unrecognised"]
    mods = sorted({s.module for s in sites})
    rows = []
    for path in mods:
        mod = m.get_submodule(path)
        has = isinstance(getattr(mod, "scaling", None), (int, float))
        used = None
        if has:              # the traced logit scale of this module's sites with `scaling` doubled
            old = mod.scaling
            mod.scaling = 2.0 * old
            try:
                again = {s.name: s.scale for s in graph.find_attention(m, (X,)) if s.module == path}
            finally:
                mod.scaling = old
            used = all(math.isclose(again.get(s.name, math.nan), 2 * s.scale, rel_tol=1e-9)
                       for s in sites if s.module == path)
        rows.append({"module": path, "type": type(mod).__name__, "has_scaling": has, "used": used,
                     "scale_expr": next(s.scale_expr for s in sites if s.module == path)})
    covered = causal and bool(rows) and all(r["has_scaling"] and r["used"] for r in rows)
    why = ("not a causal LM (out of the pull request's scope)" if not causal else
           "no attention found" if not rows else
           "covered: every attention module's `scaling` sets its logit scale" if covered else
           "left at 1/√d_head: " + ", ".join(sorted({r["type"] + (" has no `scaling`" if not r["has_scaling"]
                                                                  else " ignores its `scaling`")
                                                     for r in rows if not (r["has_scaling"] and r["used"])})))
    return {"family": name, "class": f.class_name, "causal_lm": causal, "attention": rows, "covered": covered,
            "verdict": why}


def scaling_survey():
    """The pull request's criterion on every family (and MPT, CodeGen, Mistral), from transformers 5.25's modules."""
    import transformers

    from limits.torch.zoo import factory as zoo_factory, families as F

    out = {"transformers": transformers.__version__, "commit": _git_head(), "rows": []}
    t0 = time.process_time()
    for fam in F.FAMILIES:
        if fam.refused:
            out["rows"].append({"family": fam.key, "class": fam.class_name, "verdict": "refused by name here",
                                "covered": None})
            continue
        out["rows"].append(scaling_one(fam.key, F.factory(fam.key), check_data(fam.key)[0][:2]))
    for key, (cls, base) in EXTRA_CAUSAL.items():
        first = next(k for k in ("hidden_size", "d_model", "n_embd") if k in base)
        out["rows"].append(scaling_one(key, zoo_factory("transformers", cls, base, {first: 1}),
                                       check_data("llama")[0][:2]))
    out["cpu_s"] = time.process_time() - t0
    for r in out["rows"]:
        print(f"[scaling] {r['family']:9s} {r['class']:32s} {r['verdict']}")
    _write(RESULTS / "scaling.json", out)
    return out


# ---------------------------------------------------------------------- Adam's ε (ConvNeXt)
ADAM_EPS = {"convnext": 1e-16}     # the calibrated check's Adam ε where torch's 1e-8 breaks μP's table (eps study)
EPS = dict(scan=(1e-8, 1e-10, 1e-12, 1e-14, 1e-16), checks=5, grad_seeds=3)


def eps_at(eps, exponent, width, base_width):
    """Adam's ε at ``width``: ``eps`` · (width/base_width)^(−exponent) (exponent 1: ε ∝ 1/N, as the gradients
    of μP's tensors fall)."""
    return float(eps) * (width / base_width) ** (-float(exponent))


def with_eps(P, eps, exponent=0.0):
    """A Parameterised whose optimizer groups carry Adam's ε = ``eps`` · r^(−``exponent``) (torch honours a
    group's own eps; r = width/base width, read from the module P built)."""
    import dataclasses

    from limits.torch.graph import unwrap

    @dataclasses.dataclass(frozen=True)
    class WithEps(type(P)):
        eps: float = 1e-8
        eps_exponent: float = 0.0

        def param_groups(self, module, lr, *a, **kw):
            e = eps_at(self.eps, self.eps_exponent, unwrap(module).limits_width, self.base_width)
            return [dict(g, eps=e) for g in super().param_groups(module, lr, *a, **kw)]

    return WithEps(**{f.name: getattr(P, f.name) for f in dataclasses.fields(P)}, eps=float(eps),
                   eps_exponent=float(exponent))


def eps_variants(fam):
    """{name: (base config, ε, ε's width exponent)} of the ε study: torch's ε and smaller ones (the scan), μP's
    width-scaled ε (ε ∝ 1/N), and the layer scale 1 at torch's ε."""
    out = {f"Adam eps {e:.0e}": (fam.base, e, 0.0) for e in EPS["scan"]}
    out["Adam eps 1e-08 x (32/N)"] = (fam.base, 1e-8, 1.0)
    out["layer scale 1, Adam eps 1e-08"] = (dict(fam.base, layer_scale_init_value=1.0), 1e-8, 0.0)
    return out


def first_gradients(P, X, Y, widths=WIDTHS, seeds=EPS["grad_seeds"], eps=1e-8):
    """Per tensor: the RMS of its gradient at the first step at each width (mean over ``seeds``), its fitted
    exponent in N and the fraction of the sign step Adam's first update takes there, mean |g| / (|g| + ε) —
    μP's Adam rates assume 1 at every width."""
    import numpy as np
    import torch

    from limits.torch.losses import default_loss

    rms, frac = {}, {}
    for wi, N in enumerate(widths):
        for s in range(seeds):
            m = P(N, seed=s)
            groups = P.param_groups(m, 1.0)
            default_loss(m(X), Y).backward()
            for g in groups:
                p = g["params"][0]
                gr = torch.zeros_like(p) if p.grad is None else p.grad.detach()
                rms.setdefault(g["name"], np.zeros((len(widths), seeds)))[wi, s] = float(gr.pow(2).mean().sqrt())
                frac.setdefault(g["name"], np.zeros((len(widths), seeds)))[wi, s] = float(
                    (gr.abs() / (gr.abs() + eps)).mean())
    logN = np.log(np.asarray(widths, float))
    out = {}
    for name, a in rms.items():
        r = a.mean(axis=1)
        slope = float(np.polyfit(logN, np.log(r), 1)[0]) if np.all(r > 0) else float("nan")
        out[name] = {"rms": r.tolist(), "exponent": slope, "sign_fraction": frac[name].mean(axis=1).tolist()}
    return out


def eps_study(label="study", checks=EPS["checks"], seeds=10):
    """ConvNeXt's check failure explained: transformers' layer scale (1e-6) puts the block weights' gradients
    below torch's Adam ε = 1e-8, where Adam's first step is not the sign step μP's Adam rates assume (it shrinks
    with the gradient, hence with the width). Measured: the first-step gradients and sign fractions at each width,
    and ``checks`` coordinate checks (10 seeds each) per ε of the scan, with μP's ε ∝ 1/N and with layer scale 1."""
    import limits.torch as lt
    from limits.torch.zoo import factory as zoo_factory, families as F

    fam = F.family("convnext")
    out = RESULTS / label / "convnext.eps.json"
    rec = json.loads(out.read_text()) if out.exists() else {"commit": _git_head(), "widths": WIDTHS,
                                                            "settings": CHECK, "seeds": seeds, "variants": {}}
    X, Y = check_data("convnext")
    if "gradients" not in rec:
        t0 = time.process_time()
        P = lt.parameterise(F.factory("convnext"), "muP", widths=WIDTHS[:2], example_inputs=(X[:4],))
        rec["gradients"] = first_gradients(P, X, Y)
        rec["gradients_cpu_s"] = time.process_time() - t0
        _write(out, rec)
    for name, (base, eps, k) in eps_variants(fam).items():
        v = rec["variants"].setdefault(name, {"eps": eps, "eps_exponent": k,
                                              "layer_scale": base.get("layer_scale_init_value", 1e-6), "runs": []})
        if len(v["runs"]) >= checks:
            continue
        f = zoo_factory("transformers", fam.class_name, base, fam.scale)
        P = with_eps(lt.parameterise(f, "muP", widths=WIDTHS[:2], example_inputs=(X[:4],)), eps, k)
        while len(v["runs"]) < checks:
            v["runs"].append(_one_check(P, "convnext", len(v["runs"]), seeds))
            _write(out, rec)
            print(f"[eps] {name}: {len(v['runs'])}/{checks} "
                  f"{'pass' if v['runs'][-1]['passed'] else v['runs'][-1]['failing'][:2]} "
                  f"({v['runs'][-1]['cpu_s']:.1f} CPU-s)", flush=True)
    return rec


# ---------------------------------------------------------------------- μTransfer
TRANSFER = dict(widths=(32, 64, 128), log2_lrs=tuple(range(-10, -2)), steps=40, seeds=6, batch_size=32,
                n_train=256, n_test=64)


EXTRA_LRS = {"gpt2": {"SP": (-13, -12, -11)}}   # rates below the grid where an SP optimum fell on its edge


def _design(key, seeds=None):
    """The transfer design of family ``key`` with ``seeds`` (default the design's) and its extra learning rates
    (:data:`EXTRA_LRS`: 2^x added for one parameterisation where the study found an optimum on the grid's edge)."""
    out = dict(TRANSFER, seeds=int(seeds or TRANSFER["seeds"]))
    if key in EXTRA_LRS:
        out["extra_log2_lrs"] = {p: list(x) for p, x in EXTRA_LRS[key].items()}
    return out


def _lrs(design, param):
    import numpy as np

    x = sorted(set(design["log2_lrs"]) | set(design.get("extra_log2_lrs", {}).get(param, ())))
    return 2.0 ** np.asarray(x, float)


def transfer_data(key):
    """(train, test) of the family's task for the transfer study (text: 256 + 64 windows; digits: the split)."""
    from limits.torch.zoo import families as F

    fam = F.family(key)
    d = F.data(key) if fam.task == "digit_images" else F.data(key, n_train=TRANSFER["n_train"],
                                                               n_test=TRANSFER["n_test"])
    return d["train"], d["test"]


def transfer_summary(r):
    return {"param": r.parameterisation, "drift": r.drift, "drift_ci": list(r.drift_ci), "verdict": r.verdict,
            "verdict_reason": r.verdict_reason, "predicted_drift": r.predicted_drift,
            "prediction_kind": r.prediction_kind, "as_predicted": r.as_predicted,
            "optimum": list(r.optimum), "optimum_ci": [list(x) for x in r.optimum_ci],
            "at_edge": [bool(x) for x in r.at_edge], "cpu_s": float(r.cpu_s.sum()),
            "calibration": None if r.calibration is None else {
                "drifts": list(r.calibration["drifts"]), "rates": [list(x) for x in r.calibration["rates"]]}}


def transfer_family(key, label="study", params=("SP", "muP"), seeds=None):
    """SP and μP learning-rate transfer of one family (its primary head layout), resumable (sweep stores).
    ``seeds``: other than the design's 6 (stored in the record's design; the runs are seeded by index, so a later
    run with more seeds, or more rates, reuses the stored ones and redoes the analysis)."""
    import limits.torch as lt
    from limits.results import save_result
    from limits.torch.zoo import families as F

    fam = F.family(key)
    out = RESULTS / label / f"{key}.transfer.json"
    rec = json.loads(out.read_text()) if out.exists() else {
        "family": key, "layout": fam.layout, "class": fam.class_name, "design": _design(key, seeds),
        "commit": _git_head(), "studies": {}}
    if fam.refused:
        rec.update(status="refused by name", message=fam.refused)
        _write(out, rec)
        return rec
    want = json.loads(json.dumps(_design(key, seeds or rec["design"]["seeds"])))
    if want != rec["design"]:
        if want["seeds"] < rec["design"]["seeds"]:
            raise ValueError(f"{out} holds a study at {rec['design']['seeds']} seeds; refusing to replace it by "
                             f"{seeds} (delete it to redo)")
        rec.update(design=want, studies={})     # more seeds or rates: redone, the stored runs reused
    f = F.factory(key)
    train, test = transfer_data(key)
    for param in params:
        if param in rec["studies"]:
            continue
        try:
            r = lt.transfer(f, param, widths=TRANSFER["widths"], lrs=_lrs(rec["design"], param), data=train,
                            held_out=test,
                            steps=TRANSFER["steps"], seeds=rec["design"]["seeds"], batch_size=TRANSFER["batch_size"],
                            roles=fam_roles(key, f), store=RESULTS / label / "stores" / f"{key}.{param}",
                            progress=True, threads=1, name=f"{fam.title} {param}")
        except ValueError as exc:
            rec["studies"][param] = {"param": param, "refused": str(exc)}
            _write(out, rec)
            continue
        save_result(r, RESULTS / label / f"{key}.transfer.{param}")
        rec["studies"][param] = transfer_summary(r)
        _write(out, rec)
        print(f"[transfer] {key} {param}: drift {r.drift:+.2f} [{r.drift_ci[0]:+.2f}, {r.drift_ci[1]:+.2f}] per "
              f"doubling, predicted {r.predicted_drift:+.2f} → {r.verdict} ({r.cpu_s.sum():.0f} CPU-s)", flush=True)
    return rec


# ---------------------------------------------------------------------- Depth-μP
DEPTH = dict(family="llama", depths=(2, 4, 8, 16), width=64, seeds=10, checks=10, steps=2, lr=1e-2,
             transfer_depths=(2, 4, 8), transfer_width=64)


def _depth_rows(r):
    from limits.torch.depth_result import QUANTITIES

    out = []
    for q, name in enumerate(QUANTITIES):
        pred = r.predicted[q]
        out.append({"quantity": name, "fitted": f"{r.slope[q]:+.2f} [{r.ci_low[q]:+.2f}, {r.ci_high[q]:+.2f}]",
                    "predicted": "—" if pred != pred else f"{pred:+.2f}",
                    "verdict": {1: "ok", 0: "NO", -1: "—"}[int(r.consistent[q])]})
    return out


DEPTH_BUGS = {"branch multiplier 1": {"alpha": 0.0},                  # the branches not scaled by (L/L0)^-α
              "block lr not depth-scaled": {"depth_lr_exponent": 0.0}}  # the blocks' Adam rates not × (L/L0)^-γ


def depth_bugged(P, bug):
    """A DepthParameterised that builds its modules with ``bug`` (:data:`DEPTH_BUGS`: one of Depth-μP's two factors
    left out) while the check still predicts P's exponents."""
    import dataclasses

    built = dataclasses.replace(P, **DEPTH_BUGS[bug])

    @dataclasses.dataclass(frozen=True)
    class DepthBugged(type(P)):
        bug: str = ""

        def __call__(self, width, depth, seed=None):
            return built(width, depth, seed)

    return DepthBugged(**{f.name: getattr(P, f.name) for f in dataclasses.fields(P)}, bug=bug)


def _depth_run(P, X, Y, seed):
    import limits.torch as lt

    r = lt.depth_coord_check(P, DEPTH["depths"], (X, Y), width=DEPTH["width"], lr=DEPTH["lr"], steps=DEPTH["steps"],
                             seeds=DEPTH["seeds"], seed=seed)
    return r, {"seed": seed, "passed": bool(r.passed), "rows": _depth_rows(r), "cpu_s": r.cpu_seconds,
               "slope": r.slope.tolist(), "ci": [r.ci_low.tolist(), r.ci_high.tolist()],
               "predicted": r.predicted.tolist()}


def _depth_checks(rec, out, f, X, Y):
    """K checks of Depth-μP (false alarms) and of width-only μP against its own table; then K/2 checks of each
    :data:`DEPTH_BUGS` against Depth-μP's table (power)."""
    import limits.torch as lt

    Ps = {name: lt.parameterise(f, name, widths=WIDTHS[:2], depths=DEPTH["depths"][:2], example_inputs=(X[:4],))
          for name in ("depth-muP", "muP")}
    rec.update(blocks=Ps["depth-muP"].layout.prefix, branches=list(Ps["depth-muP"].branches),
               alpha=Ps["depth-muP"].alpha, depth_lr_exponent=Ps["depth-muP"].depth_lr_exponent)
    todo = [(name, P, DEPTH["checks"], 0) for name, P in Ps.items()]
    todo += [(f"depth-muP with bug: {b}", depth_bugged(Ps["depth-muP"], b), DEPTH["checks"] // 2, 1000)
             for b, change in DEPTH_BUGS.items() if any(getattr(Ps["depth-muP"], k) != v for k, v in change.items())]
    for name, P, k, seed0 in todo:
        runs = rec["runs"].setdefault(name, [])
        while len(runs) < k:
            r, run = _depth_run(P, X, Y, seed0 + len(runs))
            runs.append(run)
            if len(runs) == 1:
                rec["checks"][name] = {"rows": run["rows"], "passed": run["passed"], "cpu_s": run["cpu_s"]}
            _write(out, rec)
            print(f"[depth] {name} check {len(runs)}/{k}: {'pass' if r.passed else 'flagged'} "
                  f"({r.cpu_seconds:.1f} CPU-s)", flush=True)


def depth(label="study", seeds=None):
    """Depth-μP on Llama's decoder layers: the checks across depth (:func:`_depth_checks`) and learning-rate transfer
    across depth under Depth-μP and width-only μP (``seeds``: of the transfer study, default the design's)."""
    import numpy as np

    import limits.torch as lt
    from limits.results import save_result
    from limits.torch.zoo import families as F

    key = DEPTH["family"]
    out = RESULTS / label / "depth.json"
    rec = json.loads(out.read_text()) if out.exists() else {"family": key, "design": DEPTH, "commit": _git_head(),
                                                             "runs": {}, "checks": {}, "transfer": {}}
    rec.setdefault("transfer_seeds", int(seeds or TRANSFER["seeds"]))
    f = F.factory(key, depth=True)
    X, Y = check_data(key)
    _depth_checks(rec, out, f, X, Y)
    train, test = transfer_data(key)
    lrs = 2.0 ** np.asarray(TRANSFER["log2_lrs"], float)
    for name in ("depth-muP", "muP"):
        if name in rec["transfer"]:
            continue
        r = lt.transfer(f, name, widths=(DEPTH["transfer_width"],), depths=DEPTH["transfer_depths"], lrs=lrs,
                        data=train, held_out=test, steps=TRANSFER["steps"], seeds=rec["transfer_seeds"],
                        batch_size=TRANSFER["batch_size"], store=RESULTS / label / "stores" / f"depth.{name}",
                        progress=True, threads=1, name=f"Llama {name} across depth")
        save_result(r, RESULTS / label / f"depth.transfer.{name}")
        rec["transfer"][name] = transfer_summary(r)
        _write(out, rec)
        print(f"[depth] transfer {name}: drift {r.drift:+.2f} per doubling of depth → {r.verdict}", flush=True)
    return rec


# ---------------------------------------------------------------------- the docs tables
DOCS = ROOT / "docs/zoo.rst"


def markers(name):
    """The docs page's marker comments around the generated table ``name``."""
    return (f".. generated: {name} (python benchmarks/zoo_study.py table --write)", f".. end generated: {name}")


def table(write=False, short=False):
    from limits.results import replace_marked_block
    from limits.torch.zoo import coverage

    if short:                     # the README's short form (markdown)
        text = coverage.short_table(RESULTS)
        print(text)
        return text
    out = coverage.tables(RESULTS, coverage.SURVEY_LABEL)
    for name, text in out.items():
        if write:
            b, e = markers(name)
            replace_marked_block(DOCS, b, e, ["", text, ""])
        else:
            print(f"--- {name}\n{text}\n")
    return out


FIGURE = ROOT / "docs" / "zoo_transfer.png"


def figure(path=FIGURE):
    """Loss against log2 learning rate, one curve per width, SP beside μP, one row per family with a stored transfer
    study (``docs/zoo_transfer.png``): the SP optimum moving left with the width, μP's staying."""
    import matplotlib

    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt

    from limits.results import atomic_write_bytes
    from limits.torch.transfer_result import TransferResult
    from limits.torch.zoo import families as F

    study = RESULTS / "study"
    keys = [f.key for f in F.FAMILIES if all((study / f"{f.key}.transfer.{p}.json").exists() for p in ("SP", "muP"))]
    if not keys:
        raise ValueError("no family has both transfer studies stored yet")
    fig, axes = plt.subplots(len(keys), 2, figsize=(10, 2.9 * len(keys)), squeeze=False)
    for row, key in zip(axes, keys):
        for ax, param in zip(row, ("SP", "muP")):
            TransferResult.load(study / f"{key}.transfer.{param}").plot_curves(ax)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    print(f"wrote {path} ({', '.join(keys)})")
    return path


# ---------------------------------------------------------------------- command line
def main(argv=None):
    from limits.torch.zoo import families as F

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("survey", "check", "scaling", "transfer", "depth", "eps", "table", "figure"))
    ap.add_argument("families", nargs="*", help="family keys (default: all)")
    ap.add_argument("--label", default="main", help="survey: the name of the stored survey (e.g. main, bridge-<sha>)")
    ap.add_argument("--seeds", type=int, default=4, help="survey: seeds of the small check")
    ap.add_argument("--checks", type=int, default=20, help="check: independent checks of the correct module (10 seeds each)")
    ap.add_argument("--bug-checks", type=int, default=5, help="check: checks per injected bug")
    ap.add_argument("--eps-checks", type=int, default=EPS["checks"], help="eps: checks per variant")
    ap.add_argument("--transfer-seeds", type=int, default=None,
                    help=f"transfer/depth: seeds of the transfer study (default {TRANSFER['seeds']})")
    ap.add_argument("--write", action="store_true", help="table: write the tables into docs/zoo.rst")
    ap.add_argument("--short", action="store_true", help="table: print the coverage table in short (markdown, README)")
    ap.add_argument("--study", default="study", help="check/transfer/depth: the results folder under benchmarks/results/zoo")
    a = ap.parse_args(argv)
    keys = a.families or [f.key for f in F.FAMILIES]
    if a.what == "table":
        return table(a.write, a.short)
    if a.what == "figure":
        return figure()
    import torch

    torch.set_num_threads(1)
    if a.what == "survey":
        survey(a.label, keys, a.seeds)
    elif a.what == "transfer":
        for k in keys:
            transfer_family(k, label=a.study, seeds=a.transfer_seeds)
    elif a.what == "eps":
        eps_study(label=a.study, checks=a.eps_checks)
    elif a.what == "depth":
        depth(label=a.study, seeds=a.transfer_seeds)
    elif a.what == "scaling":
        scaling_survey()
    elif a.what == "check":
        for k in keys:
            check(k, a.checks, a.bug_checks, label=a.study)


if __name__ == "__main__":
    main()
