"""The "our measurement" column of docs/reproducing.rst is what the figure data files say.

``python -m limits.gallery.measurements`` generates the rows from ``figures/NAME.json`` + ``.npz``
(docs/README_measurements.md); these tests fail when that page's table, the generated file or the
data disagree.
"""
from pathlib import Path

import pytest

from limits.gallery import measurements as M

ROOT = Path(__file__).resolve().parents[1]
FIGS = ROOT / "figures"


def test_page_rows_match_the_figure_data():
    problems = M.compare((ROOT / "docs/reproducing.rst").read_text(), FIGS)
    assert not problems, ("docs/reproducing.rst disagrees with `python -m limits.gallery.measurements`:\n"
                          + "\n".join(problems))


def test_generated_file_is_up_to_date():
    assert (ROOT / "docs" / "README_measurements.md").read_text() == M.to_markdown(FIGS), \
        "docs/README_measurements.md is stale: run python -m limits.gallery.measurements"


def test_every_generated_row_names_its_data_sizes():
    for seed, claim, cmd, meas in M.generate_rows(FIGS):
        assert "quick data" in meas or "paper-size data" in meas or "paper-size grid" in meas, (cmd, meas)
        assert "|" not in meas.replace("`", ""), f"a | would break the Markdown table: {meas}"


def test_table_parser_and_comparison_catch_a_changed_number(tmp_path):
    rows = M.generate_rows(FIGS)
    table = "\n".join(["# x", "", M.TABLE_HEADING, "", "| seed | claim | command | our measurement |",
                       "|---|---|---|---|"] + [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows] + ["", "## next"])
    assert M.compare(table, FIGS) == []
    seed, claim, cmd, meas = rows[0]
    bad = table.replace(meas, meas.replace("[", "[9", 1))
    assert any("measurement differs" in p for p in M.compare(bad, FIGS))
    missing = table.replace(f"| {seed} | {claim} | {cmd} | {meas} |\n", "")
    assert any("no row in the page" in p for p in M.compare(missing, FIGS))


def test_parser_keeps_pipes_inside_code():
    assert M._split_cells("| 1 | a | `x | y` | z |") == [" 1 ", " a ", " `x | y` ", " z "]


def test_check_cli_exit_code(tmp_path, capsys):
    good = tmp_path / "README.md"
    rows = M.generate_rows(FIGS)
    good.write_text("\n".join([M.TABLE_HEADING, "| seed | claim | command | our measurement |", "|---|---|---|---|"]
                              + [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]) + "\n")
    assert M.main(["--outdir", str(FIGS), "--check", str(good)]) == 0
    assert M.main(["--outdir", str(FIGS), "--write", str(tmp_path / "m.md")]) == 0
    assert (tmp_path / "m.md").read_text() == M.to_markdown(FIGS)


def test_missing_table_is_an_error():
    with pytest.raises(ValueError, match="Reproducing the seed papers"):
        M.readme_table("# no table here\n")
