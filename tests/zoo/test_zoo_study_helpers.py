"""The study's optimizer and bug wrappers (benchmarks/zoo_study.py) do what the stored results say they did: Adam's ε
per width in every optimizer group (ConvNeXt's ε study), and a Depth-μP factor left out of the built module while
the parameterisation (hence the check's prediction) keeps it."""
import importlib.util
import math
import sys
from pathlib import Path

import torch

import limits.torch as lt
from limits.torch.zoo import families as F

ROOT = Path(__file__).resolve().parents[2]


def _study():
    spec = importlib.util.spec_from_file_location("zoo_study", ROOT / "benchmarks" / "zoo_study.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("zoo_study", mod)       # dataclasses defined in it look their module up
    spec.loader.exec_module(sys.modules["zoo_study"])
    return sys.modules["zoo_study"]


def test_with_eps_sets_adam_eps_per_width_in_every_group(one_thread):
    z = _study()
    f = F.factory("convnext")
    X, _ = F.data("convnext")["train"]
    P = lt.parameterise(f, "muP", widths=(32, 64), example_inputs=(X[:4],))
    for k in (0.0, 1.0):
        Q = z.with_eps(P, 1e-8, k)
        for N in (32, 128):
            m = Q(N, seed=0)
            groups = Q.param_groups(m, 1e-2)
            assert len(groups) == len(P.param_groups(P(N, seed=0), 1e-2))
            want = 1e-8 * (N / 32) ** -k
            assert all(math.isclose(g["eps"], want, rel_tol=1e-12) for g in groups)
            opt = torch.optim.Adam(groups, lr=1e-2)         # torch keeps a group's own eps
            assert all(math.isclose(g["eps"], want, rel_tol=1e-12) for g in opt.param_groups)
    bug = z.bugged(z.with_eps(P, 1e-16), "hidden lr x r")  # the bug wrapper keeps the ε
    assert all(g["eps"] == 1e-16 for g in bug.param_groups(bug(64, seed=0), 1e-2))


def test_depth_bugs_leave_one_factor_out_of_the_module_only(one_thread):
    z = _study()
    f = F.factory("llama", depth=True)
    X, _ = F.data("llama", n_train=8)["train"]
    P = lt.parameterise(f, "depth-muP", widths=(32, 64), depths=(2, 4), example_inputs=(X[:4],))
    for bug, change in z.DEPTH_BUGS.items():
        B = z.depth_bugged(P, bug)
        assert (B.alpha, B.depth_lr_exponent) == (P.alpha, P.depth_lr_exponent)   # the check predicts P's table
        m, ref = B(32, 8, seed=1), P(32, 8, seed=1)
        _, mult, lr_f = m.limits_depth
        _, ref_mult, ref_lr = ref.limits_depth
        assert math.isclose(ref_mult, 0.5) and math.isclose(ref_lr, 0.5)       # (8/2)^-½ each under Depth-μP
        key = next(iter(change))
        assert math.isclose(mult, 1.0 if key == "alpha" else ref_mult)
        assert math.isclose(lr_f, 1.0 if key == "depth_lr_exponent" else ref_lr)
