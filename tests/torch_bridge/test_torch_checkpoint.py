"""Plain checkpoints of parameterised modules: export folds every multiplier (query rows, derived-gauge
multipliers, a tied read-out's 1/r) so factory(width) computes the same function; import inverts it; any key,
shape or tie mismatch raises."""
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from limits.torch import demos, parameterise  # noqa: E402
from limits.torch.graph import plain_key  # noqa: E402

TOKENS = demos.byte_data()[0]
CASES = {
    "sdpa": (demos.gpt, TOKENS),
    "explicit": (demos.gpt_explicit, TOKENS),
    "tied": (demos.gpt_tied, TOKENS),
    "multihead": (demos.transformer, demos.transformer_data()[0]),
    "mlp": (demos.mlp, demos.mlp_data()[0].double()),
}
WIDTH = 96            # r = 3 from the base width 32: multipliers that are not powers of two


def _rel(a, b):
    return float((a - b).abs().max().detach() / b.abs().max().detach())


@pytest.mark.parametrize("gauge", ["a0", None])
@pytest.mark.parametrize("case", list(CASES))
def test_export_loads_into_the_plain_factory_with_the_same_function(case, gauge):
    factory, x = CASES[case]
    P = parameterise(factory, "muP", widths=(32, 64), gauge=gauge)
    net = P(WIDTH, seed=2).double()
    y = net(x)
    sd = P.export_state_dict(net)
    plain = factory(WIDTH).double()
    plain.load_state_dict(sd, strict=True)
    assert _rel(plain(x), y) <= 1e-10
    back = P(WIDTH, seed=5).double()                       # different weights, then the checkpoint
    P.import_state_dict(back, sd)
    assert _rel(back(x), y) <= 1e-10
    raw, raw_back = net.state_dict(), back.state_dict()    # round trip: the stored tensors themselves
    assert list(raw) == list(raw_back)
    for k in raw:
        assert torch.allclose(raw_back[k], raw[k], rtol=1e-14, atol=0), k


def test_naive_key_renaming_is_silently_wrong_and_export_is_not():
    """Why export exists: renaming '…parametrizations.in_proj_weight.original' to '…in_proj_weight' loads the
    stored weights without the μP query multiplier — a different function, no error."""
    P = parameterise(demos.transformer, "muP", widths=(32, 64))
    net = P(WIDTH, seed=0).double()
    x = CASES["multihead"][1]
    naive = demos.transformer(WIDTH).double()
    naive.load_state_dict({plain_key(k): v for k, v in net.state_dict().items()})
    assert _rel(naive(x), net(x)) > 1e-3
    naive.load_state_dict(P.export_state_dict(net))
    assert _rel(naive(x), net(x)) <= 1e-10


def test_tied_export_keeps_one_tensor_and_folds_the_readout_multiplier_into_ln_f():
    P = parameterise(demos.gpt_tied, "muP", widths=(32, 64))
    net = P(WIDTH, seed=1).double()
    sd = P.export_state_dict(net)
    assert sd["lm_head.weight"] is sd["wte.weight"]
    assert torch.allclose(sd["ln_f.weight"], net.ln_f.weight / 3, rtol=1e-15)
    assert torch.allclose(sd["ln_f.bias"], net.ln_f.bias / 3, rtol=1e-15)


def _plain_sd(factory, width):
    return {k: v.clone() for k, v in factory(width).double().state_dict().items()}


def test_mismatched_checkpoints_raise():
    P = parameterise(demos.gpt_tied, "muP", widths=(32, 64))
    net = P(WIDTH).double()
    sd = _plain_sd(demos.gpt_tied, WIDTH)
    del sd["ln_f.bias"]
    with pytest.raises(ValueError, match=r"missing \['ln_f.bias'\]"):
        P.import_state_dict(net, sd)
    with pytest.raises(ValueError, match=r"shapes \['wte.weight: \(256, 64\) ≠ \(256, 96\)"):
        P.import_state_dict(net, _plain_sd(demos.gpt_tied, 64))
    with pytest.raises(ValueError, match="unexpected.*parametrizations"):
        P.import_state_dict(net, net.state_dict())            # the raw parameterised dict is not a plain one
    sd = _plain_sd(demos.gpt_tied, WIDTH)
    sd["lm_head.weight"] = sd["lm_head.weight"] + 1.0          # an untied checkpoint into a tied module
    with pytest.raises(ValueError, match=r"one tensor in factory\(width\).*different values"):
        P.import_state_dict(net, sd)
    with pytest.raises(ValueError, match="not built by a Parameterised"):
        P.export_state_dict(demos.gpt_tied(WIDTH))


class _ReadoutAfterTanh(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.wte = nn.Embedding(256, width)
        self.mix = nn.Linear(width, width)
        self.lm_head = nn.Linear(width, 256, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        return self.lm_head(torch.tanh(self.mix(self.wte(idx))))


def test_tied_readout_without_an_affine_layer_cannot_be_exported():
    P = parameterise(_ReadoutAfterTanh, "muP", widths=(32, 64))
    net = P(64)
    with pytest.raises(ValueError, match="multiplier 0.5 that the plain module cannot hold.*'lm_head'.*not the "
                                         "output of a module"):
        P.export_state_dict(net)
    sp = parameterise(_ReadoutAfterTanh, "SP", widths=(32, 64))      # no multiplier: exports as is
    net = sp(64)
    assert torch.equal(sp.export_state_dict(net)["lm_head.weight"], net.wte.weight)


def test_tied_readout_with_sgd_in_the_derived_gauge():
    """μP for SGD in the solver's gauge: the embedding itself has a forward multiplier (a_in = −½), the tied
    read-out r^−(a_out + b_out − b_in) = r^−½ on top; export folds their ratio into ln_f."""
    P = parameterise(demos.gpt_tied, "muP", widths=(32, 64), optimizer="sgd", gauge=None)
    assert P.readouts[0].exponent == 0.5
    net = P(WIDTH, seed=4).double()
    assert torch.allclose(net.lm_head.weight, net.wte.parametrizations.weight.original * 3 ** -0.5, rtol=1e-15)
    sd = P.export_state_dict(net)
    plain = demos.gpt_tied(WIDTH).double()
    plain.load_state_dict(sd)
    assert _rel(plain(TOKENS), net(TOKENS)) <= 1e-10
    back = P(WIDTH, seed=7).double()
    P.import_state_dict(back, sd)
    assert _rel(back(TOKENS), net(TOKENS)) <= 1e-10
