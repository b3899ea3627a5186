"""Calibration of the "no verdict without a measurement" rule (:mod:`limits.torch.measured`) and of the data checks
(:mod:`limits.torch.data_checks`): how often they refuse the project's correct demo modules and data (false alarms;
must be 0) and how often they refuse broken ones (power). A validation report, not a timing::

    nice -n 10 python benchmarks/measurement_rule.py --json benchmarks/results/calibration/measurement_rule.json
    python benchmarks/measurement_rule.py --rows          # its tables (--rst: as in docs/torch_checks.rst)

Coordinate checks: every correct demo module of ``limits.torch`` (the demo MLP under four tables and two
optimizers, the demo transformer and GPTs, the hand-written μP GPTs checked as-is, the transfer demos, a μP MLP
with a read-out initialised to zero checked for 3 steps), widths 32–128, 4 seeds, 3 steps, at the learning rates
1e-2 (the calibration's) and 1e-4 (coord-check's default), each check at 2 seeds of its own; the rule refuses
when :meth:`TorchCoordCheck.unmeasured` is non-empty. Broken: all-zero weights, a detached hidden weight, the
first layer run under ``torch.no_grad``, dead ReLUs, a learning-rate multiplier of 1e-30 on one tensor, SGD at
lr 1e30 (diverges), and the zero read-out checked for one step (its hidden tensors get no gradient at step 1:
unmeasurable, so refused). Transfer studies: the digits MLP (μP, SP) as correct; all-zero weights, a detached
weight, and every run diverging as broken. Data: every demo factory with its own data (must pass) and the bad
data of the torch fuzz suite (must be refused).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))          # _tables
BEGIN = ".. measurement-rule:begin (python benchmarks/measurement_rule.py --rst)"
END = ".. measurement-rule:end"
DATA = ROOT / "benchmarks" / "results" / "calibration" / "measurement_rule.json"
WIDTHS = (32, 64, 128)


def _nets():
    import torch
    from torch import nn

    class Detached(nn.Module):
        """Linear(8, N) → tanh → h·Wᵀ with W detached → tanh → Linear(N, 2): W never gets a gradient."""

        def __init__(self, width):
            super().__init__()
            self.a, self.h, self.o = nn.Linear(8, width), nn.Linear(width, width), nn.Linear(width, 2)

        def forward(self, x):
            z = torch.tanh(self.a(x))
            z = torch.tanh(nn.functional.linear(z, self.h.weight.detach(), self.h.bias))
            return self.o(z)

    class NoGradFirst(nn.Module):
        """The first layer runs under torch.no_grad: it never changes."""

        def __init__(self, width):
            super().__init__()
            self.a, self.h, self.o = nn.Linear(8, width), nn.Linear(width, width), nn.Linear(width, 2)

        def forward(self, x):
            with torch.no_grad():
                z = torch.tanh(self.a(x))
            return self.o(torch.tanh(self.h(z)))

    def zero(width):
        m = nn.Sequential(nn.Linear(8, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 2))
        with torch.no_grad():
            for p in m.parameters():
                p.zero_()
        return m

    def dead_relu(width):
        m = nn.Sequential(nn.Linear(8, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 2))
        with torch.no_grad():
            m[0].bias.fill_(-100.0)
        return m

    return Detached, NoGradFirst, zero, dead_relu


def _zero_readout_mup(width):
    """The demo MLP under μP (Adam) with its read-out weight initialised to 0, and its optimizer groups."""
    import torch

    from limits.torch import demos, parameterise

    P = parameterise(demos.mlp, "muP", widths=(32, 64))
    m = P(width)
    with torch.no_grad():
        m[4].weight.zero_()
    return m, [{"params": [p], "lr_mult": mult} for _, p, mult in m.limits_lr_multipliers]


def _tiny_lr_one_tensor(width):
    from limits.torch import demos

    m = demos.mlp(width)
    return m, [{"params": [p], "lr_mult": 1e-30 if n == "2.weight" else 1.0} for n, p in m.named_parameters()]


def coord_cases():
    """{name: (factory, check keyword arguments, data, correct?)}."""
    from limits.torch import demos, handwritten as hw, parameterise, transfer_demos as td
    from limits.torch.depth import AtDepth

    Detached, NoGradFirst, zero, dead_relu = _nets()
    mlp = demos.mlp_data()
    digits = td.digits_data()["train"]
    digits = (digits[0][:128], digits[1][:128])
    P = lambda f, name, **k: parameterise(f, name, widths=WIDTHS[:2], **k)  # noqa: E731
    ok = {
        "MLP μP (Adam)": (P(demos.mlp, "muP"), {}, mlp),
        "MLP SP (Adam)": (P(demos.mlp, "SP"), {}, mlp),
        "MLP NTK (Adam)": (P(demos.mlp, "NTK"), {}, mlp),
        "MLP MF (Adam)": (P(demos.mlp, "MF"), {}, mlp),
        "MLP μP (SGD)": (P(demos.mlp, "muP", optimizer="sgd"), {}, mlp),
        "MLP SP (SGD)": (P(demos.mlp, "SP", optimizer="sgd"), {}, mlp),
        "transformer μP": (P(demos.transformer, "muP"), {}, demos.transformer_data()),
        "transformer μP as built (mup_transformer)": (demos.mup_transformer, {"expect": "muP"},
                                                      demos.transformer_data()),
        "GPT μP": (P(demos.gpt, "muP", example_inputs=(demos.byte_data()[0],)), {}, demos.byte_data()),
        "GPT tied μP": (P(demos.gpt_tied, "muP", example_inputs=(demos.byte_data()[0],)), {}, demos.byte_data()),
        "GPT explicit attention μP": (P(demos.gpt_explicit, "muP", example_inputs=(demos.byte_data()[0],)), {},
                                      demos.byte_data()),
        "GPT fixed head dim μP": (P(demos.gpt_fixed_head_dim, "muP", example_inputs=(demos.byte_data()[0],)), {},
                                  demos.byte_data()),
        "hand-written SDPA GPT (as built, μP)": (hw.sdpa_gpt, {"expect": "muP"}, hw.gpt_data()),
        "hand-written byte GPT (as built, μP)": (hw.byte_gpt, {"expect": "muP"}, hw.gpt_data(8, vocab=256, seq=32)),
        "digits MLP μP": (P(td.digits_mlp, "muP"), {}, digits),
        "residual MLP μP (depth 4)": (P(AtDepth(td.residual_mlp, 4), "muP"), {}, digits),
        "μP MLP, zero read-out, 3 steps": (_zero_readout_mup, {"expect": "muP"}, mlp),
    }
    bad = {
        "all-zero weights": (zero, {"expect": "muP"}, mlp),
        "detached hidden weight": (Detached, {"expect": "muP"}, mlp),
        "first layer under no_grad": (NoGradFirst, {"expect": "muP"}, mlp),
        "dead ReLUs (bias -100)": (dead_relu, {"expect": "muP"}, mlp),
        "lr multiplier 1e-30 on one tensor": (_tiny_lr_one_tensor, {"expect": "SP"}, mlp),
        "SGD at lr 1e30 (diverges)": (demos.mlp, {"expect": "SP", "optimizer": "sgd", "lr": 1e30}, mlp),
        "μP MLP, zero read-out, 1 step": (_zero_readout_mup, {"expect": "muP", "steps": 1}, mlp),
    }
    return ({k: v + (True,) for k, v in ok.items()}, {k: v + (False,) for k, v in bad.items()})


def run_coord(checks, progress=print):
    from limits.torch import coord_check

    ok, bad = coord_cases()
    out = {"correct": {}, "broken": {}}
    for group, cases in (("correct", ok), ("broken", bad)):
        for name, (f, kw, data, _) in cases.items():
            runs = []
            lrs = (1e-2, 1e-4) if "lr" not in kw else (kw["lr"],)
            for lr in lrs:
                for s in range(checks):
                    c = time.process_time()
                    args = {"steps": 3, "seeds": 4, **kw, "lr": lr}
                    r = coord_check(f, WIDTHS, data, seed=2000 + s, **args)
                    un = r.unmeasured()
                    runs.append({"lr": lr, "seed": 2000 + s, "refused": bool(un), "passed": bool(r.passed),
                                 "unmeasured": [f"{n}: {w}" for n, w in un][:6], "cpu": time.process_time() - c})
            out[group][name] = runs
            progress(f"coord {group}: {name}: refused by the rule {sum(r['refused'] for r in runs)}/{len(runs)}")
    return out


def run_transfer(progress=print):
    from limits.torch import demos, transfer, transfer_demos as td

    Detached, _, zero, _ = _nets()
    d = td.digits_data()["train"]
    kw = dict(widths=(16, 32, 64), steps=20, seeds=2, batch_size=64, calibrate=False, progress=False)
    cases = {
        ("correct", "digits MLP μP"): (td.digits_mlp, "muP", 2.0 ** np.arange(-12, -3, 2), d),
        ("correct", "digits MLP SP"): (td.digits_mlp, "SP", 2.0 ** np.arange(-12, -3, 2), d),
        ("broken", "all-zero weights"): (zero, "muP", 2.0 ** np.arange(-12, -3, 2), demos.mlp_data()),
        ("broken", "detached hidden weight"): (Detached, "muP", 2.0 ** np.arange(-12, -3, 2), demos.mlp_data()),
        ("broken", "every run diverges (SGD, lr 1e30…)"): (demos.mlp, "SP", [1e30, 1e31, 1e32], demos.mlp_data()),
    }
    out = {"correct": {}, "broken": {}}
    for (group, name), (f, param, lrs, data) in cases.items():
        c = time.process_time()
        opt = "sgd" if "SGD" in name else "adam"
        r = transfer(f, param, lrs=lrs, data=data, optimizer=opt, **dict(kw, batch_size=None if len(data[0]) < 64
                                                                          else 64))
        refused = r.verdict_reason.startswith("no measurement")
        out[group][name] = {"refused": refused, "verdict": r.verdict, "reason": r.verdict_reason[:300],
                            "cpu": time.process_time() - c}
        progress(f"transfer {group}: {name}: {'refused' if refused else 'not refused'} ({r.verdict})")
    return out


def run_data(progress=print):
    """Every demo factory with its own data must pass :func:`check_factory_data`; the fuzz suite's bad data
    (tests/torch_bridge/test_torch_cli_fuzz.py) must be refused."""
    import importlib.util

    from limits.torch import demos, handwritten as hw, transfer_demos as td
    from limits.torch.data_checks import check_factory_data
    from limits.torch.depth import AtDepth

    digits = td.digits_data()
    good = {"mlp + mlp_data": (demos.mlp, demos.mlp_data()),
            "transformer + transformer_data": (demos.transformer, demos.transformer_data()),
            "gpt + byte_data": (demos.gpt, demos.byte_data()), "gpt_tied + byte_data": (demos.gpt_tied, demos.byte_data()),
            "sdpa_gpt + gpt_data": (hw.sdpa_gpt, hw.gpt_data()),
            "digits_mlp + digits train": (td.digits_mlp, digits["train"]),
            "digits_mlp + digits test": (td.digits_mlp, digits["test"]),
            "residual_mlp(·, 4) + digits train": (AtDepth(td.residual_mlp, 4), digits["train"]),
            "byte_transformer + text train": (td.byte_transformer, td.text_data()["train"]),
            "byte_transformer + text test": (td.byte_transformer, td.text_data()["test"])}
    out = {"correct": {}, "broken": {}}
    for name, (f, data) in good.items():
        try:
            check_factory_data(f, 16, data)
            out["correct"][name] = {"refused": False}
        except ValueError as exc:
            out["correct"][name] = {"refused": True, "reason": str(exc)[:300]}
    spec = importlib.util.spec_from_file_location("_fz", ROOT / "tests" / "torch_bridge" / "test_torch_cli_fuzz.py")
    src = spec.loader.get_data(spec.origin).decode()
    ns = {}
    exec(src.split("USER = '''")[1].split("'''")[0], ns)         # the fuzz suite's bad data functions
    for name in [n for n, v in ns.items() if callable(v) and not n.startswith("_") and n not in
                 ("nan_mlp", "X8", "Y2", "g")]:
        if not hasattr(ns[name], "__code__") or ns[name].__code__.co_argcount:
            continue
        f = demos.transformer if name in ("float_ids", "ids_range", "ids_negative") else demos.mlp
        got = ns[name]()
        if isinstance(got, dict):
            continue                                               # train/test dicts: the transfer command's
        try:
            check_factory_data(f, 16, got, inputs_only=True)
            out["broken"][name] = {"refused": False}
        except ValueError as exc:
            out["broken"][name] = {"refused": True, "reason": str(exc)[:200]}
    progress(f"data: correct refused {sum(v['refused'] for v in out['correct'].values())}/{len(out['correct'])}, "
             f"broken refused {sum(v['refused'] for v in out['broken'].values())}/{len(out['broken'])}")
    return out


def tables(data) -> list:
    """[(caption, header, rows)] of the docs from the committed data."""
    header = ["rule", "correct inputs refused (false alarms)", "broken inputs refused (power)"]
    c, t, d = data["coord"], data["transfer"], data["data"]
    k_ok = sum(r["refused"] for runs in c["correct"].values() for r in runs)
    n_ok = sum(len(runs) for runs in c["correct"].values())
    k_bad = sum(all(r["refused"] for r in runs) for runs in c["broken"].values())
    rows = [["coordinate check: no verdict without a measurement",
             f"{k_ok}/{n_ok} checks of {len(c['correct'])} modules", f"{k_bad}/{len(c['broken'])} modules (every check)"],
            ["transfer study: no verdict without a measurement",
             f"{sum(v['refused'] for v in t['correct'].values())}/{len(t['correct'])} studies",
             f"{sum(v['refused'] for v in t['broken'].values())}/{len(t['broken'])} studies"],
            ["data checks (check_data)", f"{sum(v['refused'] for v in d['correct'].values())}/{len(d['correct'])} "
             "demo factory + data pairs", f"{sum(v['refused'] for v in d['broken'].values())}/{len(d['broken'])} "
             "bad data functions"]]
    broken = [[name, f"{sum(r['refused'] for r in runs)}/{len(runs)}",
               (runs[0]["unmeasured"][0].replace("|", "/") if runs[0]["unmeasured"] else "—")]
              for name, runs in c["broken"].items()]
    return [("False alarms and power of the torch checks", header, rows),
            ("Broken modules: checks refused by the measurement rule, and the first reason",
             ["broken module", "refused", "first reason given"], broken)]


def rows(data) -> list:
    """Markdown lines (console) of :func:`tables`."""
    from _tables import markdown_lines

    return markdown_lines(tables(data))


def rst(data) -> list:
    """reST lines (docs/torch_checks.rst) of :func:`tables`."""
    from _tables import rst_lines

    return rst_lines(tables(data))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checks", type=int, default=2, help="checks per module and learning rate (default 2)")
    ap.add_argument("--json", type=Path, help="write the data here")
    ap.add_argument("--rows", action="store_true", help="print the tables from the committed data")
    ap.add_argument("--rst", dest="as_rst", action="store_true",
                    help="print the docs' reST tables from the committed data")
    a = ap.parse_args(argv)
    if a.rows or a.as_rst:
        print("\n".join((rst if a.as_rst else rows)(json.loads(DATA.read_text()))))
        return 0
    import torch

    torch.set_num_threads(1)
    c0 = time.process_time()
    out = {"widths": list(WIDTHS), "torch": torch.__version__, "data": run_data(),
           "transfer": run_transfer(), "coord": run_coord(a.checks)}
    out["cpu_seconds"] = time.process_time() - c0
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    print("\n".join(rows(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
