"""Depth-μP applied to a residual torch factory (limits.torch.depth): blocks found from two depths, residual
branches traced with torch.fx, the branch multiplier (L/L0)^−α and block rates (L/L0)^{e_L} of the table, clear
refusals, and the coordinate check across depth (Depth-μP flat, width-only μP's change growing with L)."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import limits.torch as lt  # noqa: E402
from limits.torch import depth as D  # noqa: E402
from limits.torch import transfer_demos as demos  # noqa: E402


class Branch(nn.Module):                   # a block that is the branch: the network adds it
    def __init__(self, w):
        super().__init__()
        self.lin = nn.Linear(w, w)

    def forward(self, h):
        return self.lin(torch.tanh(h))


class Outer(nn.Module):
    def __init__(self, w, L):
        super().__init__()
        self.inp = nn.Linear(4, w)
        self.layers = nn.ModuleList(Branch(w) for _ in range(L))
        self.out = nn.Linear(w, 2)

    def forward(self, x):
        h = self.inp(x)
        for b in self.layers:
            h = h + b(h)
        return self.out(h)


def outer(w, L):
    return Outer(w, L)


def test_blocks_and_branches_are_found():
    lay = D.block_layout(demos.residual_mlp, 16, (2, 3))
    assert lay.prefix == "blocks" and lay.rest == ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
    assert lay.block_of("blocks.7.fc1.weight") == 7 and lay.block_of("inp.weight") is None
    assert D.branch_modules(demos.Block(8)) == ("fc2",)
    assert D.branch_modules(Branch(8)) == ("",)
    assert D.branch_modules(demos.CausalBlock(8, 2)) == ("attn", "fc2")
    assert D.block_layout(outer, 8, (1, 4)).prefix == "layers"


def test_depth_mup_multiplier_and_rates_and_base_depth_is_the_factory():
    P = lt.parameterise(demos.residual_mlp, "depth-muP", widths=(16, 32), depths=(2, 8))
    assert (P.alpha, P.depth_lr_exponent, P.base_depth, P.branches) == (0.5, -0.5, 2, ("fc2",))
    x = torch.randn(5, 64, dtype=torch.float32)
    torch.manual_seed(3)
    ref = demos.residual_mlp(16, 2)
    torch.manual_seed(3)
    m = P(16, 2)
    assert torch.allclose(m(x), ref(x))                        # base width and depth: the factory's own network
    torch.manual_seed(4)
    ref = demos.residual_mlp(16, 8)
    torch.manual_seed(4)
    m = P(16, 8)
    h = ref.inp(x)
    for b in ref.blocks:                                       # branch × (8/2)^(-1/2)
        h = h + 0.5 * b.fc2(torch.relu(b.fc1(h)))
    assert torch.allclose(m(x), ref.out(torch.relu(h)), atol=1e-6)
    lr = {n: f for n, _, f in m.limits_lr_multipliers}
    assert lr["blocks.5.fc1.weight"] == 0.5 and lr["inp.weight"] == 1.0 and lr["out.weight"] == 1.0
    groups = P.optimizer(m, 1e-3).param_groups
    assert {g["name"]: g["lr"] for g in groups}["blocks.3.fc2.weight"] == pytest.approx(5e-4)
    W = lt.parameterise(demos.residual_mlp, "muP", widths=(16, 32), depths=(2, 8))      # width-only μP
    assert (W.alpha, W.depth_lr_exponent) == (0.0, 0.0)
    assert "branch multiplier" in P.to_markdown(16, 8)


def test_block_that_is_the_branch_gets_the_multiplier_on_its_output():
    P = lt.parameterise(outer, "depth-muP", widths=(8, 16), depths=(1, 4))
    torch.manual_seed(0)
    ref = outer(8, 4)
    torch.manual_seed(0)
    m = P(8, 4)
    x = torch.randn(3, 4)
    h = ref.inp(x)
    for b in ref.layers:
        h = h + 0.5 * b(h)
    assert torch.allclose(m(x), ref.out(h), atol=1e-6)


class Shared(nn.Module):                 # a parameter outside the blocks whose shape follows the depth
    def __init__(self, w, L):
        super().__init__()
        self.blocks = nn.ModuleList(demos.Block(w) for _ in range(L))
        self.gates = nn.Parameter(torch.ones(L))

    def forward(self, x):
        return x


class Scaled(nn.Module):                 # branch output is not a module's output
    def __init__(self, w):
        super().__init__()
        self.lin = nn.Linear(w, w)

    def forward(self, h):
        return h + 0.5 * self.lin(h)


class ScaledNet(nn.Module):
    def __init__(self, w, L):
        super().__init__()
        self.inp = nn.Linear(4, w)
        self.blocks = nn.ModuleList(Scaled(w) for _ in range(L))
        self.out = nn.Linear(w, 2)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.out(h)


def test_refusals_name_the_reason():
    with pytest.raises(ValueError, match="does not use its depth"):
        lt.parameterise(lambda w, L: demos.digits_mlp(w), "depth-muP", widths=(8, 16), depths=(2, 4))
    with pytest.raises(ValueError, match="several containers|outside the blocks"):
        lt.parameterise(lambda w, L: Shared(w, L), "depth-muP", widths=(8, 16), depths=(2, 4))
    with pytest.raises(ValueError, match="not the output of a submodule"):
        lt.parameterise(lambda w, L: ScaledNet(w, L), "depth-muP", widths=(8, 16), depths=(2, 4))


def test_coord_check_across_depth_depth_mup_flat_width_only_grows():
    """Adam, one step, lr 1e-2, width 64, depths 2…16, 3 seeds: Depth-μP's stream and output changes are
    depth-independent (predicted L^0); under width-only μP they grow (predicted L^1, TP6's summed update)."""
    d = demos.digits_data()["train"]
    data = (d[0][:128], d[1][:128])
    depths = (2, 4, 8, 16)
    P = lt.parameterise(demos.residual_mlp, "depth-muP", widths=(64, 128), depths=depths)
    r = lt.depth_coord_check(P, depths, data, lr=1e-2, steps=1, seeds=3)
    assert r.passed, r.to_markdown()
    assert abs(r.slope[1]) < 0.25 and r.predicted[1] == 0.0
    W = lt.parameterise(demos.residual_mlp, "muP", widths=(64, 128), depths=depths)
    w = lt.depth_coord_check(W, depths, data, lr=1e-2, steps=1, seeds=3)
    assert w.predicted[1] == 1.0 and math.isnan(w.predicted[0])        # exponential init growth: no power law
    assert w.slope[1] > r.slope[1] + 0.3
    assert "stream change" in w.to_markdown()
    r2 = type(r).load(r.save(str(pytest.importorskip("pathlib").Path(__file__).parent / "_tmp_dcc"))[0])
    assert r2.equals(r)


@pytest.fixture(autouse=True)
def _cleanup():
    yield
    import pathlib

    for f in pathlib.Path(__file__).parent.glob("_tmp_dcc.*"):
        f.unlink()


def _fixed_std(w, L):
    """Every weight matrix N(0, 0.02²) at every width (nanoGPT's init): not SP."""
    m = Outer(w, L)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
    return m


def test_the_init_check_holds_across_depth_too():
    with pytest.raises(ValueError, match=r"init is not SP.*layers\.0\.lin\.weight \(hidden\).*check_init=False"):
        lt.parameterise(_fixed_std, "depth-muP", widths=(32, 64), depths=(2, 4))
    P = lt.parameterise(_fixed_std, "depth-muP", widths=(32, 64), depths=(2, 4), check_init=False)
    assert isinstance(P, D.DepthParameterised)
