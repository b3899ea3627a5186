"""Every document the code, docs, notebooks, figures' metadata and README cite is in this repository.

Scans every tracked text file (``git ls-files``; not the history) for names of Markdown /
reStructuredText files (``NAME.md``, ``docs/theory/NAME.rst §N``) and fails when a cited file does not
exist in the checkout, when a cited numbered section (``§N``) is not a heading of that page, or when
anything points outside the repository (the project's private specification folder).
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BINARY = (".npz", ".png", ".pdf", ".nc", ".npy")
# the names of the specification files the project was planned from; they are not in this
# repository, so a bare citation of one of them is always a dangling reference
SPEC_NAMES = {f"{n}.md" for n in ("kernels", "nfd", "pc", "params", "dmft", "finite", "validation",
                                  "performance", "gallery", "gaussian", "sweep", "cli")}
OUTSIDE = ("../" + "shared", "shared/" + "spec", "/work/" + "shared")
PLACEHOLDERS = {"NAME", "FILE", "COMP", "COMPONENT"}       # docs/theory/NAME.rst in prose
SELF = "tests/test_doc_references.py"                       # its examples are meant to dangle
CITE = re.compile(r"(?<![\w{}\].])((?:[\w.-]*/)*[\w-]*\w\.(?:md|rst))\b(?:,? ?§ ?([0-9]+)(?:[–-]([0-9]+))?)?")


def _tracked():
    proc = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if proc.returncode != 0:
        pytest.skip("not a git checkout")
    files = [f for f in proc.stdout.decode().split("\0") if f]
    out = {}
    for f in files:
        if f.endswith(BINARY) or not (ROOT / f).is_file():
            continue
        try:
            out[f] = (ROOT / f).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    return out


def _sections(path: Path) -> set[int]:
    """Numbers N of the headings 'N. Title' of a reST page."""
    return {int(m.group(1)) for m in re.finditer(r"^([0-9]+)\. \S.*\n[-=~^]{3,}$", path.read_text(), re.M)}


def dangling_citations(files: dict[str, str], root: Path = ROOT) -> list[str]:
    """``file:line: problem`` for every citation that does not resolve inside ``root``."""
    tracked = set(files)
    problems = []
    for f, text in files.items():
        here = Path(f).parent
        in_tests = f.startswith("tests/")
        for lineno, line in enumerate(text.splitlines(), 1):
            for bad in OUTSIDE:
                if bad in line:
                    problems.append(f"{f}:{lineno}: points outside the repository ({bad!r})")
            for m in CITE.finditer(line):
                name, sec_lo, sec_hi = m.group(1), m.group(2), m.group(3)
                name = name.removeprefix("./")
                if Path(name).stem in PLACEHOLDERS:
                    continue
                candidates = [str(here / name) if str(here) != "." else name, name]
                hit = next((c for c in candidates if c in tracked or (root / c).is_file()), None)
                if hit is None:
                    if "/" in name and name.startswith(("tmp", "/")):
                        continue
                    if in_tests and "/" not in name and name not in SPEC_NAMES:
                        continue          # a file the test itself writes (e.g. tmp_path / "m.md")
                    problems.append(f"{f}:{lineno}: cites {name!r}, which is not in the repository")
                    continue
                if sec_lo and hit.endswith(".rst"):
                    have = _sections(root / hit)
                    for sec in range(int(sec_lo), int(sec_hi or sec_lo) + 1):
                        if sec not in have:
                            problems.append(f"{f}:{lineno}: cites {hit} §{sec}, which has no section {sec}")
    return problems


def test_every_cited_document_is_in_the_repository():
    files = _tracked()
    files.pop(SELF, None)
    problems = dangling_citations(files)
    assert not problems, "dangling document references:\n" + "\n".join(problems)


def test_the_check_catches_spec_citations(tmp_path):
    """The scanner is not vacuous: bare spec names, missing sections and outside paths are reported."""
    (tmp_path / "docs" / "theory").mkdir(parents=True)
    (tmp_path / "docs" / "theory" / "nfd.rst").write_text("T\n=\n\n1. Network\n----------\n\ntext\n")
    files = {
        "docs/theory/nfd.rst": (tmp_path / "docs" / "theory" / "nfd.rst").read_text(),
        "limits/a.py": '"""Kernel ODE (nfd.md §2)."""\n',
        "limits/b.py": '"""(docs/theory/nfd.rst §1) fine; (docs/theory/nfd.rst §2) missing."""\n',
        "limits/c.py": "# see ../" + "shared/spec/pc.md\n",
        "tests/test_x.py": 'p = tmp_path / "m.md"  # written by the test\nq = "validation.md"\n',
        "limits/d.py": "from docutils.parsers.rst import Directive  # cite docs/theory/NAME.rst §N\n",
    }
    problems = dangling_citations(files, root=tmp_path)
    text = "\n".join(problems)
    assert "limits/a.py:1: cites 'nfd.md'" in text
    assert "limits/b.py:1: cites docs/theory/nfd.rst §2" in text
    assert "docs/theory/nfd.rst §1, which" not in text
    assert "limits/c.py:1: points outside the repository" in text
    assert "tests/test_x.py:2: cites 'validation.md'" in text
    assert "m.md" not in text
    assert "limits/d.py" not in text            # a dotted module name and a placeholder are not citations
