"""Residual branches found by running a block (limits.torch.branches), for blocks torch.fx cannot trace: keyword
inputs (a decoder layer called with ``attention_mask=…``), parallel branches summed in place, residual additions
inside submodules; and Depth-μP's multipliers applied on them."""
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from limits.torch import parameterise  # noqa: E402
from limits.torch.branches import executed_branches  # noqa: E402


class Untraceable(nn.Module):
    """A pre-LN block with a data-dependent branch in its forward (torch.fx fails) and keyword inputs."""

    def __init__(self, width, kind):
        super().__init__()
        self.kind = kind
        self.ln = nn.LayerNorm(width)
        self.attn = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.ReLU(), nn.Linear(2 * width, width))

    def forward(self, x, mask=None):
        if float(x.detach().abs().sum()) < 0:     # data-dependent: fx cannot trace it
            return x
        if self.kind == "sequential":            # h = x + attn(ln x); y = h + mlp(ln h)
            h = x + self.attn(self.ln(x))
            return h + self.mlp(self.ln(h))
        if self.kind == "parallel":              # Falcon: m = mlp(ln x); m += attn(ln x); y = m + x
            m = self.mlp(self.ln(x))
            m += self.attn(self.ln(x))
            return m + x
        return self.mlp(x)                       # no residual: the network adds the block


class Net(nn.Module):
    def __init__(self, width, depth, kind="sequential"):
        super().__init__()
        self.inp = nn.Linear(4, width)
        self.blocks = nn.ModuleList(Untraceable(width, kind) for _ in range(depth))
        self.out = nn.Linear(width, 3)
        self.add = kind == "branch"

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = h + b(h, mask=None) if self.add else b(h, mask=None)
        return self.out(h)


X = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("kind, want", [("sequential", ("attn", "mlp")), ("parallel", ("mlp", "attn")),
                                        ("branch", ("",))])
def test_branches_of_an_untraceable_block(kind, want):
    net = Net(16, 2, kind)
    assert executed_branches(net, net.blocks[0], (X,)) == want


def test_a_branch_that_is_no_submodule_output_is_refused():
    class Scaled(Untraceable):
        def forward(self, x, mask=None):
            return x + 0.5 * self.attn(x)

    net = Net(16, 2)
    net.blocks[0] = Scaled(16, "sequential")
    with pytest.raises(ValueError, match="not the output of one of its submodules"):
        executed_branches(net, net.blocks[0], (X,))


@pytest.mark.parametrize("kind", ["sequential", "parallel"])
def test_depth_mup_scales_the_executed_branches(kind):
    P = parameterise(lambda w, d: Net(w, d, kind), "depth-muP", widths=(16, 32), depths=(2, 4), example_inputs=(X,))
    assert set(P.branches) == {"attn", "mlp"}
    a = P(16, 8, seed=1)
    torch.manual_seed(1)
    b = Net(16, 8, kind)
    for blk in b.blocks:                         # the same multiplier by hand: (8/2)^-1/2
        for name in ("attn", "mlp"):
            blk.get_submodule(name).register_forward_hook(lambda m, i, o: o * 0.5)
    with torch.no_grad():
        assert torch.allclose(a(X), b(X), rtol=1e-6, atol=1e-7)
