"""Issue 43, ViT: a tensor its owner reads between other layers (a class token, a position embedding on the root)
has its effect read where it enters the stream, not at the network's output — there the correlated Θ(1) part
of its effect hides under an uncorrelated N^−½ part at widths ≤ 256 and limits' own μP failed limits' own check
(18 of 20 checks); a zero-initialised tensor's scale at init is not measurable, neither passed nor failed.

Statistics: each check has a fixed seed (deterministic); the class token's effect after Adam's first step is
exact (±η per coordinate, one row of 17), so its row cannot pass by chance."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from limits.torch import coord_check, parameterise, suite  # noqa: E402
from limits.torch.recording import first_use  # noqa: E402

WIDTHS = (32, 64, 128)
LR = 1e-2


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test of this file on one torch thread (the shared fixture of tests/torch_bridge/conftest.py)."""


class _Tokens(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls = nn.Parameter(torch.zeros(1, 1, 4))
        self.gamma = nn.Parameter(torch.full((4,), 2.0))
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        x = torch.cat((self.cls.expand(x.shape[0], -1, -1), x), dim=1)
        return self.lin(self.gamma * x)


def test_first_use_follows_shape_ops_to_the_op_that_reads_the_tensor():
    m, x = _Tokens(), torch.randn(2, 3, 4)
    with torch.no_grad():
        with first_use(m.cls) as seen:
            m(x)
        assert seen.out.shape == (2, 4, 4) and torch.equal(seen.out[:, 1:], x)     # cat, not expand
        with first_use(m.gamma) as seen:
            m(x)
        assert torch.equal(seen.out[:, 1:], 2.0 * x)                              # gamma * x


def _vit_check(P, seed=1000):
    X, Y = suite.image_data()
    return coord_check(P, WIDTHS, (X, Y), lr=LR, steps=1, seeds=2, seed=seed, progress=False)


def test_vit_mup_passes_its_own_check_and_the_class_token_row_is_exact_and_its_zero_init_not_measurable():
    X, _ = suite.image_data()
    P = parameterise(suite.vit, "muP", widths=WIDTHS, example_inputs=(X,))
    r = _vit_check(P)
    assert r.passed, r.summary()
    i = r._index("cls_token")
    effect = r.samples[:, :, i, 1, 1]                  # Adam's first step: ±η per coordinate, one row of 17 tokens
    np.testing.assert_allclose(effect, LR / math.sqrt(17), rtol=1e-4)
    assert r.settings["indirect"] == []                # read where it enters the stream: judged as the culprit
    assert [n for n, _ in r.not_measurable()] == ["cls_token"]
    assert r.consistent[i, 0, 0] == -1 and r.judged[i, 0, 0] == 1      # judged, but nothing to fit: no verdict
    assert "Not measurable (not judged): the scale at init of cls_token" in r.summary()
    assert "| cls_token | input | 0 (zero init) | not measurable |" in r.to_markdown()
    from limits.torch.coordcheck_plot import _row_styles

    assert _row_styles(r)[i][0] == "cls_token (zero init: scale not measurable)"
    bug = next(b for b in suite.CASES["vit"].bugs if b.name == "cls_hidden_lr")
    bad = _vit_check(suite.inject(P, bug))
    assert not bad.passed and bad.failing_tensors()[0] == "cls_token", bad.summary()


def test_the_committed_class_token_study_plateaus_at_the_output_and_is_exact_where_it_enters():
    """benchmarks/vit_class_token_effect.py: at the output Θ(1) only from N ≈ 1024 (the crossover the old row
    judged); where the token enters, η/√17 at every width. One committed value recomputed."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    path = root / "benchmarks" / "results" / "calibration" / "vit_class_token_effect.json"
    data = json.loads(path.read_text())
    out = {r["width"]: np.mean(r["output"]) for r in data["rows"]}
    assert out[64] > 1.4 * out[1024] and abs(out[2048] / out[1024] - 1) < 0.05      # falls, then flat
    for r in data["rows"]:
        np.testing.assert_allclose(r["entry"], data["lr"] / math.sqrt(17), rtol=1e-4)
    sys.path.insert(0, str(root / "benchmarks"))
    import vit_class_token_effect as study

    X, Y = suite.image_data()
    P = parameterise(suite.vit, "muP", widths=(32, 64, 128, 256), example_inputs=(X,))
    again = study.one(P, 64, 0, X, Y)
    np.testing.assert_allclose(again, (data["rows"][0]["output"][0], data["rows"][0]["entry"][0]), rtol=1e-5)
