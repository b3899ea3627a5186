"""Sphinx directives that generate parts of the `limits` docs from the code and the data at build time.

``.. limits-cli::``
    The command-line reference: one section per command and sub-command of ``limits.cli``'s
    argparse parser, with its help line and its ``--help`` text (no sphinx-argparse needed).
``.. limits-gallery::``
    The figure gallery: every figure whose data file ``figures/NAME.json`` (quick variant) or
    ``figures/full/NAME.json`` (paper size) exists, grouped by component, with the caption, the seed
    reference and the variant stored in that JSON file.

Generated blocks in reST pages. A script that writes numbers into a page (``python benchmarks/check_calibration.py
--write``, ``python benchmarks/readme_rows.py --write``, …) writes Markdown — the same rows it wrote into the README —
between two marker lines ``<!-- NAME:begin (COMMAND) -->`` and ``<!-- NAME:end -->``. When a page is read
(:func:`markdown_blocks`), the marker lines are dropped and the Markdown between them becomes reST: pipe tables
become ``list-table`` directives, paragraphs keep their text with Markdown's inline code, links and escapes
translated (:func:`md_inline`).
"""
from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.util.nodes import nested_parse_with_titles

ROOT = Path(__file__).resolve().parents[2]
HELP_WIDTH = "100"                      # argparse wraps --help at $COLUMNS: fixed, so the page is reproducible
_RST_SPECIAL = "\\*`|_[]<>:"


def rst_escape(text: str) -> str:
    """Plain text as literal reST inline text (every markup character backslash-escaped)."""
    return "".join("\\" + c if c in _RST_SPECIAL else c for c in " ".join(str(text).split()))


def _underline(title: str, char: str) -> list[str]:
    return [title, char * max(len(title), 4), ""]


def _subcommands(parser: argparse.ArgumentParser):
    """(name, help, subparser) of the sub-commands of ``parser``, in the order they were added."""
    for action in parser._actions:                       # argparse has no public API for this
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name) or "", sub


def cli_reference_lines(parser=None) -> list[str]:
    """reST lines of the command-line reference generated from the argparse parser."""
    if parser is None:
        from limits.cli import build_parser

        parser = build_parser()
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        lines: list[str] = []

        def emit(prog_parser, help_line, depth):
            title = prog_parser.prog
            lines.extend(_underline(title, "-~^"[min(depth, 2)]))
            if help_line:
                lines.extend([rst_escape(help_line[0].upper() + help_line[1:]) + ".", ""])
            lines.extend(["::", ""])
            lines.extend("   " + ln if ln.strip() else "" for ln in prog_parser.format_help().rstrip().splitlines())
            lines.append("")
            for name, help_, sub in _subcommands(prog_parser):
                emit(sub, help_, depth + 1)

        lines.extend(["::", ""])
        lines.extend("   " + ln if ln.strip() else "" for ln in parser.format_help().rstrip().splitlines())
        lines.append("")
        for name, help_, sub in _subcommands(parser):
            emit(sub, help_, 0)
        return lines
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def gallery_entries(figdir: Path = ROOT / "figures") -> list[dict]:
    """The stored figures: paper size (``figures/full/``) where present, else the quick variant."""
    entries = {}
    for variant, d in (("quick", figdir), ("paper size", figdir / "full")):
        for js in sorted(d.glob("*.json")):
            png = js.with_suffix(".png")
            try:
                meta = json.loads(js.read_text(encoding="utf-8"))
            except ValueError:
                continue
            if not isinstance(meta, dict) or "figure" not in meta or not png.is_file():
                continue
            entries[meta["figure"]] = {**meta, "variant": variant, "png": png}
    return sorted(entries.values(), key=lambda e: (e.get("component", ""), e["figure"]))


def gallery_lines(docdir: Path, figdir: Path = ROOT / "figures") -> list[str]:
    lines: list[str] = []
    component = None
    for e in gallery_entries(figdir):
        if e.get("component", "") != component:
            component = e.get("component", "")
            lines.extend(_underline(f"``limits.{component}``" if component else "other", "-"))
        name = e["figure"]
        lines.extend(_underline(name, "~"))
        rel = os.path.relpath(e["png"], docdir).replace(os.sep, "/")
        cmd = f"limits figure {name}" + (" --quick" if e["variant"] == "quick" else "")
        lines.extend([f".. figure:: {rel}", "   :width: 90%", f"   :alt: figure {name}", ""])
        lines.append("   " + rst_escape(e.get("caption") or name))
        lines.append("")
        info = [f"Reproduce: ``{cmd}`` ({e['variant']} data"]
        wall = e.get("wall_time_s")
        if isinstance(wall, (int, float)):
            info[0] += ", computed in " + (f"{wall:.0f} s" if wall >= 1 else "< 1 s")
        info[0] += ")."
        if e.get("seed_ref"):
            info.append(f"Source: {rst_escape(e['seed_ref'])}.")
        lines.extend([" ".join(info), ""])
    return lines


