"""A user's own nn.Module declared equivalent to a Model: the declaration is verified (shapes, forward and Jacobian
at copied weights, init law) with reasons naming the tensor, and limits.check(k, network=…) then checks the
module's empirical read-out NNGP and NTK against the kernel theory."""
import functools
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import limits  # noqa: E402
from limits.torch.equivalence import NotEquivalent, equivalent  # noqa: E402
from limits.torch.kernels import empirical_ntk, readout_nngp, user_kernels  # noqa: E402

MODEL = limits.mlp(3, 2, activation="erf", sigma_b2=0.1)          # NTK parameterisation, biases
WIDTHS = (16, 32, 64)


class UserMLP(nn.Module):
    """An erf MLP written by hand: nn.Linear tensors, N(0, 1) init, NTK multipliers 1/√fan_in and √σ_b² in forward.
    ``std``/``which``: init std of tensor number ``which`` (0 in, 1–2 hidden, 3 out); ``out_mult``: apply the
    read-out's 1/√N; ``uniform``: U(−√3, √3) init (variance 1, not Gaussian)."""

    def __init__(self, width, d_in=3, depth=2, sigma_b2=0.1, out_mult=True, std=1.0, which=None, uniform=False):
        super().__init__()
        self.sb, self.out_mult = math.sqrt(sigma_b2), out_mult
        self.inp = nn.Linear(d_in, width)
        self.hidden = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.out = nn.Linear(width, 1)
        for i, layer in enumerate([self.inp, *self.hidden, self.out]):
            if uniform:
                nn.init.uniform_(layer.weight, -math.sqrt(3), math.sqrt(3))
            else:
                nn.init.normal_(layer.weight, std=std if i == which else 1.0)
            nn.init.normal_(layer.bias)

    def _lin(self, layer, x, mult=True):
        return x @ layer.weight.T / (math.sqrt(layer.in_features) if mult else 1.0) + self.sb * layer.bias

    def forward(self, x):
        h = self._lin(self.inp, x)
        for layer in self.hidden:
            h = self._lin(layer, torch.erf(h))
        return self._lin(self.out, torch.erf(h), mult=self.out_mult)


def _X(P=4, seed=0):
    return np.random.default_rng(seed).standard_normal((P, 3))


@pytest.fixture(scope="module")
def declared():
    return equivalent(UserMLP, MODEL, widths=WIDTHS, max_draws=256)


def test_a_correct_user_mlp_is_declared_equivalent(declared):
    eq = declared
    assert [m for _, m in eq.pairs] == ["W_in", "b_in", "W_1_1", "b_1_1", "W_2_1", "b_2_1", "W_out", "b_out"]
    assert eq.readout == ("out.weight", "out.bias")
    assert max(eq.forward_error.values()) <= 1e-12 and max(eq.jacobian_error.values()) <= 1e-12
    assert all(abs(z) < eq.z_crit for s in eq.init for z in s.z)
    assert "out.bias" in eq.weak and "hidden.0.weight" not in eq.weak       # 1 entry per draw: weakly tested
    assert "W_1_1" in eq.to_markdown()


