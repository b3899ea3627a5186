"""The code blocks of README.md and of the docs/ pages, and how a test runs them exactly as written.

A page's blocks, in order (:func:`blocks`):

* README.md: fenced blocks ```` ```LANG ````; a block right after a line ``<!-- file: NAME -->`` is a file the reader
  saves as NAME (not run).
* reST pages: ``.. code-block:: LANG`` (``:caption: NAME`` makes it a file the reader saves as NAME).
* A ``text`` block right after a code block (nothing but blank lines between) is what that block prints.

:func:`run_page` runs the blocks of a page in a fresh folder, the way a reader would: file blocks are written there,
``python`` blocks run in one namespace per page, ``bash`` and ``console`` blocks in ``bash -e`` with ``limits`` and
``python`` on the PATH meaning this checkout's CLI and interpreter; ``toml`` blocks without a file name are read as
sweep files (names resolved, nothing run). Each printed output is compared with the page's ``text`` block after
masking durations (:func:`normalise`). ``bibtex`` blocks are not code.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_CODE = {"text", "bibtex"}
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```\s*$", re.S | re.M)
DIRECTIVE = re.compile(r"^\.\. code-block:: *(\S+)\n((?:[ \t]+:\w+:.*\n)*)\n((?:(?:[ \t]+.*)?\n)+)", re.M)
DURATION = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?: ?(?:ms|min|s|h)\b| CPU-(?:s|min)\b)")


@dataclass
class Block:
    page: str
    index: int
    lang: str
    code: str
    file: str | None = None
    output: str | None = None           # the text block that follows, if any
    section: str = ""                   # the title of the section it is in
    output_span: tuple | None = None    # where that text block's content is in the page (start, end, indent)

    @property
    def key(self) -> str:
        """How a test names the block: page, section and its first non-empty line (a file block: its name)."""
        first = self.file or next((ln.strip() for ln in self.code.splitlines() if ln.strip()), "")
        return f"{self.page} § {self.section}: {first}"


def pages() -> list[str]:
    """README.md and every reST page of docs/ (not the build)."""
    docs = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.rst") if "_build" not in p.parts)
    return ["README.md", *docs]


def _dedent(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    ind = min((len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()), default=0)
    return "\n".join(ln[ind:] for ln in lines) + "\n"


def blocks(page: str, text: str | None = None) -> list[Block]:
    """The code blocks of ``page`` (a path relative to the repository), each with the output block after it."""
    text = (ROOT / page).read_text() if text is None else text
    raw = []                                     # (start, end, lang, code, file, content span)
    if page.endswith(".md"):
        for m in FENCE.finditer(text):
            before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            f = re.match(r"<!-- file: (\S+) -->", before)
            raw.append((m.start(), m.end(), m.group(1) or "text", m.group(2), f.group(1) if f else None,
                        (m.start(2), m.end(2), "")))
    else:
        for m in DIRECTIVE.finditer(text):
            f = re.search(r":caption: *(\S+)", m.group(2))
            body = m.group(3)
            end = m.start(3) + len(body.rstrip("\n")) + 1
            raw.append((m.start(), m.end(), m.group(1), _dedent(body), f.group(1) if f else None,
                        (m.start(3), end, "   ")))
    if page.endswith(".md"):
        heads = [(m.start(), m.group(1).strip()) for m in re.finditer(r"^#+ (.*)$", text, re.M)]
    else:
        heads = [(m.start(), m.group(1).strip()) for m in re.finditer(r"^(\S.*)\n[-=~^]{3,}\s*$", text, re.M)]
    out: list[Block] = []
    for i, (start, end, lang, code, fname, span) in enumerate(raw):
        if lang == "text" and out and out[-1].output is None and not text[raw[i - 1][1]:start].strip():
            out[-1].output, out[-1].output_span = code, span
            continue
        section = next((h for pos, h in reversed(heads) if pos < start), "")
        out.append(Block(page, len(out), lang, code, fname, section=section))
    return out


def normalise(text: str) -> str:
    """Output as compared: durations masked (they differ from run to run), trailing blanks dropped."""
    lines = [DURATION.sub("<time>", ln).rstrip() for ln in text.strip("\n").splitlines()]
    return "\n".join(lines)


_BIN: list = []


def _shims(folder: Path) -> dict:
    """An environment in which ``limits`` and ``python`` are this checkout's CLI and interpreter (two small scripts in
    a temporary folder of this process, put first on the PATH; nothing is written into ``folder``)."""
    if not _BIN:
        import atexit
        import tempfile

        bin_ = Path(tempfile.mkdtemp(prefix="limits-doc-bin-"))
        atexit.register(shutil.rmtree, bin_, True)
        for name, target in (("limits", f'exec "{sys.executable}" -m limits "$@"'),
                             ("python", f'exec "{sys.executable}" "$@"')):
            p = bin_ / name
            p.write_text(f"#!/bin/sh\n{target}\n")
            p.chmod(0o755)
        _BIN.append(bin_)
    return {**os.environ, "PATH": f"{_BIN[0]}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT), "LIMITS_PROGRESS": "0", "MPLBACKEND": "Agg"}


EXPECT_EXIT = re.compile(r"#.*\bexit (\d+)\s*$")


def run_shell(code: str, cwd: Path, timeout: float = 600) -> str:
    """A bash/console block run as written in ``cwd`` (``console``: the lines after ``$``), one command per line,
    in a session of its own that is ended afterwards (a line ending in ``&`` leaves a process running until then).
    Every line must exit with 0, or with N when its comment says ``# exit N``. Returns what the lines printed."""
    if code.lstrip().startswith("$"):
        code = "\n".join(ln.strip()[1:].strip() for ln in code.splitlines() if ln.strip().startswith("$"))
    lines = [ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    want = [int(m.group(1)) if (m := EXPECT_EXIT.search(ln)) else 0 for ln in lines]
    script = "\n".join(f"{ln}\necho \"@@exit $?\"" if not ln.rstrip().endswith("&") else ln for ln in lines)
    proc = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=_shims(cwd), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, 15)                     # what the block left running (a dask scheduler, …)
        except ProcessLookupError:
            pass
    got = [int(x) for x in re.findall(r"^@@exit (\d+)$", out, re.M)]
    fg = [w for ln, w in zip(lines, want) if not ln.rstrip().endswith("&")]
    if got != fg:
        raise AssertionError(f"exit statuses {got}, expected {fg}:\n{code}\n--- stdout\n{out[-3000:]}\n--- stderr\n"
                             f"{err[-3000:]}")
    return re.sub(r"^@@exit \d+\n", "", out, flags=re.M)


