"""`limits coord-check` under hostile option values (the core fuzz suite skips this torch command): every
run ends with exit 0/1 or one `limits: error:` line naming the option, never a traceback or internal error."""
import argparse

import pytest

torch = pytest.importorskip("torch")

from limits.cli import build_parser, main  # noqa: E402

BASE = ["--factory", "limits.torch.demos:mlp", "--param", "muP",
        "--widths", "4", "8", "16", "--seeds", "2", "--steps", "1"]
HOSTILE = {"int": ["0", "-1", "abc", "", "1.5", "100000000", "3"],
           "float": ["nan", "inf", "-inf", "0", "-1", "1e308", "abc"],
           "str": ["", "nope", "__import__('os').system('true')", "os:system", "a:b:c", "limits.torch.demos:_broken",
                   "x" * 300, "\x00", "code:interact", "limits.cli:main", "limits.kernels.tilestore:write_tiles",
                   "limits.torch.demos", "limits", "os", "numpy", "json", "x." * 200 + "y:f"]}


def _options():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["coord-check"]
    for a in sub._actions:
        if not a.option_strings or a.nargs == 0 or a.dest in ("help", "save", "plot"):
            continue
        kind = "int" if a.type is int else "float" if a.type is float else "str"
        yield max(a.option_strings, key=len), a.dest, kind, a.choices


def _with(flag, value):
    argv = list(BASE)
    if flag in argv:
        i = argv.index(flag)
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            j += 1
        return argv[:i] + [flag, value] + argv[j:]
    return argv + [flag, value]


CASES = [(flag, dest, v) for flag, dest, kind, choices in _options()
         for v in (["nope", ""] if choices else HOSTILE[kind])]


@pytest.mark.parametrize("flag,dest,value", CASES, ids=[f"{f}={v[:20]!r}" for f, _, v in CASES])
def test_hostile_option_value(flag, dest, value, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        rc = main(["coord-check", *_with(flag, value)])
    except SystemExit as exc:          # argparse: usage error
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc in (0, 1, 2), (rc, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(value) <= 160 or value not in err, err                 # long user text is never echoed whole
    if rc == 2:
        lines = [ln for ln in err.splitlines() if ln.startswith("limits: error: ") or ln.startswith("usage:")]
        errors = [ln for ln in err.splitlines() if "error:" in ln]
        assert len(errors) == 1, err
        names = {flag, flag.lstrip("-"), dest, dest.replace("_", "-")}
        if len(value.strip()) >= 3:
            names.add(value.strip()[:50])
        assert any(n.lower() in errors[0].lower() for n in names) or "required" in errors[0], errors[0]
        assert lines
