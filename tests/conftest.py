"""Collection rule of the default run: the optional extras' tests (tests/torch_bridge, tests/zoo) run only when
asked for by path — ``python -m pytest tests/torch_bridge`` (README "PyTorch networks"), the second command of
``.ci/run``, and ``python -m pytest tests/zoo`` (the ``zoo`` extra, its own environment) — so the README's test
command tests the core alone, whether or not torch or transformers happen to be installed."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

# Progress lines (stderr) come on the clock: the first once a report has been open LIMITS_PROGRESS_FIRST seconds
# (limits.progress; 2 by default). Tests asserting on stderr must not see one by chance on a loaded machine, so the
# session waits ten minutes for a first line; the tests of progress lines set their own (tests/test_progress*.py).
os.environ.setdefault("LIMITS_PROGRESS_FIRST", "600")
# Cores (limits.parallel): the suite runs on xdist workers, so each test uses one thread unless it asks for more
# (tests/test_parallel.py passes n_jobs explicitly); subprocesses (the CLI tests) inherit it.
os.environ.setdefault("LIMITS_NUM_THREADS", "1")

TORCH_TESTS = Path(__file__).resolve().parent / "torch_bridge"
ZOO_TESTS = Path(__file__).resolve().parent / "zoo"
OPTIONAL = (TORCH_TESTS, ZOO_TESTS)


def _asks_for(config, folder) -> bool:
    for arg in config.args:
        p = Path(str(arg).split("::", 1)[0])
        p = (Path(config.invocation_params.dir) / p).resolve() if not p.is_absolute() else p.resolve()
        if p == folder or folder in p.parents:
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    if collection_path in OPTIONAL and not _asks_for(config, collection_path):
        return True
    return None


def _wait_until(condition, what, proc=None, limit=900.0, poll=0.02):
    """Wait for a state (a file, a count), not for a time: poll ``condition()`` until it is true. Fails naming
    ``what`` when the subprocess ``proc`` ended first (with its stderr, when piped) or after ``limit`` seconds —
    a bound for a machine loaded many times over, never reached when the state comes."""
    deadline = time.monotonic() + limit
    while not condition():
        if proc is not None and proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr is not None else ""
            pytest.fail(f"waiting for {what}: the process ended first (exit {proc.returncode}) {err[-2000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"waiting for {what}: not reached within {limit:.0f} s")
        time.sleep(poll)


@pytest.fixture
def wait_until():
    """:func:`_wait_until`: tests of Ctrl-C, kills and locks wait on states, so they hold on a loaded machine."""
    return _wait_until


@pytest.fixture
def one_thread():
    """torch on one thread during the test (timings and float reductions as on a busy CI core); torch is imported
    inside, so collecting without torch still works (used by tests/torch_bridge and tests/zoo)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
