"""parameterise: shape inference, roles, the derived table applied to init / forward / learning rates."""
import math

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import limits  # noqa: E402
from limits.torch import parameterise  # noqa: E402
from limits.torch.demos import gpt_nanogpt_init, mlp, transformer  # noqa: E402


def _rules(P):
    return {q.name: q for q in P.rules}


def test_mlp_roles_and_mup_adam_table():
    P = parameterise(mlp, "muP", widths=(32, 64), optimizer="adam")
    q = _rules(P)
    assert [q[n].role for n in ("0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias")] == \
        ["input", "vector", "hidden", "vector", "output", "constant"]
    p = limits.params.named("muP", convention="std", optimizer="adam", gauge="a0")
    for n, row in (("0.weight", "input"), ("2.weight", "hidden"), ("4.weight", "output")):
        assert (q[n].a, q[n].b, q[n].c) == tuple(float(p.exponent(row, s)) for s in "abc")
    # at 4× the base width: hidden lr / 4 (c = 1), read-out init / 2 (b − b_SP = 1/2), no multiplier (a0 gauge)
    ref, net = None, None
    with torch.random.fork_rng():
        torch.manual_seed(3)
        ref = mlp(128)
    with torch.random.fork_rng():
        torch.manual_seed(3)
        net = P(128)
    assert torch.equal(net[2].weight, ref[2].weight)
    assert torch.allclose(net[4].weight, ref[4].weight / 2, rtol=1e-6, atol=0)
    lrs = {g["name"]: g["lr"] for g in P.param_groups(net, 0.1)}
    assert lrs["2.weight"] == pytest.approx(0.025) and lrs["0.weight"] == pytest.approx(0.1)
    assert lrs["4.weight"] == pytest.approx(0.025)
    assert isinstance(P.optimizer(net, 0.1), torch.optim.Adam)


def test_sgd_table_and_derived_gauge_multipliers():
    P = parameterise(mlp, "muP", widths=(32, 64), optimizer="sgd", gauge=None)
    p = limits.params.named("muP", convention="std", optimizer="sgd")
    q = _rules(P)
    a_out = float(p.exponent("output", "a"))
    net = P(128)
    # the read-out weight is parametrised: W = r^{-a} w
    x = torch.randn(5, 8)
    h = net[3](net[2](net[1](net[0](x))))
    w_eff = net[4].weight
    w_raw = net[4].parametrizations.weight.original
    assert torch.allclose(w_eff, w_raw * 4.0 ** (-a_out))
    assert torch.allclose(net(x), h @ w_eff.T + net[4].bias)
    assert q["0.weight"].c == float(p.exponent("input", "c"))
    assert isinstance(P.optimizer(net, 0.1), torch.optim.SGD)


def test_equal_to_the_factory_at_the_base_width():
    P = parameterise(transformer, "muP", widths=(64, 128))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        a = transformer(64)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        b = P(64)
    x = torch.randint(0, 16, (3, 8))
    assert torch.allclose(a(x), b(x), atol=1e-6)


def test_transformer_roles_and_mup_attention():
    P = parameterise(transformer, "muP", widths=(64, 128))
    q = _rules(P)
    assert q["emb.weight"].role == "input"
    assert q["enc.layers.0.self_attn.in_proj_weight"].role == "hidden"
    assert q["enc.layers.0.self_attn.in_proj_weight"].query_exponent == -0.5
    assert q["enc.layers.0.norm1.weight"].role == "vector"
    assert q["out.weight"].role == "output"
    net = P(256)
    attn = net.enc.layers[0].self_attn
    W, W0 = attn.in_proj_weight, attn.parametrizations.in_proj_weight.original
    E = attn.embed_dim
    assert torch.allclose(W[:E], W0[:E] * 0.5) and torch.equal(W[E:], W0[E:])
    sp = parameterise(transformer, "SP", widths=(64, 128))
    assert _rules(sp)["enc.layers.0.self_attn.in_proj_weight"].query_exponent == 0.0


class _Raw(nn.Module):
    def __init__(self, width, op="matmul"):
        super().__init__()
        self.lin = nn.Linear(4, width)
        self.mystery = nn.Parameter(torch.randn(width, 3))
        self.op = op

    def forward(self, x):
        return self.lin(x) @ (self.mystery if self.op == "matmul" else self.mystery.exp())


