"""Every code block of README.md and of docs/ runs in a test exactly as written (tests/doc_examples.py), and the figures
the README shows are their committed data.

Each block is run by the page test below, or by the test named in DELEGATED (which also checks what the block computes,
or needs torch: tests/torch_bridge), or is listed in NOT_RUN with the reason no test can run it (a package install, the
test suite itself, the benchmarks). A new block in none of these fails ``test_every_block_is_run_by_a_test``.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import doc_examples as D

ROOT = D.ROOT
TORCH_PAGE = "docs/torch.rst"
README_CNN = "README.md § A layer composition: import numpy as np, limits"

# block key -> the test that runs it (and checks more than its output)
DELEGATED = {
    "README.md § The theory of your own network, and its check: import numpy as np, limits":
        "tests/model/test_readme_workflow.py::test_python_workflow_runs",
    README_CNN: "tests/test_readme_architectures.py::test_cnn_example_runs_and_is_the_committed_figure",
    "README.md § Your own PyTorch module: μP, coordinate check, transfer: mynets.py":
        "tests/torch_bridge/test_torch_readme.py::test_your_own_module_in_the_current_folder",
    "README.md § Your own PyTorch module: μP, coordinate check, transfer: limits coord-check --factory mynets:mlp "
    "--allow mynets --param muP --widths 64 128 256 512":
        "tests/torch_bridge/test_torch_readme.py::test_your_own_module_in_the_current_folder",
    "docs/workflow.rst § On the command line: limits model --resnet --d-in 10 --depth 20 --activation erf --sigma-w2 "
    "1.2 --sigma-b2 0.2 --rho 0.3 --out m.toml": "tests/model/test_readme_workflow.py::test_shell_workflow_runs",
    "docs/zoo.rst § Model zoos: μP on Hugging Face transformers models, checked: import numpy as np":
        "tests/zoo/test_zoo_page.py::test_the_zoo_page_example_runs_as_written",
    "docs/architecture.rst § Architecture: $ python -m limits.devtools.importgraph --out docs/_static/architecture.txt":
        "tests/test_architecture.py (the committed diagram equals the one generated from the source)",
}
# every block of docs/torch.rst: tests/torch_bridge/test_torch_readme.py::test_torch_page_runs_as_written

# block key -> why no test runs it
NOT_RUN = {
    "README.md § Quick start: python -m pip install -e . && limits":
        "a package install; the main job `limits` is run by tests/test_clean_tree.py",
    'README.md § Quick start: python -m pip install -e ".[test]" && python -m pytest':
        "CI's command, run verbatim by .ci/run (tests/test_readme.py checks that it is CI's)",
    "docs/install.rst § Install, test, build the docs: python -m pip install -e . && limits":
        "a package install; the main job `limits` is run by tests/test_clean_tree.py",
    'docs/install.rst § Install, test, build the docs: python -m pip install -e ".[test]" && python -m pytest':
        "CI's command, run verbatim by .ci/run",
    'docs/install.rst § Optional extras: python -m pip install -e ".[test,torch]" && python -m pytest tests/torch_bridge':
        "CI's second stage, run by .ci/run (tests/test_doc_examples.py checks that it is CI's)",
    'docs/install.rst § Optional extras: python -m pip install -e ".[test,zoo]" && python -m pytest tests/zoo':
        "CI's third stage, run by .ci/run (tests/test_doc_examples.py checks that it is CI's)",
    'docs/torch.rst § PyTorch networks: μP, coordinate checks, μTransfer: python -m pip install -e ".[test,torch]" && '
    'python -m pytest tests/torch_bridge': "CI's second stage, run by .ci/run",
    'docs/install.rst § Building this site: python -m pip install -e ".[docs]" && python -m sphinx -W -b html docs '
    'docs/_build/html': "a package install; the build with -W is tests/test_docs.py::test_sphinx_site_builds_without_warnings",
    "docs/performance.rst § Performance targets and benchmarks: python benchmarks/run.py --quick      # small sizes":
        "the benchmarks themselves (minutes to hours, a peer environment); their committed data are checked by "
        "tests/test_readme_benchmarks.py",
    'docs/zoo.rst § Model zoos: μP on Hugging Face transformers models, checked: t = lt.transfer(f, "muP", '
    'widths=(32, 64, 128), lrs=2.0 ** np.arange(-10, -2), data=(X, Y), steps=40, seeds=6,':
        "the transfer study (CPU-minutes), stored by benchmarks/zoo_study.py transfer and checked against the page "
        "by tests/test_zoo_docs.py",
    "docs/testing.rst § CI runs as a newcomer: .ci/run                 # every stage, then the summary":
        "CI itself (fresh virtual environments, the whole suite); its stages and --dry-run are tested by "
        "tests/test_ci_run.py",
}
CI_COMMANDS = {k for k, v in NOT_RUN.items() if v.startswith("CI's")}
# blocks that read the checkout itself (nothing is written): run from the repository root
IN_CHECKOUT = {"docs/reproducing.rst § Reproducing the seed papers: python -m limits.gallery.measurements --check "
               "docs/reproducing.rst"}
SLOW_PAGES = {"docs/sweep.rst"}


def _all_blocks():
    return [b for p in D.pages() for b in D.blocks(p) if b.lang not in D.NOT_CODE]


def test_every_block_is_run_by_a_test():
    keys = [b.key for b in _all_blocks()]
    assert len(keys) == len(set(keys)), "two blocks with the same key: " + str(sorted(k for k in keys if keys.count(k) > 1))
    stale = (set(DELEGATED) | set(NOT_RUN) | IN_CHECKOUT) - set(keys)
    assert not stale, f"entries for blocks that no longer exist: {sorted(stale)}"
    for key, test in DELEGATED.items():
        path, _, name = test.partition("::")
        text = (ROOT / path.split(" ")[0]).read_text()
        assert not name or f"def {name.split(' ')[0]}(" in text, f"{key}: {test} does not exist"
    langs = {b.lang for b in _all_blocks()}
    assert langs <= {"python", "bash", "console", "toml"}, langs
    assert sum(1 for b in _all_blocks() if b.page == TORCH_PAGE) >= 8


def _ci_commands():
    """The commands .ci/run runs: its text, and what ``.ci/run --dry-run`` prints when it can."""
    ci = (ROOT / ".ci" / "run").read_text()
    cmds = {ln.strip() for ln in ci.splitlines()}
    if "--dry-run" in ci:
        out = subprocess.run(["bash", str(ROOT / ".ci" / "run"), "--dry-run"], capture_output=True, text=True,
                             timeout=60, cwd=ROOT).stdout
        cmds |= {ln.split("run:", 1)[1].strip() for ln in out.splitlines() if ln.strip().startswith("run:")}
    return cmds, "--dry-run" in ci


def test_ci_commands_in_the_docs_are_ci_s():
    cmds, staged = _ci_commands()
    for b in _all_blocks():
        if b.key in CI_COMMANDS:
            line = b.code.strip()
            if line not in cmds and not staged:
                pytest.skip(f"this checkout's .ci/run predates its fresh-environment stages ({line!r} is not in it)")
            assert line in cmds, (b.key, sorted(cmds))


def _page_params():
    out = []
    for p in D.pages():
        blocks = [b for b in D.blocks(p) if b.lang not in D.NOT_CODE and b.key not in DELEGATED and b.key not in NOT_RUN]
        if not blocks or p == TORCH_PAGE:
            continue
        out.append(pytest.param(p, marks=[pytest.mark.slow] if p in SLOW_PAGES else []))
    return out


@pytest.mark.parametrize("page", _page_params())
def test_page_runs_as_written(page, tmp_path):
    """The page's blocks in order, in a fresh folder; each output as the page shows it."""
    skip = set(DELEGATED) | set(NOT_RUN) | IN_CHECKOUT
    done = D.run_page(page, tmp_path, skip=skip, timeout=900)
    for b in D.blocks(page):
        if b.key in IN_CHECKOUT:
            D.check_output(b, D.run_shell(b.code, ROOT))
            done.append(b)
    assert done


