"""Our ``limits.torch.coord_check`` next to ``mup``'s own coordinate check, on the same networks.

    /work/venv-mup/bin/python benchmarks/mup_coordcheck.py [--quick] [--json benchmarks/results/peers/mup_coordcheck.json]
    python benchmarks/mup_coordcheck.py --write          # the read-out rows of that file into benchmarks/README.md

``mup`` (Microsoft's μP package) is an OPTIONAL peer, never a dependency: install it into a separate venv that
reuses this interpreter's torch (``python -m venv --system-site-packages /work/venv-mup &&
/work/venv-mup/bin/pip install --no-deps mup``; it needs pandas, present there). Without mup the script prints
"skipped" and exits 0.

Networks (:mod:`limits.torch.demos`, classification with cross-entropy so that both tools train on one loss):
the MLP and the 2-layer ``nn.TransformerEncoder``, each

* SP and μP as applied by ``limits.torch.parameterise`` (init, per-tensor Adam rates, μP attention q·k/d),
* a broken μP (read-out left as in SP), checked against μP,
* mup's OWN μP: the read-out replaced by ``mup.MuReadout``, ``mup.set_base_shapes(model, base 64, delta 128)``
  and ``mup.MuAdam``'s per-tensor rates — checked by us against μP (for the transformer the attention keeps
  torch's 1/√d: mup cannot change ``nn.MultiheadAttention``'s scale);

and the hand-written μP GPT of the calibration (:func:`limits.torch.handwritten.sdpa_gpt`: packed qkv +
``F.scaled_dot_product_attention``, next-token cross-entropy) as written and with its SDPA scale left at 1/√d,
checked against μP.

mup's measurement is ``mup.coord_check._get_coord_data`` (the engine of ``get_coord_data``, here given the very
optimizer groups our run uses): per module and width the mean |activation| ("l1") at its t = 1 (init) and
t = steps + 1 (after ``steps`` updates), mean over seeds; mup reports no exponent, CI or verdict — the
"mup slope" column is a plain least-squares slope of its log l1 over log width, ours to read its curve. Our columns
are coord_check's fitted exponents (95 % CI over seeds) of the activation scale at init and of its change after
the last step, the predicted exponent and the verdict. CPU time (``time.process_time``) of each tool on each case,
best of ``--repeat`` interleaved runs.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np


def _labels(net):
    from limits.torch import demos, handwritten as hw

    if net == "sdpa_gpt":
        return hw.gpt_data()                    # next-token ids (B, T): both tools flatten to (B·T, vocab)
    X, Y = getattr(demos, f"{net}_data")()
    return X, Y.argmax(dim=-1)                  # integer classes: cross-entropy for both tools


def _mup_factories(net):
    """mup's own μP of the demo network: factory(width) -> (module, [{"params", "lr_mult"}]) from MuAdam's groups."""
    import mup
    import torch
    from torch import nn

    from limits.torch import demos

    if net == "mlp":
        def make(width):
            return nn.Sequential(nn.Linear(demos.D_IN, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(),
                                 mup.MuReadout(width, 2))
    else:
        class MupTiny(demos.TinyTransformer):
            def __init__(self, width):
                super().__init__(width)
                self.out = mup.MuReadout(width, demos.VOCAB)

        make = MupTiny

    def factory(width):
        with torch.random.fork_rng(devices=[]):
            base, delta = make(64), make(128)
        m = make(width)
        mup.set_base_shapes(m, base, delta=delta)
        groups = mup.MuAdam(m.parameters(), lr=1.0).param_groups          # lr = the multiplier at base lr 1
        return m, [{"params": g["params"], "lr_mult": g["lr"]} for g in groups if g["params"]]

    return factory


def _cases(net):
    import functools

    from limits.torch import demos, handwritten as hw, parameterise

    if net == "sdpa_gpt":                     # the calibration's hand-written μP GPT, as written and with a bug
        return [("μP by hand", hw.sdpa_gpt, "muP", 1e-2, 3),
                ("μP by hand, SDPA left at 1/√d", functools.partial(hw.gpt, bug="sdpa_sqrt_d"), "muP", 1e-2, 3)]
    w0 = (64, 128)
    return [("SP", parameterise(getattr(demos, net), "SP", widths=w0), None, 3e-5 if net == "transformer" else 1e-3, 1),
            ("muP", parameterise(getattr(demos, net), "muP", widths=w0), None, 1e-2, 3),
            ("broken muP", getattr(demos, f"broken_mup_{net}"), "muP", 1e-2, 3),
            ("mup's own muP", _mup_factories(net), "muP", 1e-2, 3)]


def _builder(factory, lr):
    """(models for mup: {width: () -> module}, optcls: module -> Adam over the same groups as our run)."""
    import torch

    from limits.torch import Parameterised

    def build(width):
        if isinstance(factory, Parameterised):
            m = factory(width)
            m._limits_groups = factory.param_groups(m, lr)
            return m
        m, groups = factory(width)
        m._limits_groups = [{"params": g["params"], "lr": lr * g["lr_mult"]} for g in groups]
        return m

    return build, (lambda m: torch.optim.Adam(m._limits_groups, lr=lr))


def run_case(net, label, factory, expect, lr, steps, widths, seeds, repeat):
    import torch
    from mup.coord_check import _get_coord_data

    from limits.torch import coord_check

    X, Y = _labels(net)
    build, optcls = _builder(factory, lr)
    ours = mine = None
    cpu = {"ours": math.inf, "mup": math.inf}
    for _ in range(repeat):                                        # interleaved, best of `repeat`
        c = time.process_time()
        ours = coord_check(factory, widths, (X, Y), lr=lr, steps=steps, seeds=seeds, expect=expect)
        cpu["ours"] = min(cpu["ours"], time.process_time() - c)
        names = [n.split(" (")[0] for n, k in zip(ours.tensors, ours.kinds)      # mup: module outputs
                 if k == "module" and not n.endswith("self_attn")]
        c = time.process_time()
        mine = _get_coord_data({w: (lambda w=w: build(w)) for w in widths}, [(X, Y.reshape(-1))], optcls,
                               nsteps=steps + 1, lossfn="xent", cuda=False, nseeds=seeds, show_progress=False,
                               flatten_output=Y.dim() > 1,
                               filter_module_by_name=lambda n, names=set(names): n in names)
        cpu["mup"] = min(cpu["mup"], time.process_time() - c)
    rows = []
    for i, name in enumerate(ours.tensors):
        if ours.kinds[i] == "tensor":                              # per-tensor rows: mup has no counterpart
            continue
        row = {"tensor": name, "role": ours.roles[i]}
        for q, t, key in ((0, 0, "scale"), (1, 1, "change1"), (1, steps, "change")):
            row[key] = [float(ours.slope[i, t, q]), float(ours.ci_low[i, t, q]), float(ours.ci_high[i, t, q])]
            row[key + "_pred"] = ours._pred(i, t, q)
        row["ok"] = name not in ours.failing_tensors()
        sel = mine[mine.module == name.split(" (")[0]]
        for t, key in ((1, "mup_init"), (steps + 1, "mup_after")):
            s = sel[sel.t == t]
            l1 = [float(s[s.width == w].l1.mean()) if len(s[s.width == w]) else math.nan for w in widths]
            row[key] = l1
            ok = np.all(np.isfinite(l1)) and np.all(np.asarray(l1) > 0)
            row[key + "_slope"] = float(np.polyfit(np.log(widths), np.log(l1), 1)[0]) if ok else math.nan
        rows.append(row)
    return {"net": net, "case": label, "lr": lr, "steps": steps, "passed": bool(ours.passed),
            "failing": ours.failing_tensors(), "cpu_ours": cpu["ours"], "cpu_mup": cpu["mup"], "rows": rows}


def to_markdown(r, widths):
    ws = "/".join(str(w) for w in widths)
    head = (f"#### {r['net']}, {r['case']} — Adam lr {r['lr']:g}, {r['steps']} step(s): ours "
            f"{'as predicted' if r['passed'] else 'FLAGGED ' + ', '.join(r['failing'])}; CPU ours {r['cpu_ours']:.1f} s, "
            f"mup {r['cpu_mup']:.1f} s\n\n"
            f"| tensor | mup l1 at init (N = {ws}) | mup l1 after {r['steps']} step(s) | mup slope init / after | "
            "ours: scale at init [95 % CI] (pred.) | ours: change after step 1 | ours: change after step "
            f"{r['steps']} | verdict (every step) |\n"
            "|---|---|---|---|---|---|---|---|")
    out = [head]
    for row in r["rows"]:
        a = " / ".join(f"{v:.3g}" for v in row["mup_init"]) if np.all(np.isfinite(row["mup_init"])) else "—"
        b = " / ".join(f"{v:.3g}" for v in row["mup_after"]) if np.all(np.isfinite(row["mup_after"])) else "—"
        sl = ("—" if not math.isfinite(row["mup_init_slope"]) else
              f"{row['mup_init_slope']:+.2f} / {row['mup_after_slope']:+.2f}")
        cells = [f"{row[k][0]:+.2f} [{row[k][1]:+.2f}, {row[k][2]:+.2f}] ({row[k + '_pred']})"
                 for k in ("scale", "change1", "change")]
        out.append(f"| {row['tensor']} | {a} | {b} | {sl} | {' | '.join(cells)} | {'ok' if row['ok'] else '**NO**'} |")
    return "\n".join(out) + "\n"


ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "results" / "peers" / "mup_coordcheck.json"    # not results/*.json (readme_rows' rows)
BEGIN = "<!-- mup-coordcheck:begin (python benchmarks/mup_coordcheck.py --write) -->"
END = "<!-- mup-coordcheck:end -->"


def _cell(xs):
    return " / ".join(f"{v:.3g}" for v in xs) if np.all(np.isfinite(xs)) else "—"


def readout_rows(data) -> list:
    """The read-out row of every case (benchmarks/README.md), and one line of CPU ratios, from ``--json`` data."""
    ws = "/".join(str(w) for w in data["widths"])
    lines = [f"| network | case | mup: read-out l1 at init, N = {ws} (slope) | mup: after the last step (slope) | ours: "
             "read-out scale at init [95 % CI] (pred.) | ours: read-out change after step 1 (pred.) | ours: verdict | "
             "CPU ours / mup (ratio) |", "|---|---|---|---|---|---|---|---|"]
    for r in data["results"]:
        row = next(x for x in r["rows"] if x["role"] == "output")
        fit = {k: f"{row[k][0]:+.2f} [{row[k][1]:+.2f}, {row[k][2]:+.2f}] ({row[k + '_pred']})" for k in ("scale", "change1")}
        verdict = "as predicted" if r["passed"] else "flagged: " + ", ".join(f"`{f.split(' (')[0]}`" for f in r["failing"][:3])
        lines.append(f"| {r['net']} | {r['case']} | {_cell(row['mup_init'])} ({row['mup_init_slope']:+.2f}) | "
                     f"{_cell(row['mup_after'])} ({row['mup_after_slope']:+.2f}) | {fit['scale']} | {fit['change1']} | "
                     f"{verdict} | {r['cpu_ours']:.1f} s / {r['cpu_mup']:.1f} s ({r['cpu_ours'] / r['cpu_mup']:.1f}×) |")
    return lines


PAGE = ROOT / "benchmarks" / "README.md"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the MLP only")
    ap.add_argument("--nets", nargs="+", choices=("mlp", "transformer", "sdpa_gpt"), help="these networks only")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=2, help="interleaved runs per case (best CPU time)")
    ap.add_argument("--json", default=None, help="write the rows here")
    from _tables import add_table_options, show_or_write

    add_table_options(ap, None, write_help=f"put the read-out rows of the data ({DATA}, or --json) into "
                                           "benchmarks/README.md (no run)")
    a = ap.parse_args(argv)
    if show_or_write(a, a.json or DATA, PAGE, (BEGIN, END), readout_rows, readout_rows, show=None):
        return 0
    try:
        import mup  # noqa: F401
        from mup.coord_check import _get_coord_data  # noqa: F401
    except ImportError as exc:
        print(f"mup_coordcheck: skipped (mup is not importable here: {exc}); see the module docstring")
        return 0
    import torch

    if not torch.__version__.startswith("2.13.0"):
        print(f"mup_coordcheck: torch {torch.__version__} here, expected the project's 2.13.0 — refusing to compare")
        return 1
    torch.set_num_threads(1)
    widths = (64, 128, 256, 512)
    seeds = a.seeds or 3
    nets = a.nets or (("mlp",) if a.quick else ("mlp", "transformer", "sdpa_gpt"))
    results = []
    from importlib.metadata import version

    print(f"torch {torch.__version__}, mup {version('mup')}, widths {widths}, "
          f"{seeds} seeds, one torch thread (machine shared: CPU times indicative)\n")
    for net in nets:
        for label, factory, expect, lr, steps in _cases(net):
            r = run_case(net, label, factory, expect, lr, steps, widths, seeds, a.repeat)
            results.append(r)
            print(to_markdown(r, widths), flush=True)
    if a.json:
        from limits.results import atomic_write_text

        atomic_write_text(a.json, json.dumps({"widths": widths, "seeds": seeds, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
