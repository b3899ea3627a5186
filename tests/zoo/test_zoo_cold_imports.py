"""The core and the ``torch`` extra never import transformers (the ``zoo`` extra's library), even where it is
installed: importing every module of limits.torch, the command line, a parameterisation and a coordinate check
of a torch module, and importing limits.torch.zoo itself load no transformers module; building a zoo model does."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules(code):
    code += "\nimport sys\nprint(sorted(m for m in sys.modules if m == 'transformers' or m.startswith('transformers.')))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "", "HF_HUB_OFFLINE": "1"})
    return out.stdout.strip().splitlines()[-1]


def test_core_torch_extra_and_the_zoo_package_import_no_transformers():
    code = ("import importlib, pkgutil, limits, limits.cli, limits.torch\n"
            "for m in pkgutil.walk_packages(limits.torch.__path__, 'limits.torch.'):\n"
            "    importlib.import_module(m.name)\n"
            "import limits.torch.zoo, limits.torch.zoo.families, limits.torch.zoo.tasks, limits.torch.zoo.factories\n"
            "from limits.torch import demos, parameterise, coord_check\n"
            "P = parameterise(demos.mlp, 'muP', widths=(16, 32))\n"
            "r = coord_check(P, (16, 32, 64), demos.mlp_data(), steps=1, seeds=2)\n"
            "limits.cli.main(['coord-check', '--help']) if False else None\n")
    assert _modules(code) == "[]"


def test_building_a_zoo_model_imports_transformers():
    code = "from limits.torch.zoo import families as F\nF.factory('gpt2')(32)\n"
    assert "'transformers'" in _modules(code)