def test_runner_compares_outputs_and_exit_statuses(tmp_path):
    """The runner is not vacuous: a changed output, an unexpected exit status and a missing expected one fail."""
    page = "x.md"
    text = ("# T\n\n```python\nprint('took 1.25 s, 3 points')\n```\n\n```text\ntook 9 s, 3 points\n```\n\n"
            "```python\nprint(2)\n```\n\n```text\n3\n```\n")
    b1, b2 = D.blocks(page, text)
    assert b1.output.strip() == "took 9 s, 3 points" and b1.key == "x.md § T: print('took 1.25 s, 3 points')"
    D.run_block(b1, tmp_path, {})                                 # durations are masked
    with pytest.raises(AssertionError, match="output differs"):
        D.run_block(b2, tmp_path, {})
    assert D.run_shell("python -c 'import sys; sys.exit(1)'   # exit 1\necho ok", tmp_path).strip() == "ok"
    with pytest.raises(AssertionError, match="exit statuses"):
        D.run_shell("python -c 'import sys; sys.exit(1)'", tmp_path)
    with pytest.raises(AssertionError, match="exit statuses"):
        D.run_shell("true   # exit 1", tmp_path)
    rst = ".. code-block:: python\n   :caption: m.py\n\n   X = 1\n\n.. code-block:: bash\n\n   echo hi\n\n" \
          ".. code-block:: text\n\n   hi\n"
    f, sh = D.blocks("p.rst", rst)
    assert (f.file, f.code, sh.output.strip()) == ("m.py", "X = 1\n", "hi")
    import matplotlib.image as mpimg                      # the image comparison sees a changed panel
    png = ROOT / "figures" / "layers_cnn_digits_check.png"
    img = mpimg.imread(str(png))
    img[: img.shape[0] // 3, : img.shape[1] // 3, :3] = 1.0 - img[: img.shape[0] // 3, : img.shape[1] // 3, :3]
    mpimg.imsave(str(tmp_path / "changed.png"), img)
    assert images_match(png, png) and not images_match(tmp_path / "changed.png", png)


# ------------------------------------------------------------------------------------- the README's figures
def _image(path):
    import matplotlib.image as mpimg

    return mpimg.imread(str(path))


def images_match(new, committed, tol=0.02):
    """Same size, and the mean absolute pixel difference below ``tol`` (fonts render a few pixels differently on
    other machines)."""
    a, b = _image(new), _image(committed)
    return a.shape == b.shape and float(np.mean(np.abs(a - b))) < tol


def _shown_figures():
    """(page, figure name, paper size?) of every gallery figure README.md and the docs pages show (the gallery page
    itself is generated from the figures' data when the site is built)."""
    out = []
    for page in ["README.md", *D.pages()[1:]]:
        if page == "docs/gallery.rst":
            continue
        for m in re.finditer(r"figures/(full/)?([A-Za-z0-9_]+)\.png", (ROOT / page).read_text()):
            out.append((page, m.group(2), bool(m.group(1))))
    return sorted(set(out))


def test_shown_gallery_figures_are_drawn_from_their_committed_data(tmp_path):
    """Each gallery figure the README or a docs page shows: `limits figure NAME` (`--quick` for the small variant), run in
    a folder holding only its committed data, reuses those data (nothing recomputed) and draws the committed image."""
    shown = _shown_figures()
    names = {n for _, n, _ in shown}
    assert {"layers_cnn_digits_check", "torch_transfer_digits", "layers_cnn_digits_full_set"} <= names
    readme = (ROOT / "README.md").read_text()
    for page, name, full in shown:
        if page == "README.md":
            assert f"`limits figure {name} --quick`" in readme, name
        sub = "full" if full else ""
        figs = tmp_path / f"{name}{'-full' if full else ''}" / "figures" / sub
        figs.mkdir(parents=True, exist_ok=True)
        for ext in ("npz", "json"):
            shutil.copy(ROOT / "figures" / sub / f"{name}.{ext}", figs)
        before = (figs / f"{name}.npz").read_bytes()
        D.run_shell(f"limits figure {name}" + ("" if full else " --quick"), figs.parent.parent if full else figs.parent)
        assert (figs / f"{name}.npz").read_bytes() == before, f"{name}: the data were recomputed"
        assert images_match(figs / f"{name}.png", ROOT / "figures" / sub / f"{name}.png"), name


def test_the_validation_figure_of_finite_width_rst_is_its_record(tmp_path):
    """docs/theory/finite_width.rst's figure, drawn again from the committed record by the command the page names."""
    rst = (ROOT / "docs/theory/finite_width.rst").read_text()
    assert "``--figure docs/_static/finite_width_residual.png``" in rst
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/finite_width_residual_validation.py"), "--figure",
                           str(tmp_path / "f.png")], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=D._shims(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert images_match(tmp_path / "f.png", ROOT / "docs/_static/finite_width_residual.png")


def test_readme_links_resolve():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#\s]+)\)", readme)
    assert links
    missing = [ln for ln in links if not ln.startswith("http") and not (ROOT / ln).exists()]
    assert not missing, missing
    assert len(readme.splitlines()) <= 300
