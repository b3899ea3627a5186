"""Depth has one meaning everywhere: the Model's number of hidden N×N blocks (README "Conventions",
docs/workflow.rst, the Model's own description)."""
import re
from pathlib import Path

import limits

ROOT = Path(__file__).resolve().parents[1]
OTHER_MEANING = re.compile(r"depth\W+`*L`*\W*=\s*(the\s+)?number of weight layers", re.I)


def test_docs_define_depth_as_hidden_blocks():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.rst"))]
    bad = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in pages for m in OTHER_MEANING.finditer(p.read_text())]
    assert not bad, bad
    for page in ("README.md", "docs/workflow.rst"):
        text = " ".join((ROOT / page).read_text().split())
        assert "number of hidden N×N blocks between read-in and read-out" in text, page


def test_model_describes_depth_as_hidden_blocks():
    for m in (limits.mlp(4, 3), limits.resnet(4, 3)):
        d = m.describe()
        assert "depth=3 hidden blocks" in d and "(5 weight layers)" in d, d
        assert m.finite(8).n_blocks == 3
