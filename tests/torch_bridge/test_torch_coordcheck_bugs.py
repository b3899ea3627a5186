"""The injected-bug suite of coord_check (issue 32 item 7): on hand-written μP GPTs (packed qkv + SDPA, and
nn.MultiheadAttention) each learning-rate or attention-scale bug of ``limits.torch.handwritten.BUGS`` is flagged
with the culprit named first, and the correct modules pass; per-tensor rows (item 6); optimizer groups that
cannot support a verdict are refused (issue 31 item 6).

Statistics: every check has a fixed seed. The correct modules fail with probability ≤ 0.05 each by construction
(family-wise α); measured 0/40 per module (benchmarks/coordcheck_calibration.py), so a spurious failure here has
probability below about 0.07 per module at 95 % confidence, and none occurs at these seeds. Bugs are flagged in
20/20 calibration checks each."""
import functools
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from limits.cli import main  # noqa: E402
from limits.torch import coord_check  # noqa: E402
from limits.torch import handwritten as hw  # noqa: E402

WIDTHS = (64, 128, 256, 512)
KW = dict(lr=1e-2, steps=2, seeds=3, expect="muP")


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def sdpa():
    torch.set_num_threads(1)
    return coord_check(hw.sdpa_gpt, WIDTHS, hw.gpt_data(), **KW)


def test_the_correct_sdpa_gpt_passes_and_its_attention_is_seen(sdpa):
    assert sdpa.passed, sdpa.summary()
    assert "blocks.0.attn:logits" in sdpa.tensors and "blocks.1.attn:logits" in sdpa.tensors
    assert sdpa.exponent("blocks.0.attn:logits", "scale", step=0)[3] == -0.5        # q·k/d, d ∝ N
    assert sdpa.settings["head_dim_scales"]["blocks.0.attn:logits"] is True


def test_every_tensor_has_its_own_update_and_effect(sdpa):
    for name in ("wte.weight", "blocks.0.ln1.weight", "blocks.0.fc.bias", "blocks.0.attn.qkv.weight", "out.weight"):
        i = sdpa.tensors.index(name)
        assert sdpa.kinds[i] == "tensor" and sdpa.judged[i, 1, 1] == 1
        assert np.all(sdpa.samples[:, :, i, 1:, 2] > 0) and np.all(sdpa.samples[:, :, i, 1:, 1] > 0)
    s, lo, hi, pred = sdpa.exponent("blocks.0.attn.qkv.weight", "update")
    assert pred == -1.0 and lo <= -1.0 <= hi            # Adam: ‖ΔW‖ ∝ η/N for hidden weights under μP
    s, lo, hi, pred = sdpa.exponent("blocks.0.ln1.weight", "update")
    assert pred == 0.0 and lo <= 0.0 <= hi              # gains: η
    assert sdpa.tensors.index("blocks.0.attn.qkv.weight") < sdpa.tensors.index("blocks.0.attn.qkv")


@pytest.mark.parametrize("variant", ["mha", "heads", "explicit"])
def test_the_correct_mha_explicit_and_fixed_head_dim_gpts_pass(variant):
    f = {"mha": hw.mha_gpt, "heads": functools.partial(hw.gpt, heads="width"),
         "explicit": functools.partial(hw.gpt, attention="explicit")}[variant]
    r = coord_check(f, WIDTHS, hw.gpt_data(), **KW)
    assert r.passed, r.summary()
    site = "blocks.0.attn.mha:logits" if variant == "mha" else "blocks.0.attn:logits"
    assert r.settings["head_dim_scales"][site] is (variant != "heads")
    assert r.exponent(site, "scale", step=0)[3] == (0.0 if variant == "heads" else -0.5)


@pytest.mark.parametrize("bug", sorted(hw.BUGS))
def test_an_injected_bug_is_flagged_culprit_first(bug):
    culprit, _ = hw.BUGS[bug]
    r = coord_check(functools.partial(hw.gpt, bug=bug), WIDTHS, hw.gpt_data(), **KW)
    assert not r.passed
    first = r.failing_tensors()[0]
    assert first.startswith(culprit), (first, r.summary())
    assert r.summary().startswith(f"Not as predicted: {first}")


def test_sequential_rows_say_what_they_are():
    from limits.torch import demos, parameterise

    r = coord_check(parameterise(demos.mlp, "muP", widths=(64, 128)), WIDTHS, demos.mlp_data(), lr=1e-2, steps=1,
                    seeds=2)
    assert r.tensors[:3] == ("0.weight (Linear 8→N)", "0.bias (Linear 8→N)", "0 (Linear 8→N)")
    assert "4 (Linear N→2)" in r.tensors and "2 (Linear N→N)" in r.tensors
    assert r.exponent("4", "scale", step=0) == r.exponent("4 (Linear N→2)", "scale", step=0)


# ------------------------------------------------------------------ groups that cannot support a verdict
def _factory(kind):
    def f(width):
        m, groups = hw.sdpa_gpt(width)
        if kind == "foreign":
            groups = groups + [{"params": [torch.nn.Parameter(torch.zeros(3))], "lr_mult": 1.0}]
        elif kind == "frozen":
            for p in m.parameters():
                p.requires_grad_(False)
        elif kind == "zero_lr":
            groups[3] = dict(groups[3], lr_mult=0.0)
        elif kind == "negative_lr":
            groups[0] = {"params": groups[0]["params"], "lr": -1e-3}
        return m, groups
    return f


@pytest.mark.parametrize("kind,msg", [("foreign", "not a parameter of the module"),
                                      ("frozen", "no trainable tensor"),
                                      ("zero_lr", r"group 3 \(blocks.0.ln1.bias\) has learning rate 0"),
                                      ("negative_lr", "learning rate -0.001")])
def test_groups_without_a_verdict_are_refused(kind, msg):
    with pytest.raises(ValueError, match=msg):
        coord_check(_factory(kind), WIDTHS, hw.gpt_data(), **KW)


def test_cli_refuses_such_groups_with_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "mygroups.py").write_text(
        "from limits.torch import handwritten as hw\n"
        "def frozen(width):\n    m, g = hw.sdpa_gpt(width)\n    [p.requires_grad_(False) for p in m.parameters()]\n"
        "    return m, g\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mygroups", raising=False)
    code = main(["coord-check", "--factory", "mygroups:frozen", "--allow", "mygroups", "--as-is", "--expect", "muP",
                 "--widths", "8", "16", "32", "--seeds", "2", "--steps", "1"])
    err = capsys.readouterr().err
    assert code == 2 and len([ln for ln in err.splitlines() if "error" in ln]) == 1 and "no trainable tensor" in err
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        coord_check(hw.sdpa_gpt, WIDTHS, hw.gpt_data(), expect="muP", lr=0.0)
