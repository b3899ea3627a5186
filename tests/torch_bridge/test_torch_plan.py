"""One source of truth (issue 43): the check's predictions come from the plan parameterise applied — width offsets
propagated through the traced graph (limits.torch.offsets, limits.torch.plan) — so limits' own μP passes limits'
own check with multipliers anywhere, ties, root parameters and sizes ∝ width up to rounding; smaller read-out
inits are upper bounds; transfer verdicts beyond a design's power are inconclusive. The ≥ 20-seed calibrations are
benchmarks whose committed results are read here (benchmarks/torch_suite_calibration.py, torch_property.py).

Statistics: every check below has a fixed seed (deterministic); a correct module fails one with probability ≤ 0.05
by construction, measured in the committed calibrations."""
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from limits.cli import main  # noqa: E402
from limits.torch import coord_check, family, parameterise, suite  # noqa: E402
from limits.torch.graph import trace  # noqa: E402
from limits.torch.offsets import build, role_of_use  # noqa: E402
from limits.torch.apply_params import classify  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WIDTHS = (32, 64, 128, 256)
BASE = 32


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test of this file on one torch thread (the shared fixture of tests/torch_bridge/conftest.py)."""


# ------------------------------------------------------------------ hand-written μP MLPs (the read-outs)
class MuMLP(nn.Module):
    """μP by hand (Adam, base width 32): the read-out written ``self.output(h) * (1/r)`` (``where="after"``),
    ``self.output(h * (1/r))`` ("before") or with no multiplier ("none"); ``init``: the read-out's init std —
    "fixed" 1/√32 (with the multiplier: μP), "zero", "small" (∝ N^−½: with 1/r, ∝ N^−3/2 like mup's) ."""

    def __init__(self, n, where="after", init="fixed"):
        super().__init__()
        self.r, self.where = n / BASE, where
        self.inp, self.hid, self.output = nn.Linear(8, n), nn.Linear(n, n), nn.Linear(n, 2, bias=False)
        with torch.no_grad():
            std = {"fixed": BASE ** -0.5, "zero": 0.0, "small": n ** -0.5}[init]
            self.output.weight.normal_(0.0, std) if std else self.output.weight.zero_()

    def forward(self, x):
        h = torch.tanh(self.hid(torch.tanh(self.inp(x))))
        if self.where == "after":
            return self.output(h) * (1 / self.r)
        return self.output(h * (1 / self.r)) if self.where == "before" else self.output(h)


def mu_mlp(where="after", init="fixed"):
    def f(n):
        m = MuMLP(n, where, init)
        return m, [{"params": [m.inp.weight, m.inp.bias, m.hid.bias, m.output.weight], "lr_mult": 1.0},
                   {"params": [m.hid.weight], "lr_mult": BASE / n}]
    return f


def vectors(batch=8):
    g = torch.Generator().manual_seed(0)
    return torch.randn(batch, 8, generator=g), torch.randn(batch, 2, generator=g)


def check(f, **kw):
    return coord_check(f, WIDTHS, vectors(), lr=1e-2, steps=3, seeds=4, expect="muP", **kw)


@pytest.mark.parametrize("where", ["after", "before"])
def test_a_readout_multiplier_before_or_after_the_linear_enters_the_prediction(where):
    """The same μP function with 1/r after or before the read-out Linear: both pass, the Linear's own row is
    predicted N^{+1} above μP's output row when the multiplier comes after it (it is compensated downstream)."""
    r = check(mu_mlp(where))
    assert r.passed, r.summary()
    s, lo, hi, pred = r.exponent("output", "change", step=1)
    assert pred == (1.0 if where == "after" else 0.0)
    assert any("×N^-1" in line for line in r.settings["plan"])            # the constant, found in the graph


def test_the_same_readout_without_its_multiplier_is_flagged_with_the_culprit_first():
    r = check(mu_mlp("none"))
    assert not r.passed and r.failing_tensors()[0] == "output.weight", r.summary()


@pytest.mark.parametrize("init", ["zero", "small"])
def test_a_readout_initialised_below_mup_is_accepted_as_an_upper_bound_and_said(init):
    r = check(mu_mlp("after", init))
    assert r.passed, r.summary()
    found = [s for s in r.settings["plan"] if s.startswith("read-out output.weight")]
    assert found and ("zero" in found[0] if init == "zero" else "N^-0.5 times" in found[0])
    if init == "small":
        i = r.tensors.index("output.weight")
        assert r.predicted_low[i, 0, 0] == -math.inf and r._pred(i, 0, 0).startswith("≤")


# ------------------------------------------------------------------ the graph's offsets
def test_offsets_are_exact_through_homogeneous_ops_and_restart_at_nonlinearities():
    """RMSNorm written out (x·rsqrt(mean x²)·g) restarts at its gain's gauge whatever enters it; a constant
    (N/32)^−1 adds −1; a Linear adds its weight's gauge; tanh forces its input to 0 (a constraint)."""
    class M(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.a, self.b, self.g = nn.Linear(4, n), nn.Linear(n, n), nn.Parameter(torch.ones(n))
            self.r = n / BASE

        def forward(self, x):
            h = self.a(x) * (1 / self.r)
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.g
            return torch.tanh(self.b(h) * self.r)

    x = torch.randn(3, 4)
    ma, mb = M(32), M(64)
    rules, _ = classify(M, (32, 64), inputs=(x,))
    g = build(ma, mb, 32, 64, (x,), role_of_use(rules), True)
    off, _ = g.evaluate(lambda v: 0.0)
    names = g.names
    mul = [i for i, n in enumerate(names) if n == "mul"]
    assert off[mul[0]] == -1.0                                 # a(x) · (N/32)^-1
    assert off[g.module_node("b")] == 0.0                     # after the norm: the gain's gauge
    tanh_in = [c for c in g.constraints if c.kind == "forced" and "tanh" in c.where][0]
    assert off[tanh_in.node] == 1.0                           # b(h) · N/32 enters tanh at +1: not homogeneous
    assert {e for _, _, e, _ in g.constants} == {-1.0, 1.0}


# ------------------------------------------------------------------ parameterise folds multipliers in
def test_parameterise_folds_a_forward_multiplier_into_the_weight_beside_it():
    """x·(N/32)^e after the read-out: μP's effective read-out is unchanged — the read-out's init and rate carry
    r^{−e} — so the module computes what the same factory without the multiplier computes under μP."""
    def factory(e):
        d = family.Design(0, False, False, "none", ("mlp",), "layer", False, False, True, 1.0,
                          "readout_out" if e else "none", e)
        return family.Factory(d), family.data(d)

    (f1, (X, _)), (f0, _) = factory(-1.0), factory(0.0)
    P1 = parameterise(f1, "muP", widths=(32, 64), example_inputs=(X,))
    P0 = parameterise(f0, "muP", widths=(32, 64), example_inputs=(X,))
    assert {q.name: q.gauge for q in P1.rules if q.gauge} == {"out.weight": 1.0, "out.bias": 1.0}
    m1, m0 = P1(128, seed=0), P0(128, seed=0)
    torch.testing.assert_close(m1(X), m0(X), rtol=1e-5, atol=1e-6)
    lr1 = {g["name"]: g["lr"] for g in P1.param_groups(m1, 1.0)}
    lr0 = {g["name"]: g["lr"] for g in P0.param_groups(m0, 1.0)}
    assert lr1["out.weight"] == pytest.approx(4 * lr0["out.weight"]) and lr1["inp.weight"] == lr0["inp.weight"]


def test_a_multiplier_no_weight_can_absorb_is_refused_by_name():
    d = family.Design(1, False, False, "none", ("mlp",), "layer", False, False, True, 1.0, "unabsorbable", 1.0)
    X, _ = family.data(d)
    with pytest.raises(ValueError, match="no weight between the multiplier and it can absorb it"):
        parameterise(family.Factory(d), "muP", widths=(32, 64), example_inputs=(X,))


def test_limits_own_mup_passes_limits_own_check_on_a_gqa_block_with_its_own_q_proj():
    """Issue 43: the query multiplier r^−½ parameterise puts on q_proj is the plan; the check predicts q_proj's row
    (and its tensors' effects) N^−½ below a hidden row's, and the logits as μP's."""
    X, Y = suite.token_data()
    P = parameterise(suite.qwen_gqa, "muP", widths=WIDTHS, example_inputs=(X,))
    r = coord_check(P, WIDTHS, (X, Y), lr=1e-2, steps=3, seeds=4, seed=0)
    assert r.passed, r.summary()
    s, lo, hi, pred = r.exponent("model.layers.0.self_attn.q_proj", "scale", step=0)
    assert pred == -0.5 and lo <= -0.5 <= hi
    assert r.exponent("model.layers.0.self_attn:logits", "scale", step=0)[3] == -0.5
    k_bias = "model.layers.0.self_attn.k_proj.bias"            # softmax is invariant to it: no gradient, no verdict
    assert r.judged[r.tensors.index(k_bias), 1, 1] == 1 and np.isnan(r.predicted[r.tensors.index(k_bias), 1, 1])


# ------------------------------------------------------------------ ties, roles, rounding
TIED = """import torch
from torch import nn
class GPT(nn.Module):
    def __init__(s, n):
        super().__init__()
        s.tok, s.pos = nn.Embedding(16, n), nn.Embedding(8, n)
        s.fc1, s.fc2, s.ln, s.lnf = nn.Linear(n, 2 * n), nn.Linear(2 * n, n), nn.LayerNorm(n), nn.LayerNorm(n)
        s.out = nn.Linear(n, 16, bias=False)
        s.out.weight = s.tok.weight
    def forward(s, idx):
        x = s.tok(idx) + s.pos(torch.arange(idx.shape[1]))
        x = x + s.fc2(torch.nn.functional.gelu(s.fc1(s.ln(x))))
        return s.out(s.lnf(x))
def gpt(n):
    return GPT(n)
"""


def test_a_gpt2_tie_after_a_final_layernorm_is_parameterised_checked_and_exported(tmp_path, monkeypatch, capsys):
    (tmp_path / "mytied.py").write_text(TIED)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mytied", raising=False)
    code = main(["coord-check", "--factory", "mytied:gpt", "--allow", "mytied", "--param", "muP", "--widths", "32",
                 "64", "128", "256", "--seeds", "3", "--steps", "2", "--lr", "0.01"])
    out = capsys.readouterr().out
    assert code == 0, out
    import mytied

    X = torch.randint(0, 16, (4, 8))
    P = parameterise(mytied.gpt, "muP", widths=(32, 64), example_inputs=(X,))
    m = P(64, seed=0)
    m2 = P(64, seed=1)
    P.import_state_dict(m2, P.export_state_dict(m))
    torch.testing.assert_close(m(X), m2(X))


def test_tokens_on_the_root_get_roles_from_the_graph_and_the_cli_takes_role(capsys):
    """ViT's cls_token and pos_embed (root parameters) are input-like by their use in the forward; --role gives
    a role by name (checked before torch is imported: a bad one exits 2)."""
    X, _ = suite.image_data()
    rules, _ = classify(suite.vit, (32, 64), inputs=(X,))
    roles = {q.name: q.role for q in rules}
    assert roles["cls_token"] == roles["pos_embed"] == "input" and roles["patch_embed.proj.weight"] == "input"
    assert main(["coord-check", "--factory", "limits.torch.suite:vit", "--param", "muP", "--role", "cls_token"]) == 2
    assert "expected NAME=ROLE" in capsys.readouterr().err
    assert main(["transfer", "--factory", "limits.torch.suite:vit", "--param", "muP", "--lrs", "1e-3", "1e-2", "1e-1",
                 "--role", "cls_token=inputs"]) == 2
    assert "--role 'cls_token=inputs'" in capsys.readouterr().err


def test_sizes_proportional_to_width_up_to_rounding_are_decided_once():
    """Llama's SwiGLU hidden 16·⌈(8N/3)/16⌉ (96 at 32, 176 at 64, 688 at 256): accepted from widths (32, 64) —
    decided over a probe to 4× the largest — and built at 256 and 512 without a refusal."""
    X, _ = suite.token_data()
    P = parameterise(suite.llama, "muP", widths=(32, 64), example_inputs=(X,))
    w1 = {q.name: q for q in P.rules}["layers.0.feed_forward.w1.weight"]
    assert w1.scaled == (0, 1) and w1.role == "hidden" and 2.6 < w1.size_ratio[0] < 2.9 and w1.size_ratio[1] == 1
    assert P(256).layers[0].feed_forward.w1.weight.shape[0] == 688
    assert P(512).layers[0].feed_forward.w1.weight.shape[0] == 1376


# ------------------------------------------------------------------ transfer verdicts within the design's power
def test_a_drift_verdict_the_design_cannot_support_is_inconclusive():
    from limits.torch.transfer_fit import Calibration, within_power

    cal = Calibration(np.array([0.0, -0.5]), np.array([[0.5, 0.14, 0.36], [0.1, 0.8, 0.1]]),
                      np.array([[0.03, 0.02, 0.03], [0.02, 0.03, 0.02]]), 200)
    v, why, need = within_power("drifts", "…", cal, 0.25, 0.05, resolve=lambda: (16, 0.03))
    assert v == "inconclusive" and why.startswith("add seeds/steps/rates") and "14 %" in why and need == 16
    assert "16 seeds" in why
    assert within_power("transfers", "ok", cal, 0.25, 0.05)[0] == "inconclusive"    # 10 % > α at a drift of −0.5
    good = Calibration(cal.drifts, np.array([[0.9, 0.02, 0.08], [0.01, 0.95, 0.04]]), cal.se, 200)
    assert within_power("drifts", "ok", good, 0.25, 0.05) == ("drifts", "ok", None)


def test_resolving_seeds_simulates_a_larger_design():
    """A flat optimum measured with 3 noisy seeds: the simulated 12-seed design calls it 'drifts' less often."""
    from limits.torch.transfer_fit import calibrate, resolving_seeds

    rng = np.random.default_rng(0)
    lx = np.arange(-8.0, -2.0)
    sizes = np.array([64.0, 128.0, 256.0])
    curve = 1.0 + 0.05 * (lx[None, :, None] + 5.0) ** 2
    y = curve + 0.06 * rng.standard_normal((3, lx.size, 3))
    small = calibrate(y, sizes, lx, 0.25, np.random.default_rng(1), drifts=(0.0,), n_sim=60, n_boot=100)
    need, rate = resolving_seeds(y, sizes, lx, 0.25, np.random.default_rng(2), 0.0, "drifts", 0.05, 3, n_sim=60,
                                 n_boot=100)
    assert rate <= small.rate(0.0, "drifts")[0] + 0.05
    assert need is None or need in (6, 12, 24)


# ------------------------------------------------------------------ the committed calibrations
def _data(name):
    path = ROOT / "benchmarks" / "results" / "calibration" / name
    if not path.exists():
        pytest.skip(f"{path.name} not generated yet")
    return json.loads(path.read_text())


def test_the_suite_calibration_every_accepted_module_passes_at_the_nominal_rate_and_bugs_are_named():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch_suite_calibration as cal

    data = _data("torch_suite.json")
    s = cal.summary(data)
    assert set(s) == set(suite.CASES)
    for name, v in s.items():
        assert v["accepted"], (name, v["refused"])
        assert v["checks"] >= 20 and v["p_at_alpha"] > 0.01, (name, v["false_alarms"], v["checks"])
        assert len(v["bugs"]) == 3
        for bug, (flagged, first, n, _) in v["bugs"].items():
            assert n >= 5 and first >= n - 1, (name, bug, flagged, first, n)
    doc = (ROOT / "docs" / "torch_calibration.rst").read_text()
    assert "\n".join(cal.table(data)) in doc, "docs/torch_calibration.rst is stale: python benchmarks/" \
                                             "torch_suite_calibration.py --write"
    case = suite.CASES["resmlp"]                          # one committed check recomputed
    P, refused, _ = cal.parameterised(case)
    again = cal.one(P, case, data["modules"]["resmlp"]["correct"][0]["seed"])
    assert again["passed"] == data["modules"]["resmlp"]["correct"][0]["passed"]


def test_the_property_holds_over_the_generated_family_at_the_nominal_rate():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch_property as prop

    data = _data("torch_property.json")
    s = prop.summary(data)
    assert s["accepted"] >= 100 and s["p_at_alpha"] > 0.01, prop.text(data)
    assert s["unabsorbable_accepted"] == 0 and s["gauged"] >= 30
    assert prop.text(data) in (ROOT / "docs" / "torch_calibration.rst").read_text(), \
        "docs/torch_calibration.rst is stale: python benchmarks/torch_property.py --write"
    rec = next(r for r in data["designs"] if r["accepted"] and r["cpu"] < 2.0)
    again = prop.one(rec["seed"])                          # one committed design recomputed
    assert (again["accepted"], again["passed"]) == (rec["accepted"], rec["passed"])
