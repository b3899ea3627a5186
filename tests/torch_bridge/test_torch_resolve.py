"""`--factory` / `--data` names under the one rule of limits.resolver (issue 31 items 2, 5): the demos of limits
are declared (no --allow), the user's own module is found in the current folder without PYTHONPATH and alone,
--allow refuses the standard library, limits and its libraries, and the user's code failing — an exception,
a SyntaxError, sys.exit(0) or sys.exit(1), in the factory, the data function or the module's forward — exits 2
with one line naming it."""
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from limits.cli import main  # noqa: E402
from limits.torch import demos, resolve_factory  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FAST = ["--widths", "4", "8", "16", "--seeds", "2", "--steps", "1"]


def _run(argv, capsys, monkeypatch):
    """``limits ARGV`` in-process with a stdin that must not be read: (status, stdout, stderr)."""
    class _NoStdin(io.StringIO):
        def read(self, *a):
            raise AssertionError("stdin was read")

        readline = read

    monkeypatch.setattr(sys, "stdin", _NoStdin())
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _one_error(err):
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("coord-check", "transfer"))]
    assert len(lines) == 1 and lines[0].startswith("limits: error: "), err
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


def test_demos_are_declared_and_need_no_allow():
    assert resolve_factory("limits.torch.demos:transformer") is demos.transformer
    assert resolve_factory("limits.torch.demos:mlp_data", option="--data") is demos.mlp_data
    bad = [("limits.torch.demos:mlp_data", (), "--factory", "not a declared torch model factory"),   # data as factory
           ("limits.torch.demos:mlp", (), "--data", "not a declared torch data function"),
           ("limits.torch.demos:TinyTransformer", (), "--factory", "not a declared"),
           ("limits.torch.demos:torch.randn", (), "--factory", "attribute chains"),
           ("limits.torch.demos:_broken", (), "--factory", "public identifier"),
           ("limits.torch.demos:nn", (), "--factory", "not a declared"),
           ("limits.torch.demos:missing", (), "--factory", "no attribute"),
           ("limits.torch.demos.transformer", (), "--factory", "module:function"),
           ("limits.torch.coordcheck:loglog_fit", (), "--factory", "not a declared"),
           ("limits.cli:main", (), "--data", "not a declared"),
           ("limits.torch.demos:transformer", ["limits.torch.demos"], "--factory", "limits itself"),
           ("os:system", ["os"], "--factory", "standard library"),
           ("code:interact", ["code"], "--data", "standard library"),
           ("numpy:load", ["numpy"], "--data", "a library limits runs on"),
           ("torch:load", ["torch"], "--data", "a library limits runs on")]
    for spec, allow, option, msg in bad:
        with pytest.raises(ValueError, match=msg):
            resolve_factory(spec, allow, option=option)


HOSTILE_NAMES = [
    (["--allow", "code", "--data", "code:interact"], "standard library"),          # read and ran stdin
    (["--data", "limits.cli:main"], "not a declared"),                             # recursed, wrote tracebacks
    (["--allow", "limits.cli", "--data", "limits.cli:main"], "limits itself"),
    (["--allow", "os", "--data", "os:getcwd"], "standard library"),
    (["--allow", "numpy", "--data", "numpy:load"], "numpy"),
    (["--allow", "limits", "--data", "limits.torch.demos:mlp_data"], "limits itself"),
    (["--allow", "torch", "--data", "torch:load"], "torch"),
    (["--allow", "json", "--data", "json:load"], "standard library"),             # with a local json.py below
    (["--data", "limits.kernels.tilestore:write_tiles"], "not a declared"),
    (["--data", "limits.results:atomic_write_text"], "not a declared"),
]


@pytest.mark.parametrize("extra,msg", HOSTILE_NAMES, ids=[" ".join(e)[:60] for e, _ in HOSTILE_NAMES])
def test_hostile_names_are_refused_before_anything_runs(extra, msg, tmp_path, capsys, monkeypatch):
    import tempfile

    monkeypatch.chdir(tmp_path)
    (tmp_path / "json.py").write_text(f"open({str(tmp_path / 'MARKER')!r}, 'w')\ndef load():\n    return 1\n")
    reports = set(Path(tempfile.gettempdir()).glob("limits-error-*"))
    rc, out, err = _run(["coord-check", "--factory", "limits.torch.demos:mlp", "--param", "muP", *FAST, *extra],
                        capsys, monkeypatch)
    assert rc == 2 and msg in _one_error(err), err
    assert not (tmp_path / "MARKER").exists()
    assert set(Path(tempfile.gettempdir()).glob("limits-error-*")) == reports          # no crash report


