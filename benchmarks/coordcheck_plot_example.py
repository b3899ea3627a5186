"""The example figure of ``TorchCoordCheck.plot`` in docs/torch_checks.rst: the demo transformer under μP with its
read-out left as in SP (``limits.torch.demos.broken_mup_transformer``), checked as built against μP, widths
64–512 (coord-check's default), 4 seeds, 3 Adam steps at lr 1e-2. The check is saved as data; the figure is drawn from it::

    nice -n 10 python benchmarks/coordcheck_plot_example.py            # compute, save, draw (≈ 1 CPU-min)
    python benchmarks/coordcheck_plot_example.py --replot               # draw from the committed data
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "results" / "calibration" / "coordcheck_plot_example"
FIGURE = ROOT / "docs" / "_static" / "torch_coordcheck_plot.png"


def compute():
    import torch

    import limits.torch as lt
    from limits.torch import demos

    torch.set_num_threads(1)
    return lt.coord_check(demos.broken_mup_transformer, (64, 128, 256, 512), demos.transformer_data(), expect="muP",
                          lr=1e-2, steps=3, seeds=4, seed=0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replot", action="store_true", help="draw from the committed data only")
    a = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    from limits.torch.coordcheck import TorchCoordCheck

    if a.replot:
        r = TorchCoordCheck.load(DATA)
    else:
        r = compute()
        r.save(DATA)
    r.plot(FIGURE)
    print(r.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
