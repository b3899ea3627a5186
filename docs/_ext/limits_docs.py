"""Sphinx directives that generate parts of the `limits` docs from the code and the data at build time.

``.. limits-cli::``
    The command-line reference: one section per command and sub-command of ``limits.cli``'s
    argparse parser, with its help line and its ``--help`` text (no sphinx-argparse needed).
``.. limits-gallery::``
    The figure gallery: every figure whose data file ``figures/NAME.json`` (quick variant) or
    ``figures/full/NAME.json`` (paper size) exists, grouped by component, with the caption, the seed
    reference and the variant stored in that JSON file.
"""
from __future__ import annotations

import argparse
import json
import os
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
    return {"parallel_read_safe": True, "version": "1"}
