"""The torch examples of the README and of docs/torch.rst run as written (tests/doc_examples.py) and do what the
pages say: the README's mynets.py is found in the current folder and passes its coordinate check, printing what the
README shows; on docs/torch.rst the three-line workflow passes, the hand-written SDPA transformer is parameterised
(both attentions found, their query rows × r^-1/2) and passes, its as-written SP init fails the μP check, the broken
demo fails naming its culprit, and the transfer study transfers."""
import re

import pytest

import doc_examples as D

torch = pytest.importorskip("torch")

PAGE = "docs/torch.rst"


def test_your_own_module_in_the_current_folder(tmp_path):
    """README.md's mynets.py, written to a fresh folder, and its command run from there with PYTHONPATH naming only
    limits itself: the module is found in the current folder, the check passes and prints what the README shows."""
    pytest.importorskip("limits.resolver", reason="current-folder modules for --allow come with limits.resolver")
    blocks = [b for b in D.blocks("README.md") if b.section.startswith("Your own PyTorch module")]
    assert [b.file for b in blocks] == ["mynets.py", None] and "def mlp(width)" in blocks[0].code
    assert blocks[1].code.startswith("limits coord-check --factory mynets:mlp --allow mynets")
    for b in blocks:
        printed = D.run_block(b, tmp_path, {}, timeout=900)
    assert "All tensors behave as predicted" in printed


@pytest.mark.slow
def test_torch_page_runs_as_written(tmp_path):
    from test_doc_examples import NOT_RUN

    D.prepare_folder(tmp_path)
    ns, printed = {}, {}
    for b in D.blocks(PAGE):
        if b.lang in D.NOT_CODE or b.key in NOT_RUN:
            continue
        printed[b.key] = D.run_block(b, tmp_path, ns, timeout=1800)      # exit statuses and outputs as the page says
        if "mymodels import GPT" in b.code:
            P, r = ns["P"], ns["r"]
            assert [(a.site.name, a.site.method.split()[0], a.query_exponent()) for a in P.attention] == [
                ("blocks.0:sdpa", "function-mode", -0.5), ("blocks.1:sdpa", "function-mode", -0.5)]
            assert {q.name: q.query_rows for q in P.rules if q.query_exponent == -0.5} == {
                f"blocks.{i}.qkv.{t}": (0, 64) for i in (0, 1) for t in ("weight", "bias")}
            assert r.passed, r.to_markdown()
    assert ns["t"].verdict == "transfers" and ns["t"].passed and (tmp_path / "transfer.png").stat().st_size > 10_000
    shell = "\n".join(v for k, v in printed.items() if v)
    assert re.search(r"Not as predicted:.*out\.weight", shell), "the broken demo names its culprit"
    assert shell.count("All tensors behave as predicted") >= 4
