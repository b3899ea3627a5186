"""The README's torch section stays true: its three-line workflow and its hand-written SDPA transformer run and
pass; its commands are the CI's."""
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

README = Path(__file__).resolve().parents[2] / "README.md"


def _section():
    return README.read_text().split("## PyTorch networks", 1)[1].split("\n## ", 1)[0]


def test_workflow_example_runs_and_passes():
    code = re.findall(r"```python\n(.*?)```", _section(), re.S)[0]
    assert code.count("limits.torch.") >= 3
    ns = {}
    exec(compile(code, "README.md", "exec"), ns)
    assert ns["r"].passed, ns["r"].to_markdown()


def test_hand_written_sdpa_transformer_is_parameterised_and_checked():
    """The nanoGPT-style block: both SDPA calls found (torch.fx cannot iterate the split: the recorded execution
    is used), their query rows × r^-1/2, the check passes."""
    code = next(c for c in re.findall(r"```python\n(.*?)```", _section(), re.S) if "scaled_dot_product_attention" in c)
    assert "limits.torch.parameterise(GPT, \"muP\"" in code
    ns = {}
    exec(compile(code, "README.md", "exec"), ns)
    P, r = ns["P"], ns["r"]
    assert [(a.site.name, a.site.method.split()[0], a.query_exponent()) for a in P.attention] == [
        ("blocks.0:sdpa", "function-mode", -0.5), ("blocks.1:sdpa", "function-mode", -0.5)]
    assert {q.name: q.query_rows for q in P.rules if q.query_exponent == -0.5} == {
        f"blocks.{i}.qkv.{t}": (0, 64) for i in (0, 1) for t in ("weight", "bias")}
    assert r.passed, r.to_markdown()


def test_install_and_test_command():
    cmds = re.findall(r"```bash\n(.*?)```", _section(), re.S)
    assert 'python -m pip install -e ".[torch]" && python -m pytest tests/torch_bridge' in cmds[0]
