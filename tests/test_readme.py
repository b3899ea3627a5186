"""The README stays true: its Python example runs and its concrete commands work as written."""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _text():
    return README.read_text()


def test_quick_start_has_exactly_two_commands():
    block = _text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    cmds = re.findall(r"```bash\n(.*?)```", block, re.S)
    lines = [ln for c in cmds for ln in c.strip().splitlines()]
    assert lines == ['python -m pip install -e . && limits',
                     'python -m pip install -e ".[test]" && python -m pytest']
    ci = (README.parent / ".ci" / "run").read_text()
    assert lines[1] in ci


def test_python_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    api = _text().split("## Python API", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", api, re.S)[0]
    ns = {}
    exec(compile(code, "README.md", "exec"), ns)
    assert ns["r"].K_out.shape == (4, 4)
    assert ns["ds"].sigma_w2.shape == (2, 2)


def _concrete_cli_examples():
    cmds = []
    for m in re.finditer(r"`(limits [^`]*)`", _text()):
        cmd = m.group(1)
        if any(tok in cmd for tok in ("NAME", "COMPONENT", "…", "[", "|")) or cmd.strip() in ("limits", "limits run"):
            continue
        if cmd.startswith(("limits figure", "limits validate")):
            continue          # expensive; figure names are checked by test_figure_names_in_readme_exist
        cmds.append(cmd)
    return sorted(set(cmds))


@pytest.mark.slow
@pytest.mark.parametrize("cmd", _concrete_cli_examples())
def test_cli_examples_in_readme_work(cmd, tmp_path):
    argv = shlex.split(cmd)
    proc = subprocess.run([sys.executable, "-m", "limits.cli", *argv[1:]], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (cmd, proc.stderr[-2000:])
    assert proc.stdout.strip()
    assert EXPECTED_OUTPUT.get(cmd, "") in proc.stdout


# what the README says these commands show
EXPECTED_OUTPUT = {"limits table NTK --algorithm tp": "no kernel regime exists",
                   "limits critical-line tanh --sigma-b2 0.05": "1.76095"}


def test_figure_names_in_readme_exist():
    import limits.gallery as gallery

    names = set()
    for m in re.finditer(r"`limits figure ([^`]*)`", _text()):
        names |= {t for t in m.group(1).split() if not t.startswith("-") and t != "NAME"}
    names |= set(re.findall(r"figures/([A-Za-z0-9_]+)\.png", _text()))
    assert names
    missing = names - set(gallery.figures())
    assert not missing, missing
