"""torch figures: ``limits.torch.coord_check`` of the demo networks (:mod:`limits.torch.demos`).

* ``torch_coordcheck`` — the MLP and the small ``nn.TransformerEncoder`` (widths 64–512, Adam, a tiny synthetic
  task) under SP (parameterised by ``limits.torch.parameterise``: output and attention-logit changes blow up as
  the solver predicts), μP (flat within the CIs) and a broken μP whose read-out is left as in SP (checked as-is
  against μP: flagged by name). Per tensor: the fitted width exponent of its activation change after the first
  step (95 % CI over seeds) against the predicted exponent (or range, where a finite-width crossover is under
  way), and the read-out's scale at init (μP: N^{-1/2}); circled = not as predicted at some step.

Computing needs the optional extra ``torch``; the committed data (``figures/torch_coordcheck.npz`` + ``.json``)
replot without it, so the gallery, ``limits figure --list`` and the main job (the figure is not a default one)
never import torch.
"""
from __future__ import annotations

import numpy as np

from . import register
from ._util import with_caption

CASES = ("SP", "muP", "broken muP")
NETS = ("mlp", "transformer")
# (optimizer lr, steps) per network and case: SP's predictions hold for small updates (hence its small rate)
SETTINGS = {("mlp", "SP"): (1e-3, 1), ("mlp", "muP"): (1e-2, 2), ("mlp", "broken muP"): (1e-2, 2),
            ("transformer", "SP"): (3e-5, 1), ("transformer", "muP"): (1e-2, 3),
            ("transformer", "broken muP"): (1e-2, 3)}


def _needs_torch(name):
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError(f"figure {name}: computing it needs the optional extra torch (python -m pip install -e "
                         f"\".[torch]\"); its committed data replot without torch (limits figure {name} --replot)") from None


def _compute(params, rng):
    _needs_torch("torch_coordcheck")
    import torch

    from ..torch import coord_check, demos, parameterise

    widths = [int(w) for w in params["widths"]]
    seed = int(rng.integers(2**31))
    out = {}
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for net in NETS:
            factory = getattr(demos, net)
            data = getattr(demos, f"{net}_data")()
            for case in CASES:
                lr, steps = SETTINGS[(net, case)]
                kw = dict(lr=lr, steps=steps, seeds=int(params["seeds"]), seed=seed)
                if case == "broken muP":
                    r = coord_check(getattr(demos, f"broken_mup_{net}"), widths, data, expect="muP", **kw)
                else:
                    r = coord_check(parameterise(factory, case, widths=widths[:2]), widths, data, **kw)
                k = f"{net}|{case}|"
                t = 1                                    # the first update: where SP and μP part ways
                out[k + "tensors"] = list(r.tensors)
                out[k + "roles"] = list(r.roles)
                out[k + "kinds"] = list(r.kinds)
                for field in ("slope", "ci_low", "ci_high", "predicted", "predicted_low", "consistent"):
                    out[k + field] = np.asarray(getattr(r, field)[:, t, 1], float)
                out[k + "scale0"] = np.stack([r.slope[:, 0, 0], r.ci_low[:, 0, 0], r.ci_high[:, 0, 0],
                                              r.predicted[:, 0, 0]])
                out[k + "steps"] = int(r.steps)
                out[k + "lr"] = float(lr)
                out[k + "passed"] = bool(r.passed)
                out[k + "failing"] = list(r.failing_tensors())
                out[k + "cpu_s"] = float(r.cpu_seconds)
    finally:
        torch.set_num_threads(n)
    return out


def _short(name, role=""):
    if name.isdigit():                      # nn.Sequential children: name the role
        return f"{role} [{name}]"
    return (name.replace("enc.layers.", "L").replace("self_attn", "attn").replace(":logits", ":logit")
            .replace("linear", "lin"))


def _plot(data, params):
    from ..style import paper_style, pyplot

    with paper_style():
        plt = pyplot()
        fig, axes = plt.subplots(2, 3, figsize=(12.0, 6.6), gridspec_kw={"width_ratios": [1, 1, 1]})
        for row, net in enumerate(NETS):
            for col, case in enumerate(CASES):
                ax = axes[row, col]
                k = f"{net}|{case}|"
                names = [str(s) for s in data[k + "tensors"]]
                x = np.arange(len(names))
                s, lo, hi = data[k + "slope"], data[k + "ci_low"], data[k + "ci_high"]
                p, pl, ok = data[k + "predicted"], data[k + "predicted_low"], data[k + "consistent"]
                ax.errorbar(x, s, yerr=[s - lo, hi - s], fmt="o", ms=4, color="C0", label="change: fitted (95 % CI)")
                roles = [str(r) for r in data[k + "roles"]]
                kinds = [str(c) for c in data.get(k + "kinds", ["module"] * len(roles))]
                o = np.array([i for i, (r, c) in enumerate(zip(roles, kinds)) if r == "output" and c == "module"], int)
                s0, lo0, hi0, p0 = data[k + "scale0"]
                ax.errorbar(x[o] + 0.25, s0[o], yerr=[s0[o] - lo0[o], hi0[o] - s0[o]], fmt="^", ms=4, color="C2",
                            mfc="none", label="read-out at init: fitted")
                ax.plot(x[o] + 0.25, p0[o], "+", color="C2", ms=9, mew=1.5, label="read-out at init: predicted")
                rng_ = pl < p
                ax.vlines(x[rng_], pl[rng_], p[rng_], color="C3", lw=3, alpha=0.35, label="predicted range")
                ax.plot(x, p, "x", color="C3", ms=7, label="predicted (N → ∞)")
                failing = [str(f) for f in data[k + "failing"]]
                bad = np.array([n in failing for n in names], bool)
                if np.any(bad):
                    ax.plot(x[bad], s[bad], "o", mfc="none", mec="k", ms=11, mew=1.3,
                            label="not as predicted (any step)")
                ax.axhline(0, color="0.7", lw=0.8, zorder=0)
                ax.set_xticks(x)
                ax.set_xticklabels([_short(n, r) for n, r in zip(names, roles)], rotation=70, ha="right", fontsize=6)
                verdict = "as predicted" if bool(data[k + "passed"]) else "flagged: " + ", ".join(
                    _short(f.split(" (")[0], roles[names.index(f)]) for f in failing[:3]) + ("…" if len(failing) > 3 else "")
                ax.set_title(f"{net}, {case} (Adam {float(data[k + 'lr']):g}, {int(data[k + 'steps'])} step"
                             f"{'s' if int(data[k + 'steps']) > 1 else ''}): {verdict}", fontsize=7.5)
                if col == 0:
                    ax.set_ylabel("width exponent of the\nactivation change (step 1)")
                if row == 0 and col == 0:
                    ax.legend(fontsize=6, loc="upper left")
        fig.tight_layout()
    return fig


