"""The zoo extra's tests (``python -m pytest tests/zoo`` in an environment with ``.[test,zoo]``): models are
built from configs, nothing is downloaded (HF_HUB_OFFLINE)."""
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

transformers = pytest.importorskip("transformers")
