"""CLI: limits table / classify / depth, restricted parser on the command line, default_job."""
import json

import pytest

from limits.cli import main


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_table_md_latex_json(capsys):
    rc, out, _ = run(capsys, "table", "--format", "md")
    assert rc == 0 and "| a_1 | 0 | 0 | 0 | -1/2 |" in out
    rc, out, _ = run(capsys, "table", "SP", "muP", "--convention", "std", "--format", "latex")
    assert rc == 0 and r"\begin{tabular}" in out
    rc, out, _ = run(capsys, "table", "muP", "--convention", "std", "--algorithm", "pc",
                     "--gamma-bar-L", "-1", "--gauge", "a0", "--format", "json")
    d = json.loads(out)
    assert d["rows"][[r["key"] for r in d["rows"]].index("c_hidden")]["cells"]["muP"] == "1"


def test_classify_from_flags(capsys):
    rc, out, _ = run(capsys, "classify", "--a1", "0", "--ah", "0", "--ao", "0", "--b1", "0", "--bh", "1/2",
                     "--bo", "1/2", "--c", "1", "--json")
    d = json.loads(out)
    assert rc == 0 and d["classification"]["regime"] == "kernel" and d["classification"]["r"] == "1/2"
    rc, out, _ = run(capsys, "classify", "--name", "muP", "--convention", "variance", "--d", "0", "--json")
    d = json.loads(out)
    assert d["classification"]["regime"] != "feature-learning"


@pytest.mark.parametrize("bad", ["__import__('os')", "1+", "x", "2**3", "open"])
def test_classify_rejects_unparsable(capsys, bad):
    rc, _, err = run(capsys, "classify", "--name", "muP", "--a1", bad)
    assert rc == 2 and "--a1" in err


def test_classify_missing_and_depth(capsys):
    rc, _, err = run(capsys, "classify", "--a1", "0")
    assert rc == 2 and "missing exponents" in err
    rc, out, _ = run(capsys, "depth", "--alpha", "1", "--gamma", "0", "--json")
    assert json.loads(out)["name"] == "ODE"


def test_default_job(tmp_path):
    from limits.cli.params import default_job

    lines = default_job(tmp_path)
    files = sorted(p.name for p in (tmp_path / "tables").iterdir())
    assert "params_seed000_table2_bp.md" in files and "params_seed003_table1.tex" in files
    assert len(files) == 10 and lines and "tables" in lines[0]
    assert "| d | 0 | 0 | 1/2 | 1/2 |" in (tmp_path / "tables" / "params_seed000_table2_bp.md").read_text()
