"""Calibration of ``parameterise``'s SP-init check (:mod:`limits.torch.initscale`): its false-refusal rate on factories
whose init is SP (torch's defaults) and its power on nanoGPT's N(0, 0.02²) init, over independent draws at the
classification widths 32 and 64. A validation report, not a timing::

    python benchmarks/initscale_calibration.py [--draws 200]      # ~10 CPU-seconds
"""
from __future__ import annotations

import argparse
import math
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=200, help="independent (width 32, width 64) draws per factory")
    a = ap.parse_args(argv)
    import torch

    from limits.torch import demos, handwritten as hw
    from limits.torch.apply_params import build_module, classify
    from limits.torch.initscale import SP_EXPONENT, init_deviations

    torch.set_num_threads(1)
    cases = [("demo MLP", demos.mlp, True), ("demo nn.TransformerEncoder", demos.transformer, True),
             ("demo GPT (SDPA)", demos.gpt, True), ("demo GPT, tied read-out", demos.gpt_tied, True),
             ("GPT with nn.MultiheadAttention", hw.plain_mha_gpt, True), ("nanoGPT init N(0, 0.02²)", demos.gpt_nanogpt_init, False)]
    print("| factory | init | weights judged | draws | refused (rate ± SE) |\n|---|---|---:|---:|---|")
    for name, f, sp in cases:
        rules, _ = classify(f, (32, 64))
        judged = sum(q.role in SP_EXPONENT for q in rules)
        refused = 0
        for s in range(a.draws):
            torch.manual_seed(s)
            refused += bool(init_deviations(build_module(f, 32), build_module(f, 64), 32, 64, rules))
        p = refused / a.draws
        se = math.sqrt(max(p * (1 - p), 1.0 / a.draws) / a.draws)
        print(f"| {name} | {'SP (torch defaults)' if sp else 'not SP'} | {judged} | {a.draws} | "
              f"{refused} ({p:.3f} ± {se:.3f}) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
