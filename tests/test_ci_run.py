""".ci/run is CI as a newcomer: each stage makes a fresh virtual environment and runs the README's test command in it
verbatim (the torch extra's tests in a second one, the zoo extra's — Hugging Face transformers — in a third). Read from ``.ci/run --dry-run``, which prints each stage's
environment and the very command string the real run executes."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci" / "run"
README_TEST = 'python -m pip install -e ".[test]" && python -m pytest'


def _stages():
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    proc = subprocess.run(["bash", str(CI), "--dry-run"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    stages = re.findall(r"^stage (\S+)\n  venv: (.*)\n  run: (.*)$", proc.stdout, re.M)
    assert stages and len(stages) == proc.stdout.count("stage "), proc.stdout
    return {name: (venv, run) for name, venv, run in stages}


def test_the_readme_test_command_is_the_first_stage_verbatim():
    blocks = re.findall(r"```(?:bash|sh|console)?\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert README_TEST in {ln.strip() for b in blocks for ln in b.splitlines()}
    stages = _stages()
    assert next(iter(stages)) == "default" and stages["default"][1] == README_TEST
    assert stages["torch"][1] == 'python -m pip install -e ".[test,torch]" && python -m pytest tests/torch_bridge'


def test_the_zoo_extra_runs_after_the_torch_tests_in_its_own_stage():
    stages = _stages()
    names = list(stages)
    assert names.index("zoo") > names.index("torch")
    assert stages["zoo"][1] == 'python -m pip install -e ".[test,zoo]" && python -m pytest tests/zoo'


def test_every_stage_has_its_own_fresh_environment():
    stages = _stages()
    venvs = [venv for venv, _ in stages.values()]
    assert all(re.fullmatch(r"\S+ -m venv \S+", v) for v in venvs), venvs      # no --system-site-packages
    assert len({v.split()[-1] for v in venvs}) == len(venvs)
    text = CI.read_text()
    assert "system-site-packages" not in text
    # the printed command is the one executed, in the activated environment, after checking it is empty
    assert text.count('bash -c "$cmd"') == 1 and '. "$venv/bin/activate"' in text
    assert "the fresh environment is not empty" in text


def test_the_torch_extra_is_pinned():
    assert re.search(r"^torch =\n\s+torch==2\.13\.0$", (ROOT / "setup.cfg").read_text(), re.M)


def test_the_zoo_extra_is_pinned_to_the_torch_extra():
    assert re.search(r"^zoo =\n\s+torch==2\.13\.0\n\s+transformers==[0-9.]+$", (ROOT / "setup.cfg").read_text(), re.M)


def test_the_test_extras_are_installed():
    """The README's test command installs ``.[test]``: every package of that extra is present here, so no test is
    skipped for want of one (the tests' ``importorskip`` calls only serve runs without the extra; under CI a skip
    would hide a dependency the extra forgot)."""
    import importlib.metadata
    import importlib.util

    cfg = (ROOT / "setup.cfg").read_text()
    block = cfg.split("[options.extras_require]", 1)[1].split("\ntest =", 1)[1]
    reqs = []
    for line in block.splitlines()[1:]:
        if not line.startswith((" ", "\t")) or not line.strip():
            break
        reqs.append(line.strip())
    assert len(reqs) >= 5, reqs
    for req in reqs:
        name = re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0]
        importlib.metadata.version(name)                  # raises PackageNotFoundError when missing
    for module in ("distributed", "sphinx", "numpydoc", "nbformat", "nbclient", "jupytext", "ipykernel", "xdist"):
        assert importlib.util.find_spec(module) is not None, module
