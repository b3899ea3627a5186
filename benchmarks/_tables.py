"""Tables of the validation scripts rendered for the README/console (Markdown) and for the docs (a reST
list-table), from the same header and rows."""
from __future__ import annotations


def markdown(header, rows) -> list:
    """Markdown lines of a table: ``| a | b |`` rows under a ``|---|`` rule."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def _lit(text) -> str:
    """Plain text safe in reST (the characters of inline markup escaped)."""
    return "".join("\\" + c if c in "|*`_" else c for c in str(text))


def rst(header, rows, caption="") -> list:
    """reST ``list-table`` lines of a table (``caption`` as its title)."""
    out = [f".. list-table:: {_lit(caption)}".rstrip(), "   :header-rows: 1", ""]
    for r in [header] + list(rows):
        out.append("   * - " + _lit(r[0]))
        out += [f"     - {_lit(c)}" for c in r[1:]]
    return out + [""]


def markdown_lines(tables) -> list:
    """Markdown lines of [(caption, header, rows)], a blank line after each table."""
    return [ln for _, h, r in tables for ln in markdown(h, r) + [""]]


def rst_lines(tables) -> list:
    """reST list-table lines of [(caption, header, rows)]."""
    return [ln for cap, h, r in tables for ln in rst(h, r, cap)]


# ---------------------------------------------------------------------- --table / --write of the validation scripts
def add_table_options(ap, show="--table", show_help=None, write_help=None):
    """The options of a script's generated table: ``show`` (``--table``, ``--rows``; None for none) prints it from
    the committed data, ``--write`` also puts it into its page's marked block (:func:`show_or_write`)."""
    if show:
        ap.add_argument(show, action="store_true", help=show_help)
    ap.add_argument("--write", action="store_true", help=write_help)


def show_or_write(a, data_path, page, markers, text, block=None, show="table") -> bool:
    """Answer ``--table``/``--write`` (``a`` the parsed options, ``show`` the name of the first): read the data
    (JSON at ``data_path``); with ``--write`` put ``block(data)`` (lines; by default the printed text between blank
    lines) between the ``markers`` (begin, end) of ``page``; print ``text(data)`` (a string or lines). False, doing
    nothing, when neither option is given (the script then runs its study)."""
    if not ((show and getattr(a, show)) or a.write):
        return False
    import json
    from pathlib import Path

    from limits.results import replace_marked_block

    data = json.loads(Path(data_path).read_text())
    shown = text(data)
    shown = shown if isinstance(shown, str) else "\n".join(shown)
    if a.write:
        replace_marked_block(page, *markers, block(data) if block else ["", *shown.splitlines(), ""])
    print(shown)
    return True
