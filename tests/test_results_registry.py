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
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    for m in pkgutil.walk_packages(limits.__path__, "limits."):
        if m.name.endswith("__main__") or m.name.startswith("limits.devtools"):
            continue
        if m.name.startswith("limits.torch") and not have_torch:
            continue
        importlib.import_module(m.name)
    defined = {k.rsplit(".", 1)[0] for k in _REGISTRY if k.startswith("limits.")}
    listed = set(RESULT_MODULES) if have_torch else {m for m in RESULT_MODULES if not m.startswith("limits.torch")}
    assert defined == listed


def test_a_stored_check_result_loads_in_a_fresh_process():
    code = ("from limits.gallery.measurements import load_data, DEFAULT_OUTDIR\n"
            "p = load_data('layers_cnn_digits_check', DEFAULT_OUTDIR)\n"
            "print(type(p['data']['check']).__name__ if 'check' in p['data'] else sorted(p['data']))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
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


def test_a_nested_result_of_an_unlisted_type_is_refused():
    with pytest.raises(ValueError, match="unknown result type"):
        result_class("limits.cli.Anything", "a nested result")
