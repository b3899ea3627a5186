"""The README's "theory of your own network, and its check" runs as written and prints what the README shows; the
command-line version of docs/workflow.rst runs as written."""
import pytest

import doc_examples as D

KEY = "README.md § The theory of your own network, and its check: import numpy as np, limits"
SHELL = ("docs/workflow.rst § On the command line: limits model --resnet --d-in 10 --depth 20 --activation erf "
         "--sigma-w2 1.2 --sigma-b2 0.2 --rho 0.3 --out m.toml")


def test_python_workflow_runs(tmp_path):
    block = next(b for b in D.blocks("README.md") if b.key == KEY)
    ns = {}
    D.run_block(block, tmp_path, ns)                          # the printed kernel and verdict as the README shows
    assert ns["k"].nngp.shape == (6, 6) and ns["c"].passed
    assert ns["c"].power < 0.05
    assert f"{100 * ns['c'].power:.2f} % off would be caught" in " ".join(D.ROOT.joinpath("README.md").read_text().split())


@pytest.mark.slow
def test_shell_workflow_runs(tmp_path):
    block = next(b for b in D.blocks("docs/workflow.rst") if b.key == SHELL)
    D.run_block(block, tmp_path, {})
    assert (tmp_path / "check.png").stat().st_size > 1000
