"""Optimizer groups of a parameterised module: AdamW weight decay with lr·wd the same for every tensor (decay per
step and equilibrium width-independent), schedulers that keep the per-tensor ratios, the OneCycleLR pitfall."""
import pytest

torch = pytest.importorskip("torch")

from limits.torch import demos, parameterise  # noqa: E402
from limits.torch.optim import check_ratios, group_lrs  # noqa: E402

LR, WD = 0.1, 0.5

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def P():
    return parameterise(demos.mlp, "muP", widths=(32, 64), optimizer="adamw")


def _net(P, width):
    return P(width, seed=0).double()


@pytest.mark.parametrize("width", [32, 128, 512])
def test_decay_per_step_is_one_minus_lr_wd_for_every_tensor(P, width):
    net = _net(P, width)
    opt = P.optimizer(net, LR, weight_decay=WD)
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    for p in net.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in net.named_parameters():
        assert torch.allclose(p, before[n] * (1 - LR * WD), rtol=1e-13, atol=0), n
    hidden = next(g for g in opt.param_groups if g["name"] == "2.weight")
    assert hidden["lr"] * hidden["weight_decay"] == pytest.approx(LR * WD, rel=1e-13)
    assert hidden["lr_mult"] == pytest.approx(32 / width)


def _equilibrium(P, width, scaled, wd=5.0, steps=400):
    """The hidden weight after ``steps`` AdamW steps (lr·wd = 0.5: converged to 1e-15 at r ≤ 4 with either
    rule) with a constant rank-one gradient sign(δ) sign(x)ᵀ, and rms(W x) on that x: its effect at equilibrium."""
    net = _net(P, width)
    W = net[2].weight
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 2, (width,), generator=g).double() * 2 - 1
    d = torch.randint(0, 2, (width,), generator=g).double() * 2 - 1
    group = next(gr for gr in P.param_groups(net, LR, weight_decay=wd) if gr["name"] == "2.weight")
    if not scaled:
        group["weight_decay"] = wd                       # torch's default: the same wd in every group
    opt = torch.optim.AdamW([group], lr=LR, eps=1e-30)
    for _ in range(steps):
        W.grad = torch.outer(d, x)
        opt.step()
    return W.detach(), float((W.detach() @ x).pow(2).mean().sqrt()), group


def test_equilibrium_effect_of_a_hidden_weight_is_width_independent(P):
    (W1, e1, g1), (W4, e4, g4) = (_equilibrium(P, n, True) for n in (32, 128))
    for W, g in ((W1, g1), (W4, g4)):                   # p* = −sign(g)/wd_t = −sign(g)·m_t/wd entrywise
        assert torch.allclose(W.abs(), torch.full_like(W, 1 / g["weight_decay"]), rtol=1e-9)
    assert e4 / e1 == pytest.approx(1.0, rel=1e-9)      # rule: W* x the same at both widths
    _, d1, _ = _equilibrium(P, 32, False)
    _, d4, _ = _equilibrium(P, 128, False)
    assert d4 / d1 == pytest.approx(4.0, rel=1e-6)      # torch's default wd: W* x grows ∝ N


def _run(opt, sched, steps=12):
    ratios = []
    for _ in range(steps):
        opt.step()
        sched.step()
        ratios.append(check_ratios(opt))
    return ratios


@pytest.mark.parametrize("make", [
    lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda t: 1 / (1 + t)),
    lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10),
    lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=group_lrs(o, 3 * LR), total_steps=20),
], ids=["LambdaLR", "CosineAnnealingLR", "OneCycleLR-per-group"])
def test_schedulers_keep_the_ratios(P, make):
    net = _net(P, 128)
    opt = P.optimizer(net, LR, weight_decay=WD)
    base = _run(opt, make(opt))
    assert len(set(round(b, 12) for b in base)) > 2          # the schedule moves the base rate …
    hidden = next(g for g in opt.param_groups if g["name"] == "2.weight")
    assert hidden["lr"] == pytest.approx(base[-1] * 0.25)     # … and every tensor keeps its multiplier


def test_one_cycle_with_a_float_breaks_the_ratios_and_is_caught(P):
    net = _net(P, 128)
    opt = P.optimizer(net, LR)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3 * LR, total_steps=20)
    with pytest.raises(ValueError, match="ratios broken.*'2.weight'.*group_lrs"):
        _run(opt, sched, 1)


def test_weight_decay_arguments(P):
    net = _net(P, 64)
    groups = P.param_groups(net, LR, weight_decay=WD, no_decay=("0.bias", "2.bias"))
    wd = {g["name"]: g["weight_decay"] for g in groups}
    assert wd["0.bias"] == 0 and wd["2.weight"] == pytest.approx(WD * 2) and wd["0.weight"] == WD
    assert P.optimizer(net, LR).param_groups[2]["weight_decay"] == pytest.approx(0.01 * 2)   # torch's default, scaled
    with pytest.raises(ValueError, match="no parameter named"):
        P.param_groups(net, LR, weight_decay=WD, no_decay=("nope",))
    adam = parameterise(demos.mlp, "muP", widths=(32, 64), optimizer="adam")
    with pytest.raises(ValueError, match="L2 term.*optimizer='adamw'"):
        adam.optimizer(adam(64), LR, weight_decay=WD)
    assert "weight_decay" not in adam.param_groups(adam(64), LR)[0]
