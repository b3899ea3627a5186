"""The README's torch sections stay true: the three-line workflow and the hand-written SDPA transformer run and
pass; its commands are the CI's; the mynets.py of "Architectures and your own network" is found in the current
folder and passes."""
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


def _architectures():
    return README.read_text().split("## Architectures and your own network", 1)[1].split("\n## ", 1)[0]


def test_your_own_module_in_the_current_folder(tmp_path):
    """The README's mynets.py, written to a fresh folder, and its command run from there with PYTHONPATH naming
    only limits itself: the module is found in the current folder and the check passes (exit 0)."""
    import os
    import shlex
    import subprocess
    import sys

    pytest.importorskip("limits.resolver", reason="current-folder modules for --allow come with limits.resolver")
    sec = _architectures()
    code = re.findall(r"```python\n(.*?)```", sec, re.S)[1]
    assert "def mlp(width)" in code
    (tmp_path / "mynets.py").write_text(code)
    cmd = re.findall(r"```bash\n(.*?)```", sec, re.S)[0].strip()
    assert cmd.startswith("limits coord-check --factory mynets:mlp --allow mynets")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(README.parent)                 # limits only; never the user's folder
    proc = subprocess.run([sys.executable, "-m", "limits.cli", *shlex.split(cmd)[1:]], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert "All tensors behave as predicted" in proc.stdout
