"""Progress of the torch commands (``coord-check``, ``transfer``): a first line at once saying what starts (printed by
the command before torch is imported, so it comes within a second or two), then :func:`limits.progress.progress`
over the training runs — a tqdm bar on a terminal, otherwise a line every ``INTERVAL`` seconds (or
``$LIMITS_PROGRESS_INTERVAL``) with the count and ETA — and a line per later stage (the transfer study's
calibration). ``progress=False`` or ``LIMITS_PROGRESS=0`` silences all of it. No torch here."""
from __future__ import annotations

import os
import sys

INTERVAL = 10.0          # seconds between plain lines when output is not a terminal


def enabled(progress=None) -> bool:
    """Whether to report: ``progress`` if given, else unless ``LIMITS_PROGRESS=0``."""
    if progress is not None:
        return bool(progress)
    return os.environ.get("LIMITS_PROGRESS") != "0"


def announce(text, progress=None) -> None:
    """One line on stderr (flushed) saying what starts now."""
    if enabled(progress):
        try:
            print(text, file=sys.stderr, flush=True)
        except (OSError, ValueError):            # closed or broken stream: stay quiet
            pass


def runs(total, desc, progress=None):
    """A progress object over ``total`` runs (``update(1)`` after each, ``set_description``, ``close``)."""
    from ..progress import LineProgress, progress as _progress

    bar = _progress(total=total, desc=desc, disable=None if progress is None else not progress)
    if isinstance(bar, LineProgress):
        if "LIMITS_PROGRESS_INTERVAL" not in os.environ:
            bar.interval = INTERVAL
        announce(f"{desc}: {total} training runs started; a line every {bar.interval:g} s", progress)
    return bar


def each_seed(bar, width, seeds):
    """``range(seeds)`` at one width, the bar advanced after each run."""
    bar.set_description(f"coord-check width {width}")
    for s in range(seeds):
        yield s
        bar.update(1)


def sizes_text(sizes) -> str:
    """``64…512`` (or the single size)."""
    s = sorted(int(x) for x in sizes)
    return str(s[0]) if len(s) == 1 else f"{s[0]}…{s[-1]}"


__all__ = ["announce", "runs", "each_seed", "enabled", "sizes_text", "INTERVAL"]
