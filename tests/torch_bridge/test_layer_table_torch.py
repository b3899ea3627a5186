"""limits.params.layer_table (compositions) and limits.torch.parameterise (torch modules) give the same role and
exponents to the same tensor, and the same attention logit scaling."""
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import limits  # noqa: E402
from limits import layers as L  # noqa: E402
from limits.torch import parameterise  # noqa: E402

CNN = limits.serial(L.Conv((3, 3), "SAME"), L.Activation("relu"), L.Conv((3, 3), "SAME"), L.Activation("relu"),
                    L.GlobalAvgPool(), L.Dense())


def torch_cnn(w):
    return nn.Sequential(nn.Conv2d(2, w, 3, padding=1), nn.ReLU(), nn.Conv2d(w, w, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(w, 1))


CNN_NAMES = {"0.weight": ("0", "W"), "0.bias": ("0", "b"), "2.weight": ("2", "W"), "2.bias": ("2", "b"),
             "6.weight": ("5", "W"), "6.bias": ("5", "b")}


class TorchAttention(nn.Module):
    """Dense → 2-head self-attention (1/√d_h logits) → mean over positions → Dense, the torch form of ATTN."""

    def __init__(self, w):
        super().__init__()
        self.inp, self.att, self.out = nn.Linear(3, w), nn.MultiheadAttention(w, 2, batch_first=True), nn.Linear(w, 1)

    def forward(self, x):
        h = self.inp(x)
        return self.out(self.att(h, h, h, need_weights=False)[0].mean(1))


ATTN = limits.serial(L.Dense(), L.Attention(2), L.GlobalAvgPool(), L.Dense())
ATTN_NAMES = {"inp.weight": ("0", "W"), "inp.bias": ("0", "b"), "att.in_proj_weight": ("1", "K"),
              "att.in_proj_bias": ("1", "b"), "att.out_proj.weight": ("1", "O"), "att.out_proj.bias": ("1", "b"),
              "out.weight": ("3", "W"), "out.bias": ("3", "b")}


@pytest.mark.parametrize("name", ["SP", "NTK", "muP", "MF"])
@pytest.mark.parametrize("case", ["cnn", "attention"])
def test_roles_and_exponents_agree(name, case):
    factory, comp, names, x = {"cnn": (torch_cnn, CNN, CNN_NAMES, (torch.randn(2, 2, 4, 4),)),
                               "attention": (TorchAttention, ATTN, ATTN_NAMES, (torch.randn(2, 5, 3),))}[case]
    P = parameterise(factory, name, widths=(16, 32), optimizer="sgd", gauge=None, check_init=False, example_inputs=x)
    t = limits.params.layer_table(comp, name, convention="std")
    for q in P.rules:
        r = t.row(*names[q.name])
        assert q.role == r.role, q.name
        assert (q.a, q.b, q.c) == pytest.approx(r.std), q.name
    if case == "attention":                 # torch: logits q·k/√d_h × N^{query exponent}; d_h ∝ N
        qe = {q.name: q.query_exponent for q in P.rules}["att.in_proj_weight"]
        assert 0.5 - qe == t.logits["1"]
