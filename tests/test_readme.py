"""The README stays true: its two quick-start commands are CI's, it stays short, and the concrete command lines
written inline in it and in the command table of docs/cli.rst work as written (its code blocks:
tests/test_doc_examples.py)."""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = (README, ROOT / "docs" / "cli.rst")


def _text():
    return README.read_text()


def test_quick_start_has_exactly_two_commands():
    block = _text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    cmds = re.findall(r"```bash\n(.*?)```", block, re.S)
    lines = [ln for c in cmds for ln in c.strip().splitlines()]
    assert lines == ['python -m pip install -e . && limits',
                     'python -m pip install -e ".[test]" && python -m pytest']
    ci = (ROOT / ".ci" / "run").read_text()
    assert lines[1] in ci


def test_readme_is_read_in_ten_minutes():
    """≤ 300 lines, every capability shown with its example, each section linking to its page of the docs."""
    text = _text()
    assert len(text.splitlines()) <= 300
    sections = re.split(r"\n## ", text)[1:]
    assert len(sections) >= 8
    for s in sections:
        if not s.startswith(("Quick start", "More")):
            assert re.search(r"\]\(docs/[\w/]+\.rst\)|\]\(benchmarks/README\.md\)", s), s.splitlines()[0]
    for api in ("limits.check", "limits.serial", "limits table", "coord-check", "limits.dmft", "limits.nfd",
                "limits.pc", "limits sweep run"):
        assert api in text, api


MENTIONS = {"limits classify", "limits sweep run"}     # a command named in prose, not a command line


def _inline(text):
    out = []
    for m in re.finditer(r"(?:`|``)(limits [^`]*)(?:`|``)", text):
        cmd = m.group(1)
        if any(tok in cmd for tok in ("NAME", "COMPONENT", "…", "[", "|", "FILE", "STORE", "PATH", "--factory")) \
                or cmd.strip() in ("limits", "limits run") or cmd.strip() in MENTIONS:
            continue
        if cmd.startswith(("limits figure", "limits validate")):
            continue          # expensive; figure names are checked by test_figure_names_exist
        out.append(cmd)
    return out


def _concrete_cli_examples():
    return sorted({c for p in PAGES for c in _inline(p.read_text())})


@pytest.mark.slow
@pytest.mark.parametrize("cmd", _concrete_cli_examples())
def test_cli_examples_work(cmd, tmp_path):
    argv = shlex.split(cmd)
    proc = subprocess.run([sys.executable, "-m", "limits.cli", *argv[1:]], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (cmd, proc.stderr[-2000:])
    assert proc.stdout.strip()
    assert EXPECTED_OUTPUT.get(cmd, "") in proc.stdout


# what the pages say these commands show
EXPECTED_OUTPUT = {"limits table NTK --algorithm tp": "no kernel regime exists",
                   "limits critical-line tanh --sigma-b2 0.05": "1.76095"}


def test_figure_names_exist():
    import limits.gallery as gallery

    names = set()
    for page in (README, *(ROOT / "docs").rglob("*.rst")):
        text = page.read_text()
        for m in re.finditer(r"(?:`|``)limits figure ([^`]*)(?:`|``)", text):
            names |= {t for t in m.group(1).split() if not t.startswith("-") and t not in ("NAME",)}
        names |= set(re.findall(r"figures/(?:full/)?([A-Za-z0-9_]+)\.png", text))
    assert len(names) > 10
    missing = names - set(gallery.figures())
    assert not missing, missing
