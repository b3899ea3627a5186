"""Collection rule of the default run: the optional extra's tests (tests/torch_bridge) run only when asked for by
path — ``python -m pytest tests/torch_bridge`` (README "PyTorch networks"), the second command of ``.ci/run`` —
so the README's test command tests the core alone, whether or not torch happens to be installed."""
from __future__ import annotations

from pathlib import Path

TORCH_TESTS = Path(__file__).resolve().parent / "torch_bridge"


def _asks_for_torch_tests(config) -> bool:
    for arg in config.args:
        p = Path(str(arg).split("::", 1)[0])
        p = (Path(config.invocation_params.dir) / p).resolve() if not p.is_absolute() else p.resolve()
        if p == TORCH_TESTS or TORCH_TESTS in p.parents:
            return True
    return False


def pytest_ignore_collect(collection_path, config):
    if collection_path == TORCH_TESTS and not _asks_for_torch_tests(config):
        return True
    return None
