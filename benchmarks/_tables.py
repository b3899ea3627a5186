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