def run_python(code: str, ns: dict, cwd: Path, name: str) -> str:
    """A python block run in the namespace ``ns`` with ``cwd`` as the working folder; what it printed."""
    buf, old = io.StringIO(), os.getcwd()
    os.chdir(cwd)
    sys.path.insert(0, str(cwd))                    # `import mymodels` of a file the page saved there
    try:
        with contextlib.redirect_stdout(buf):
            exec(compile(code, name, "exec"), ns)           # noqa: S102 — the documented example itself
    finally:
        sys.path.remove(str(cwd))
        os.chdir(old)
    return buf.getvalue()


def check_output(block: Block, printed: str):
    if block.output is not None:
        want, got = normalise(block.output), normalise(printed)
        assert got == want, f"{block.key}: the output differs from the page's\n--- page\n{want}\n--- now\n{got}"


def prepare_folder(folder: Path):
    """What a reader has in the folder they run the docs from: the repository's docs/sweeps files."""
    shutil.copytree(ROOT / "docs" / "sweeps", folder / "docs" / "sweeps", dirs_exist_ok=True)


def run_block(block: Block, folder: Path, ns: dict, timeout: float = 600):
    """Run one block (see the module docstring); returns what it printed (None for files and sweep files)."""
    if block.file:
        (folder / block.file).write_text(block.code)
        return None
    if block.lang == "python":
        printed = run_python(block.code, ns, folder, f"{block.page} block {block.index}")
    elif block.lang in ("bash", "console"):
        printed = run_shell(block.code, folder, timeout)
    elif block.lang == "toml":
        from limits.sweep.sweepfile import read

        path = folder / f"block{block.index}.toml"
        path.write_text(block.code)
        read(path)                                          # parsed, every name resolved, nothing run
        return None
    else:
        raise AssertionError(f"{block.key}: no rule to run a {block.lang!r} block")
    check_output(block, printed)
    return printed


def run_page(page: str, folder: Path, skip=frozenset(), only=None, timeout: float = 600) -> list[Block]:
    """Run the code blocks of ``page`` in order in ``folder`` (except those whose key is in ``skip``; only the keys in
    ``only`` when given, with the file blocks before them); returns the blocks run."""
    prepare_folder(folder)
    ns: dict = {"__name__": "__main__"}
    done = []
    for b in blocks(page):
        if b.lang in NOT_CODE or b.key in skip or (only is not None and b.key not in only and not b.file):
            continue
        run_block(b, folder, ns, timeout)
        done.append(b)
    return done


def write_outputs(page: str, folder: Path, skip=frozenset(), keys=None) -> int:
    """Run the page's blocks (as :func:`run_page`, outputs not compared) and write what each block printed into its
    ``text`` block (only the blocks in ``keys`` when given). Returns how many were rewritten."""
    prepare_folder(folder)
    ns: dict = {"__name__": "__main__"}
    new = {}
    for b in blocks(page):
        if b.lang in NOT_CODE or b.key in skip or (keys is not None and b.key not in keys and not b.file):
            continue
        out, b.output = b.output, None                      # run without comparing
        printed = run_block(b, folder, ns)
        if out is not None and printed is not None and (keys is None or b.key in keys):
            new[b.output_span] = printed
    text = (ROOT / page).read_text()
    for (start, end, indent), printed in sorted(new.items(), reverse=True):
        body = "".join(f"{indent}{ln}\n" if ln.strip() else "\n" for ln in printed.rstrip("\n").split("\n"))
        text = text[:start] + body + text[end:]
    (ROOT / page).write_text(text)
    return len(new)


if __name__ == "__main__":          # python tests/doc_examples.py PAGE [KEY-SUBSTRING …]: rewrite the outputs
    import tempfile

    sys.path.insert(0, str(ROOT / "tests"))
    from test_doc_examples import NOT_RUN

    page, subs = sys.argv[1], sys.argv[2:]
    with tempfile.TemporaryDirectory() as tmp:
        chosen = None if not subs else {b.key for b in blocks(page) if any(x in b.key for x in subs)}
        print(f"{page}: {write_outputs(page, Path(tmp), skip=set(NOT_RUN), keys=chosen)} outputs written")