def test_the_graph_decides_a_raw_tensors_role_and_a_role_overrides_it():
    """A raw (N, 3) tensor contracted with the width-sized activations is output-like (issue 43 item 3); one read
    through an op the graph cannot decide (exp) is refused by name, with the roles= / --role way out."""
    assert _rules(parameterise(_Raw, "muP", widths=(16, 32)))["mystery"].role == "output"
    with pytest.raises(ValueError, match="cannot classify tensor 'mystery'.*'exp'.*--role mystery=input"):
        parameterise(lambda n: _Raw(n, "exp"), "muP", widths=(16, 32))
    P = parameterise(lambda n: _Raw(n, "exp"), "muP", widths=(16, 32), roles={"mystery": "output"})
    assert _rules(P)["mystery"].role == "output"


def test_refuses_non_proportional_dims_and_ties_between_roles():
    with pytest.raises(ValueError, match="neither fixed nor proportional"):
        parameterise(lambda n: nn.Linear(4, int(math.isqrt(n * 100))), "muP", widths=(16, 64))

    class Tied(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.inp = nn.Linear(4, width)
            self.out = nn.Linear(width, 4)
            self.w = self.inp.weight                  # the read-in also used raw by the root: two roles

        def forward(self, x):
            return self.out(torch.tanh(self.inp(x))) + x @ self.w.T @ self.out.weight.T

    with pytest.raises(ValueError, match=r"tensor 'w' is shared with \['inp.weight'\].*different roles"):
        parameterise(Tied, "muP", widths=(16, 32))


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown name"):
        parameterise(mlp, "muQ", widths=(16, 32))
    with pytest.raises(ValueError, match="two distinct"):
        parameterise(mlp, "muP", widths=(16,))
    with pytest.raises(ValueError, match="optimizer"):
        parameterise(mlp, "muP", widths=(16, 32), optimizer="lion")


# ------------------------------------------------------------------ the factory's own init must be SP
def test_an_init_that_is_not_sp_is_refused_with_the_tensor_names():
    with pytest.raises(ValueError, match=r"init is not SP.*blocks\.0\.attn\.c_attn\.weight \(hidden\): std ∝ N\^\+0\.0"
                                         r".*SP N\^-0\.50.*check_init=False") as exc:
        parameterise(gpt_nanogpt_init, "muP", widths=(32, 64))
    msg = str(exc.value)
    assert "wte.weight" not in msg and "ln_" not in msg      # embeddings (0.02 at every width) are SP; gains not judged
    assert msg.count("(hidden)") == 8                        # c_attn, attn.c_proj, c_fc, c_proj in both blocks
    # SP leaves the factory as built (nothing assumed); check_init=False takes the init as SP anyway
    parameterise(gpt_nanogpt_init, "SP", widths=(32, 64))
    parameterise(gpt_nanogpt_init, "muP", widths=(32, 64), check_init=False)


def test_init_exponents_measured_per_tensor():
    """The measured exponents of torch's default inits are SP's within their SE; a rescaled copy is off by ½.
    (Deterministic: classification builds with seed 0; a false refusal needs a 4-SE deviation, p < 1e-4.)"""
    from limits.torch.apply_params import classify
    from limits.torch.demos import transformer
    from limits.torch.initscale import SP_EXPONENT, init_deviations

    rules, _ = classify(transformer, (64, 128))
    with torch.random.fork_rng():
        torch.manual_seed(1)
        a, b = transformer(64), transformer(128)
    assert init_deviations(a, b, 64, 128, rules) == ()
    with torch.no_grad():
        for q in rules:
            if q.role in SP_EXPONENT:
                b.get_parameter(q.name).mul_(2 ** -0.5)          # std × (N/64)^-½ at N = 128
    dev = {d.name: d for d in init_deviations(a, b, 64, 128, rules)}
    judged = [q for q in rules if q.role in SP_EXPONENT]
    assert set(dev) == {q.name for q in judged}
    for q in judged:
        assert abs(dev[q.name].measured - (SP_EXPONENT[q.role] - 0.5)) < 4 * dev[q.name].se + 1e-9
