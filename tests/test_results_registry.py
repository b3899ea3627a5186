"""Result types named in files resolve only through ``limits.results.RESULT_MODULES``: the list equals the modules
that define Result types, a nested result loads in a fresh process (the gallery's stored check results did not,
unless a test had imported their module first), and a file naming any other module imports nothing."""
import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import limits
from limits.results import RESULT_MODULES, _REGISTRY, load_result, result_class

ROOT = Path(__file__).resolve().parents[1]


def test_the_list_is_the_modules_that_define_results():
    """Every module is imported; one that cannot be only because torch (the optional extra) is missing is left out
    of both sides — decided per module by the import itself, not by its name (``limits.torch.depth_result`` and
    ``transfer_result`` define results without importing torch, so they count with or without it)."""
    needs_torch = set()
    for m in pkgutil.walk_packages(limits.__path__, "limits.", onerror=lambda name: None):
        if m.name.endswith("__main__") or m.name.startswith("limits.devtools"):
            continue
        try:
            importlib.import_module(m.name)
        except ImportError as exc:
            if (exc.name or "").split(".")[0] != "torch":
                raise
            needs_torch.add(m.name)
    assert all(m.startswith("limits.torch.") for m in needs_torch), needs_torch   # torch only behind the extra
    defined = {k.rsplit(".", 1)[0] for k in _REGISTRY if k.startswith("limits.")}
    assert defined == set(RESULT_MODULES) - needs_torch
    assert {"limits.torch.depth_result", "limits.torch.transfer_result"} <= defined


def test_a_stored_check_result_loads_in_a_fresh_process():
    code = ("from limits.gallery.measurements import load_data, DEFAULT_OUTDIR\n"
            "p = load_data('layers_cnn_digits_check', DEFAULT_OUTDIR)\n"
            "print(type(p['data']['check']).__name__ if 'check' in p['data'] else sorted(p['data']))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize("name", ["limits.__main__.Main", "limits.cli.Result", "os.System", "limits.Result",
                                  "limits.cli.__init__.X", ["a"], "x" * 5000])
def test_a_file_naming_another_module_imports_nothing(tmp_path, name):
    (tmp_path / "r.json").write_text(json.dumps({"type": name, "fields": {}}))
    np.savez(tmp_path / "r.npz", dummy=np.zeros(1))
    before = set(sys.modules)
    with pytest.raises(ValueError) as e:
        load_result(tmp_path / "r")
    assert set(sys.modules) - before == set()
    assert len(str(e.value)) < 600


def test_a_file_naming_another_module_imports_nothing_in_a_fresh_process(tmp_path):
    """The same in a new interpreter, where nothing a load could touch (a codec of the zip reader, say) has been
    imported yet by earlier tests: the refusal may not depend on test order."""
    code = ("import json, sys\nimport numpy as np\nfrom limits.results import load_result\n"
            "import limits.readfile  # the loader's own reader; anything else a refusal imports is a leak\n"
            "names = json.loads(sys.argv[2])\n"
            "for i, name in enumerate(names):\n"
            "    d = f'{sys.argv[1]}/r{i}'\n"
            "    open(d + '.json', 'w').write(json.dumps({'type': name, 'fields': {}}))\n"
            "    np.savez(d + '.npz', dummy=np.zeros(1))\n"
            "    before = set(sys.modules)\n"
            "    try:\n        load_result(d)\n    except ValueError:\n        pass\n"
            "    else:\n        raise SystemExit(f'{name!r} loaded')\n"
            "    new = set(sys.modules) - before\n"
            "    assert not new, (name, sorted(new))\n")
    names = ["limits.__main__.Main", "limits.cli.Result", "os.System", "limits.Result", "limits.cli.__init__.X"]
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path), json.dumps(names)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_nested_result_of_an_unlisted_type_is_refused():
    with pytest.raises(ValueError, match="unknown result type"):
        result_class("limits.cli.Anything", "a nested result")