def test_user_observables_equal_the_model_networks_at_copied_weights(declared):
    X = _X()
    t = MODEL.to_torch(32, seed=5)
    user = declared.build(32, 0)
    with torch.no_grad():
        for (u, m) in declared.pairs:
            user.get_parameter(u).copy_(t.get_parameter(m))
    K, Th = user_kernels(declared, user, 32, X)
    np.testing.assert_allclose(K, readout_nngp(t, MODEL, X)[0], rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(Th, empirical_ntk(t, X), rtol=1e-10, atol=1e-13)


def test_check_of_a_correct_user_mlp_passes(declared):
    k = limits.kernels.kernel(MODEL, _X())
    c = limits.check(k, widths=WIDTHS, inits=64, seed=1, network=declared)
    assert c.details["backend"] == "torch" and "UserMLP" in c.details["network"]
    assert c.passed, c.to_markdown()
    assert "declared equivalent" in c.to_markdown()


def test_check_of_an_nngp_result_with_the_user_module(declared):
    r = limits.kernels.nngp(_X(), model=MODEL)
    c = limits.check(r, widths=WIDTHS, inits=48, seed=2, network=declared)
    assert c.details["backend"] == "torch" and c.what == "nngp + ntk"
    assert c.passed, c.to_markdown()


def test_check_with_the_user_module_detects_a_wrong_prediction(declared):
    k = limits.kernels.kernel(MODEL.with_(sigma_w2=1.3), _X())             # another model's theory …
    c = limits.check(k, widths=WIDTHS, inits=64, seed=1, model=MODEL, network=declared)
    assert not c.passed                                                      # … rejected by the user's modules


def test_missing_forward_multiplier_is_refused_naming_the_tensor():
    with pytest.raises(NotEquivalent, match=r"tensor 'out.weight' \(model W_out\).*N\^-0.50"):
        equivalent(functools.partial(UserMLP, out_mult=False), MODEL, widths=WIDTHS, max_draws=64)


def test_missing_multipliers_in_every_hidden_layer_are_named_together():
    class NoHiddenMultiplier(UserMLP):
        def forward(self, x):
            h = self._lin(self.inp, x)
            for layer in self.hidden:
                h = self._lin(layer, torch.erf(h), mult=False)
            return self._lin(self.out, torch.erf(h))

    with pytest.raises(NotEquivalent, match=r"rescaled together: 'hidden.0.weight' \(model W_1_1\) × 0.25, 0.1768, "
                                            r"0.125 at widths 16, 32, 64 \(≈ N\^-0.50\); 'hidden.1.weight' \(model "
                                            r"W_2_1\) × 0.25, 0.1768, 0.125 at widths 16, 32, 64 \(≈ N\^-0.50\) —"):
        equivalent(NoHiddenMultiplier, MODEL, widths=WIDTHS, max_draws=64)


@pytest.mark.parametrize("which,name", [(1, "hidden.0.weight"), (3, "out.weight")])
def test_init_scale_five_percent_off_is_refused_naming_the_tensor(which, name):
    bad = functools.partial(UserMLP, std=1.05, which=which)
    with pytest.raises(NotEquivalent, match=rf"tensor '{name}'.*variance of w/std.*1\.0[45]\d*× the model's"):
        equivalent(bad, MODEL, widths=WIDTHS, max_draws=400)


def test_check_refuses_before_computing(monkeypatch):
    import limits.torch.kernels as tk

    monkeypatch.setattr(tk, "user_samples", lambda *a, **k: pytest.fail("sampled a refused module"))
    k = limits.kernels.kernel(MODEL, _X())
    with pytest.raises(NotEquivalent, match="out.weight"):
        limits.check(k, widths=WIDTHS, inits=8, network=functools.partial(UserMLP, out_mult=False))


def test_a_uniform_init_of_the_right_variance_is_not_the_models_gaussian():
    with pytest.raises(NotEquivalent, match=r"'hidden.0.weight'.*fourth moment"):
        equivalent(functools.partial(UserMLP, uniform=True), MODEL, widths=WIDTHS, max_draws=64)


def test_shapes_and_parameter_count_are_checked():
    class Transposed(UserMLP):
        def __init__(self, width):
            super().__init__(width)
            self.out.weight = nn.Parameter(torch.randn(width, 1))

    with pytest.raises(NotEquivalent, match=r"tensor 'out.weight' has shape \(16, 1\).*W_out.*\(1, 16\) \(transposed\?\)"):
        equivalent(Transposed, MODEL, widths=WIDTHS)
    with pytest.raises(NotEquivalent, match="parameter tensors"):
        equivalent(UserMLP, limits.mlp(3, 2, activation="erf"), widths=WIDTHS)      # the model has no biases


def test_mapping_pairs_by_name():
    mapping = {"out.bias": "b_out", "out.weight": "W_out", "inp.weight": "W_in", "inp.bias": "b_in",
               "hidden.0.weight": "W_1_1", "hidden.0.bias": "b_1_1", "hidden.1.weight": "W_2_1",
               "hidden.1.bias": "b_2_1"}
    eq = equivalent(UserMLP, MODEL, widths=(16, 32), mapping=mapping, max_draws=16)
    assert dict(eq.pairs) == mapping
    swapped = {**mapping, "hidden.0.weight": "W_2_1", "hidden.1.weight": "W_1_1"}
    with pytest.raises(NotEquivalent, match="no single tensor's multiplier explains it"):   # same shapes and law,
        equivalent(UserMLP, MODEL, widths=(16, 32), mapping=swapped, max_draws=16)          # not the same function
    with pytest.raises(NotEquivalent, match="no model tensor"):
        equivalent(UserMLP, MODEL, widths=(16, 32), mapping={**mapping, "out.bias": "b_zz"})


def test_network_argument_is_validated(declared):
    k = limits.kernels.kernel(MODEL, _X())
    with pytest.raises(ValueError, match="backend"):
        limits.check(k, widths=WIDTHS, inits=4, network=declared, backend="numpy")
    with pytest.raises(ValueError, match="layers=True"):
        limits.check(k, widths=WIDTHS, inits=4, network=declared, layers=True)


@pytest.mark.exhaustive
def test_init_law_test_has_its_size_on_a_correct_module():
    """30 independent verifications of a correct module: the family-wise α = 0.01 test refuses at most 2
    (binomial(30, 0.01): P(≥ 3) ≈ 0.3 %); measured 0 of 30, median max |z| 2.27 against z_crit 3.53."""
    refused = 0
    for seed in range(30):
        try:
            equivalent(UserMLP, MODEL, widths=(16, 32), max_draws=256, seed=seed)
        except NotEquivalent:
            refused += 1
    assert refused <= 2


class UserResNet(nn.Module):
    """A residual tanh network by hand: h ← h + ρ (W φ(h)/√N + √σ_b² b); ``branch=False`` forgets ρ."""

    def __init__(self, width, rho=0.5, sigma_b2=0.2, branch=True):
        super().__init__()
        self.rho, self.sb = (rho if branch else 1.0), math.sqrt(sigma_b2)
        self.inp = nn.Linear(3, width)
        self.blocks = nn.ModuleList([nn.Linear(width, width) for _ in range(2)])
        self.out = nn.Linear(width, 1)
        for layer in [self.inp, *self.blocks, self.out]:
            nn.init.normal_(layer.weight)
            nn.init.normal_(layer.bias)

    def _lin(self, layer, x):
        return x @ layer.weight.T / math.sqrt(layer.in_features) + self.sb * layer.bias

    def forward(self, x):
        h = self._lin(self.inp, x)
        for layer in self.blocks:
            h = h + self.rho * self._lin(layer, torch.tanh(h))
        return self._lin(self.out, torch.tanh(h))


def test_a_user_resnet_and_a_missing_branch_multiplier():
    model = limits.resnet(3, 2, activation="tanh", rho=0.5, sigma_b2=0.2)
    eq = equivalent(UserResNet, model, widths=(16, 32), max_draws=64)
    assert max(eq.forward_error.values()) <= 1e-12
    with pytest.raises(NotEquivalent, match=r"rescaled together: 'blocks.0.weight' \(model W_1_1\) × 0.5, 0.5 at "
                                            r"widths 16, 32 \(≈ N\^\+0.00\); 'blocks.0.bias' \(model b_1_1\) × 0.5, 0.5.*"
                                            r"'blocks.1.bias' \(model b_2_1\) × 0.5, 0.5"):
        equivalent(functools.partial(UserResNet, branch=False), model, widths=(16, 32), max_draws=64)


class _Wrapped(UserMLP):
    """UserMLP with one unsupported feature: ``kind`` ∈ nan, frozen, dropout, fdropout, tuple."""

    def __init__(self, width, kind):
        super().__init__(width)
        self.kind = kind
        if kind == "nan":
            with torch.no_grad():
                self.hidden[0].weight[0, 0] = float("nan")
        if kind == "frozen":
            self.out.bias.requires_grad_(False)
        self.drop = nn.Dropout(0.1 if kind == "dropout" else 0.0)

    def forward(self, x):
        y = super().forward(self.drop(x))
        if self.kind == "fdropout":
            y = torch.nn.functional.dropout(y, 0.5, training=True)
        return (y, x) if self.kind == "tuple" else y


@pytest.mark.parametrize("kind,msg", [
    ("nan", r"tensor 'hidden.0.weight' has 1 NaN/inf entries at init"),
    ("frozen", r"tensor 'out.bias' is frozen \(requires_grad=False\)"),
    ("dropout", r"module 'drop' applies dropout \(p = 0.1\) in train mode"),
    ("fdropout", r"forward at width 16 is not deterministic"),
    ("tuple", r"returns a tuple, not a tensor")])
def test_what_cannot_support_a_verdict_is_refused_with_the_reason(kind, msg):
    with pytest.raises(NotEquivalent, match=msg):
        equivalent(functools.partial(_Wrapped, kind=kind), MODEL, widths=WIDTHS, max_draws=16)
    if kind == "dropout":                   # the same module in eval mode is fine
        eq = equivalent(lambda w: _Wrapped(w, kind).eval(), MODEL, widths=WIDTHS, max_draws=16)
        assert eq.forward_error[16] <= 1e-12


def test_the_models_own_module_is_equivalent_and_a_fixed_draw_is_refused_with_the_reason():
    """``Model.to_torch(N)`` draws from torch's global RNG (as torch's modules do), so it is a correct module of
    its model (a false refusal has probability ≤ α = 0.01; deterministic here); with a fixed seed inside the
    factory every build is the same draw, which has no init law to compare: refused saying so."""
    eq = equivalent(lambda w: MODEL.to_torch(w), MODEL, widths=WIDTHS, max_draws=64)
    assert max(eq.forward_error.values()) <= 1e-12
    with pytest.raises(NotEquivalent, match=r"same weights under torch.manual_seed\(0\) and \(1\).*global RNG"):
        equivalent(lambda w: MODEL.to_torch(w, seed=5), MODEL, widths=WIDTHS, max_draws=64)
