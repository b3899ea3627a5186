"""Short reprs (issue 41): print(P) of a parameterised factory is a few lines — table, factory, base sizes, tensors by
role, attention, tied read-outs, where the full table is — not kilobytes of rules; a coordinate check's repr is one
line (its str is the table)."""
import pytest

torch = pytest.importorskip("torch")

import limits.torch as lt  # noqa: E402
from limits.torch import demos, transfer_demos as td  # noqa: E402


def test_parameterised_repr_is_a_few_lines():
    P = lt.parameterise(demos.transformer, "muP", widths=(32, 64))
    text = repr(P)
    assert str(P) == text and len(text.splitlines()) == 3 and len(text) < 600
    assert text.startswith("Parameterised(muP of limits.torch.demos:transformer, adam, gauge a0, base width 32)")
    assert "27 tensors: 1 input, 8 hidden, 1 output, 16 vector, 1 constant" in text
    assert "attention: 2 sites (multihead; head dim ∝ N)" in text and "P.to_markdown(width)" in text
    tied = repr(lt.parameterise(demos.gpt_tied, "muP", widths=(32, 64)))
    assert "tied read-outs: lm_head.weight" in tied and "(sdpa; head dim ∝ N)" in tied


def test_depth_parameterised_repr_is_a_few_lines():
    D = lt.parameterise(td.residual_mlp, "depth-muP", widths=(32, 64), depths=(2, 4))
    text = repr(D)
    assert len(text.splitlines()) == 4 and len(text) < 700
    assert "base depth 2" in text and "branch multiplier (L/2)^-0.5" in text and "P.to_markdown(width, depth)" in text


def test_coord_check_repr_is_one_line():
    r = lt.coord_check(demos.mlp, (8, 16, 32), demos.mlp_data(), expect="muP", seeds=2, steps=1, progress=False)
    text = repr(r)
    assert "\n" not in text and len(text) < 300 and text.startswith("TorchCoordCheck(as built, expected muP: widths "
                                                                     "8–32, 2 seeds × 1 steps, 9 rows")
    assert str(r) == r.to_markdown()
