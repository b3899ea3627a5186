"""The README's torch section stays true: its three-line workflow runs and passes; its commands are the CI's."""
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


def test_install_and_test_command():
    cmds = re.findall(r"```bash\n(.*?)```", _section(), re.S)
    assert 'python -m pip install -e ".[torch]" && python -m pytest tests/torch_bridge' in cmds[0]