def _caption(p):
    ws = ", ".join(str(w) for w in p["widths"])
    return (f"limits.torch.coord_check of the demo MLP and transformer at widths {ws}, {p['seeds']} seeds, Adam: "
            "fitted width exponent (95 % CI) of every tensor's activation change after the first step (dots) and of "
            "the read-out at init (triangles) vs the exponents the solver predicts (crosses; bars = a finite-width "
            "crossover range). SP: output and attention logits grow as predicted; μP: flat; μP with an SP "
            "read-out, checked against μP: flagged (circled: not as predicted at some step).")


PAGE = "docs/torch.rst"                     # the page whose marked block holds the paragraph
BEGIN = "<!-- torch-coordcheck-demo:begin (python -m limits.gallery.torchbridge --write) -->"
END = "<!-- torch-coordcheck-demo:end -->"


def _fit(data, case, row):
    k = f"transformer|{case}|"
    i = [str(n) for n in data[k + "tensors"]].index(row)
    return (f"N^{_sgn(data[k + 'slope'][i])} [{_sgn(data[k + 'ci_low'][i])}, {_sgn(data[k + 'ci_high'][i])}]")


def _sgn(v):
    return f"{v:+.2f}".replace("-", "−")


def readme_paragraph(payload) -> str:
    """The sentences of docs/torch.rst on the demo transformer's checks, every number from the committed figure data."""
    d, p = payload["data"], payload["params"]
    ws = p["widths"]
    cpu = float(d["transformer|muP|cpu_s"])
    failing = [str(f).split(" (")[0] for f in d["transformer|broken muP|failing"]]
    L0, L1 = "enc.layers.0.self_attn:logits", "enc.layers.1.self_attn:logits"
    return (
        f"On the demo transformer (`limits.torch.demos`: 2 encoder layers, widths {ws[0]}–{ws[-1]}, {p['seeds']} seeds, "
        f"Adam; the gallery's {'quick' if payload.get('quick') else 'paper-size'} data; one μP check took {cpu:.1f} s "
        f"of CPU) μP is flat: the read-out's change after the first step scales as {_fit(d, 'muP', 'out')} and "
        f"the attention logits' as {_fit(d, 'muP', L0)} and {_fit(d, 'muP', L1)} (predicted N^0, approached from "
        "N^−1/2: the stream's change enters q·k/d as an uncorrelated contraction). Under SP the read-out's "
        f"first-step change grows as {_fit(d, 'SP', 'out')} and the logits' as {_fit(d, 'SP', L0)} and "
        f"{_fit(d, 'SP', L1)} (predicted 3/2: Δq·k/√d with Δq ∝ N), and a μP whose read-out is left as in SP is "
        f"flagged by name, the culprit first: {', '.join(f'`{n}`' for n in failing)} (`out.weight`: its own update "
        f"moves the read-out ∝ {_fit(d, 'broken muP', 'out.weight')} instead of N^0; `out`: first update ∝ "
        f"{_fit(d, 'broken muP', 'out')}).")


def write_readme(path, payload):
    """Replace the block between BEGIN and END of ``path`` by :func:`readme_paragraph`."""
    from pathlib import Path

    from ..results import atomic_write_text

    text = Path(path).read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path} has no {BEGIN!r} … {END!r} block")
    head, rest = text.split(BEGIN, 1)
    atomic_write_text(path, head + BEGIN + "\n" + readme_paragraph(payload) + "\n" + END + rest.split(END, 1)[1])


register("torch_coordcheck", component="torch", compute=with_caption(_compute, _caption), plot=_plot,
         params={"widths": [64, 128, 256, 512, 1024], "seeds": 5}, quick={"widths": [64, 128, 256, 512], "seeds": 3},
         caption="Coordinate checks of PyTorch networks as numbers (limits.torch.coord_check; needs the optional extra "
                 "torch to compute, not to replot): the demo MLP and nn.TransformerEncoder under SP (output and "
                 "attention-logit changes blow up with the predicted exponents), μP (flat within the CIs) and a μP "
                 "whose read-out is left as in SP (flagged by name).",
         seed_ref="issue 23; TP4 Table 1, TP5 (μP attention)", default=False)


if __name__ == "__main__":                  # python -m limits.gallery.torchbridge [--write]
    import sys
    from pathlib import Path

    from . import load_data

    root = Path(__file__).resolve().parents[2]
    payload = load_data("torch_coordcheck", root / "figures")
    if "--write" in sys.argv[1:]:
        write_readme(root / PAGE, payload)
    print(readme_paragraph(payload))
