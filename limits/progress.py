"""Progress reports for long work: a tqdm bar on a terminal, otherwise one plain line on stderr every
``LIMITS_PROGRESS_INTERVAL`` seconds (default 30) with the count, elapsed time and ETA — so logs of
batch jobs and CI runs show that work is moving. ``LIMITS_PROGRESS=0`` (or ``disable=True``) silences
both; ``LIMITS_PROGRESS=1`` forces the bar.

Every step (iteration or ``update``) is also an interruption point: a Ctrl-C that Python swallowed
elsewhere stops the work there (:mod:`limits.interrupts`)."""
from __future__ import annotations

import functools
import os
import sys
import time

from .interrupts import raise_if_interrupted


def format_seconds(s):
    """A duration for people: ``42s``, ``3.5min``, ``2.1h``."""
    s = max(0.0, float(s))
    return f"{s:.0f}s" if s < 120 else (f"{s / 60:.1f}min" if s < 7200 else f"{s / 3600:.1f}h")


class LineProgress:
    """tqdm-like object (``update``, ``close``, iteration, context manager) printing a line on ``stream``
    at most every ``interval`` seconds, and a final line if it printed any."""

    def __init__(self, iterable=None, total=None, desc=None, interval=None, stream=None, initial=0, **_):
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total, self.n, self.desc = total, int(initial), desc or "progress"
        self.interval = float(os.environ.get("LIMITS_PROGRESS_INTERVAL", 30) if interval is None else interval)
        self.stream = stream or sys.stderr
        self.t0 = self.t_last = time.perf_counter()
        self.printed = False

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def set_postfix(self, *args, **kwargs):
        return None

    def set_description(self, desc=None, refresh=True):
        self.desc = desc or self.desc

    def _line(self):
        self.printed, self.n_printed = True, self.n
        self.t_last = now = time.perf_counter()
        el = now - self.t0
        if self.total:
            eta = f", ETA {format_seconds(el / self.n * (self.total - self.n))}" if 0 < self.n < self.total else ""
            msg = f"{self.desc}: {self.n}/{self.total} ({100 * self.n / self.total:.0f}%), {format_seconds(el)} elapsed{eta}"
        else:
            msg = f"{self.desc}: {self.n} done, {format_seconds(el)} elapsed"
        try:
            print(msg, file=self.stream, flush=True)
        except (OSError, ValueError):          # closed or broken stream: stay quiet
            pass

    def update(self, n=1):
        raise_if_interrupted()
        self.n += n
        if time.perf_counter() - self.t_last >= self.interval:
            self._line()

    def refresh(self):
        return None

    def close(self):
        if self.printed and self.n_printed != self.n:      # a final line, unless the last one already shows it
            self._line()
        self.printed = False


def _checked(iterable):
    """``iterable``, with an interruption point before each item."""
    for item in iterable:
        raise_if_interrupted()
        yield item


@functools.lru_cache(maxsize=None)
def _tqdm_class():
    """tqdm whose ``update`` is an interruption point (its iteration is wrapped by :func:`_checked`)."""
    from tqdm import tqdm          # plain text bar (tqdm.auto needs ipywidgets inside Jupyter)

    class CheckedTqdm(tqdm):
        def update(self, n=1):
            raise_if_interrupted()
            return super().update(n)

    return CheckedTqdm


def progress(iterable=None, total=None, desc=None, disable=None, **kwargs):
    """A tqdm bar on a terminal; a periodic :class:`LineProgress` line otherwise. ``disable=True`` or
    ``LIMITS_PROGRESS=0`` silences it; ``disable=False`` or ``LIMITS_PROGRESS=1`` forces the bar."""
    if iterable is not None:
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        iterable = _checked(iterable)
    env = os.environ.get("LIMITS_PROGRESS")
    if disable is None:
        if env == "0":
            disable = True
        elif env == "1" or sys.stderr.isatty():
            disable = False
        else:
            return LineProgress(iterable, total=total, desc=desc, **kwargs)
    return _tqdm_class()(iterable, total=total, desc=desc, disable=disable, leave=False, **kwargs)


LONG_RECURSION = 20_000      # layers from which a recursion reports progress (a few seconds of work or more)


def layer_range(L, desc="layers", every=1000):
    """``range(1, L + 1)`` for a layer recursion; from :data:`LONG_RECURSION` layers on, with a progress
    report (and an interruption point) every ``every`` layers — negligible per-layer overhead, so that a
    run at depth 10⁹ shows its ETA instead of running silently."""
    if L < LONG_RECURSION:
        return range(1, L + 1)
    return _reported_layers(int(L), desc, int(every))


def _reported_layers(L, desc, every):
    bar = progress(total=L, desc=desc)
    try:
        for start in range(1, L + 1, every):
            stop = min(L + 1, start + every)
            yield from range(start, stop)
            bar.update(stop - start)
    finally:
        bar.close()
