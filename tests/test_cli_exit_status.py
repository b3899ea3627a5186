"""`limits --help` lists every exit status a command can return, and a missing input file is named once."""
import ast
import re
from pathlib import Path

import numpy as np

import limits.cli as cli
from limits.cli import EXIT_STATUSES, build_parser, main

ROOT = Path(__file__).resolve().parents[1]
CLI_FILES = sorted((ROOT / "limits" / "cli").glob("*.py")) + [ROOT / "limits" / "torch" / "cli.py"]


def _returned_statuses():
    """Integer literals and EXIT_* names in the return statements of the commands (cmd_*) and their report
    helpers (_report*)."""
    found = set()
    for f in CLI_FILES:
        for fn in ast.walk(ast.parse(f.read_text())):
            if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith(("cmd_", "_report", "main")):
                continue
            for r in ast.walk(fn):
                if not isinstance(r, ast.Return) or r.value is None:
                    continue
                for c in ast.walk(r.value):
                    if isinstance(c, ast.Constant) and type(c.value) is int:
                        found.add((f.name, fn.name, c.value))
                    elif isinstance(c, ast.Name) and c.id.startswith("EXIT_"):
                        found.add((f.name, fn.name, getattr(cli, c.id)))
    return found


def test_help_lists_every_exit_status():
    found = _returned_statuses()
    assert {code for *_, code in found} >= {0, 1, 3}                # the scan sees the commands' statuses
    missing = [x for x in found if x[2] not in EXIT_STATUSES]
    assert missing == []
    constants = {getattr(cli, n) for n in dir(cli) if n.startswith("EXIT_") and isinstance(getattr(cli, n), int)}
    assert constants <= set(EXIT_STATUSES)
    epilog = build_parser().epilog
    for code in EXIT_STATUSES:
        assert f"; {code} " in epilog or epilog.startswith(f"Exit status: {code} ")
    doc = (ROOT / "docs" / "cli.rst").read_text().split("Exit status:", 1)[1].split(".. ", 1)[0]
    assert all(re.search(rf"(?<![\d.]){code}(?![\d.])", doc) for code in EXIT_STATUSES)


def test_missing_file_named_once(tmp_path, capsys):
    m = tmp_path / "m.toml"
    assert main(["model", "--d-in", "3", "--depth", "1", "--out", str(m)]) == 0
    np.save(tmp_path / "a.npy", np.ones((2, 3)))
    capsys.readouterr()
    missing = tmp_path / "nope.npy"
    assert main(["kernel", "--model", str(m), "--x1", str(missing), "--x2", str(tmp_path / "a.npy")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count(str(missing)) == 1 and "does not exist" in err and err.startswith("limits: error: --x1"), err
    assert len(err.splitlines()) == 1