_FACTORY = """import torch
from torch import nn


def mlp(width):
    {body}
    return nn.Sequential(nn.Linear(8, width), nn.Tanh(), nn.Linear(width, 2))


class Bad(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(8, width)

    def forward(self, x):
        return self.lin(x).reshape(3, -1, 7)


def bad_forward(width):
    return Bad(width)


def data():
    {data}
    return torch.randn(16, 8), torch.randn(16, 2)
"""

FAILURES = [
    ("raise", "raise RuntimeError('the factory broke')", "pass", "--factory mymodels:mlp",
     "RuntimeError: the factory broke"),
    ("exit0", "import sys; sys.exit(0)", "pass", "--factory mymodels:mlp", "sys.exit(0)"),
    ("exit1", "import sys; sys.exit(1)", "pass", "--factory mymodels:mlp", "sys.exit(1)"),
    ("exit-text", "raise SystemExit('bye')", "pass", "--factory mymodels:mlp", "sys.exit('bye')"),
    ("data-raise", "pass", "1 / 0", "--data mymodels:data", "ZeroDivisionError"),
    ("data-exit", "pass", "import sys; sys.exit(0)", "--data mymodels:data", "sys.exit(0)"),
    ("import-error", "import no_such_module_xyz", "pass", "--factory mymodels:mlp", "ModuleNotFoundError"),
    ("syntax", None, "pass", "importing mymodels", "SyntaxError"),
    ("import-exit", "EXIT", "pass", "importing mymodels", "sys.exit(0)"),
    ("forward", "pass", "pass", "mymodels.py:", "RuntimeError"),
]


@pytest.mark.parametrize("case,body,data,names,exc", FAILURES, ids=[c[0] for c in FAILURES])
def test_the_users_code_failing_is_the_users_error(case, body, data, names, exc, tmp_path, capsys, monkeypatch):
    """Item 5: exit 2, one line naming the function (or module) and the exception — not exit 70 (a bug in
    limits), not exit 0 or 1 (sys.exit inside the factory ended the command as if it had succeeded)."""
    monkeypatch.chdir(tmp_path)
    src = _FACTORY.format(body=body, data=data)
    if case == "syntax":
        src = src.replace("def mlp(width):", "def mlp(width)")
    if case == "import-exit":
        src = "import sys\nsys.exit(0)\n" + _FACTORY.format(body="pass", data="pass")
    (tmp_path / "mymodels.py").write_text(src)
    factory = "mymodels:bad_forward" if case == "forward" else "mymodels:mlp"
    rc, out, err = _run(["coord-check", "--allow", "mymodels", "--factory", factory, "--data", "mymodels:data",
                         "--param", "muP", *FAST], capsys, monkeypatch)
    line = _one_error(err)
    assert rc == 2 and names in line and exc in line, err
    sys.modules.pop("mymodels", None)


def test_a_module_in_the_current_folder_is_found_alone_without_pythonpath(tmp_path):
    """Item 2: `--allow mymodels` finds ./mymodels.py with PYTHONPATH naming only limits, imports nothing else
    from the folder (a sibling that would write a marker), and leaves the folder off sys.path; a package
    (mypkg/__init__.py, mypkg/nets.py) works the same way."""
    work, bin_ = tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    bin_.mkdir()
    (work / "mymodels.py").write_text(_FACTORY.format(body="pass", data="pass"))
    (work / "sibling.py").write_text(f"open({str(tmp_path / 'MARKER')!r}, 'w')\n")
    (work / "mypkg").mkdir()
    (work / "mypkg" / "__init__.py").write_text("")
    (work / "mypkg" / "nets.py").write_text(_FACTORY.format(body="pass", data="pass"))
    # run as the `limits` console script is: sys.path[0] is the script's folder, not the current one
    (bin_ / "limits_cmd.py").write_text(
        "import os, sys\nfrom limits.cli import main\nrc = main(sys.argv[1:])\n"
        "print('CWD_ON_PATH', any(os.path.abspath(p or '.') == os.getcwd() for p in sys.path))\n"
        "print('SIBLING', 'sibling' in sys.modules)\nsys.exit(rc)\n")
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", ""), "LIMITS_PROGRESS": "0",
           "OMP_NUM_THREADS": "1"}
    for factory, allow in (("mymodels:mlp", "mymodels"), ("mypkg.nets:mlp", "mypkg")):
        p = subprocess.run([sys.executable, str(bin_ / "limits_cmd.py"), "coord-check", "--factory", factory,
                            "--allow", allow, "--data", factory.replace(":mlp", ":data"), "--param", "muP", *FAST],
                           cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode in (0, 1), p.stderr
        assert "CWD_ON_PATH False" in p.stdout and "SIBLING False" in p.stdout, p.stdout
        assert not (tmp_path / "MARKER").exists()
