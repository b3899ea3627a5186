"""Progress bars for long work (tqdm; silent when not attached to a terminal or when disabled)."""
from __future__ import annotations

import os
import sys


def progress(iterable=None, total=None, desc=None, disable=None, **kwargs):
    """``tqdm`` wrapper. Disabled automatically in CI/non-TTY runs or with ``LIMITS_PROGRESS=0``."""
    from tqdm import tqdm          # plain text bar (tqdm.auto needs ipywidgets inside Jupyter)

    if disable is None:
        env = os.environ.get("LIMITS_PROGRESS")
        if env is not None:
            disable = env == "0"
        else:
            disable = not sys.stderr.isatty()
    return tqdm(iterable, total=total, desc=desc, disable=disable, leave=False, **kwargs)
