"""The README's describe → predict → check section runs as written (Python and shell)."""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _section():
    return README.read_text().split("## Your own network", 1)[1].split("\n## ", 1)[0]


def test_python_workflow_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = re.findall(r"```python\n(.*?)```", _section(), re.S)[0]
    ns = {}
    exec(compile(code, "README.md", "exec"), ns)
    assert ns["k"].nngp.shape == (6, 6) and ns["c"].passed
    assert ns["c"].power < 0.05
    assert (tmp_path / "check.png").exists() or "plot(" in code


@pytest.mark.slow
def test_shell_workflow_runs(tmp_path):
    lines = re.findall(r"```bash\n(.*?)```", _section(), re.S)[0].strip().splitlines()
    for line in lines:
        argv = shlex.split(line)
        if argv[0] == "limits":
            argv = [sys.executable, "-m", "limits.cli", *argv[1:]]
        elif argv[0] == "python":
            argv = [sys.executable, *argv[1:]]
        proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=1800)  # a hang bound
        assert proc.returncode == 0, (line, proc.stderr[-2000:])
    assert (tmp_path / "check.png").stat().st_size > 1000