# ------------------------------------------------------------------------------ Markdown blocks in reST pages
_MARKER = re.compile(r"^<!-- ([\w-]+):(begin|end)\b.*-->\s*$")
_SEPARATOR = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+\s*$")


def md_cells(line: str) -> list[str]:
    """The cells of a Markdown table row: split on the ``|`` that are neither escaped nor inside `code`."""
    cells, cur, code, i, body = [], [], False, 0, line.strip()[1:-1]
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body) and body[i + 1] == "|":
            cur.append("\\|")
            i += 2
            continue
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    cells.append("".join(cur).strip())
    return cells


def md_inline(text: str) -> str:
    """Markdown inline text as reST: `code` → ``code`` (a table's escaped \\| inside it → |), [text](url) → an
    anonymous link, a word-final _ escaped (reST would read a reference); **bold** and *emphasis* are the same."""
    out, pos = [], 0
    for m in re.finditer(r"`([^`]+)`|\[([^\]]+)\]\(([^)\s]+)\)", text):
        before = text[pos:m.start()]
        out.append(_md_text(before) + ("\\ " if before and (before[-1].isalnum() or before[-1] in ")]") else ""))
        if m.group(1) is not None:
            code = m.group(1).replace("\\|", "|")
            out.append(f"``{code}``" if not code.startswith(" ") and not code.endswith(" ") else f":code:`{code}`")
        else:
            out.append(f"`{_md_text(m.group(2))} <{m.group(3)}>`__")
        pos = m.end()
        if pos < len(text) and (text[pos].isalnum() or text[pos] in "(["):
            out.append("\\ ")          # reST inline markup ends before a space or punctuation
    out.append(_md_text(text[pos:]))
    return "".join(out)


def _md_text(text: str) -> str:
    return re.sub(r"(?<=\w)_(?=\W|$)", r"\\_", text)


def _md_table(lines: list[str]) -> list[str]:
    rows = [md_cells(ln) for ln in lines if not _SEPARATOR.match(ln)]
    width = max(len(r) for r in rows)
    out = [".. list-table::", "   :header-rows: 1", "   :class: generated", ""]
    for r in rows:
        r = r + [""] * (width - len(r))
        for j, cell in enumerate(r):
            text = md_inline(cell)
            out.append(("   * - " if j == 0 else "     - ") + text if text else ("   * -" if j == 0 else "     -"))
    return out + [""]


def markdown_to_rst(lines: list[str]) -> list[str]:
    """Markdown lines (pipe tables and paragraphs) as reST lines."""
    out, i = [], 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("|") and i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1]):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out += [""] + _md_table(lines[i:j])
            i = j
            continue
        out.append(md_inline(ln) if ln.strip() else "")
        i += 1
    return out


def markdown_blocks(text: str) -> str:
    """A reST page with its generated Markdown blocks (between ``<!-- NAME:begin … -->`` and ``<!-- NAME:end -->``)
    translated to reST and the marker lines dropped; the rest of the page is unchanged."""
    out, block, inside = [], [], None
    for ln in text.split("\n"):
        m = _MARKER.match(ln)
        if m and m.group(2) == "begin" and inside is None:
            inside, block = m.group(1), []
            out.append("")
        elif m and m.group(2) == "end" and m.group(1) == inside:
            out += markdown_to_rst(block) + [""]
            inside = None
        elif inside is not None:
            block.append(ln)
        else:
            out.append(ln)
    if inside is not None:
        raise ValueError(f"marker <!-- {inside}:begin --> has no <!-- {inside}:end -->")
    return "\n".join(out)


def _source_read(app, docname, source):
    source[0] = markdown_blocks(source[0])


class _Generated(Directive):
    has_content = False

    def _lines(self) -> list[str]:
        raise NotImplementedError

    def run(self):
        from docutils import nodes

        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(self._lines(), source="<limits_docs>"), node)
        return node.children


class CLIReference(_Generated):
    def _lines(self):
        return cli_reference_lines()


class Gallery(_Generated):
    def _lines(self):
        env = self.state.document.settings.env
        docdir = Path(env.doc2path(env.docname)).parent
        env.note_dependency(str(ROOT / "figures"))
        return gallery_lines(docdir)


def setup(app):
    app.add_directive("limits-cli", CLIReference)
    app.add_directive("limits-gallery", Gallery)
    app.connect("source-read", _source_read)
    return {"parallel_read_safe": True, "version": "1"}
