"""Progress reports for long work: a tqdm bar on a terminal, otherwise plain lines on stderr with the count,
elapsed time and ETA — so logs of batch jobs and CI runs show that work is moving.

When the first line comes: ``LIMITS_PROGRESS_FIRST`` seconds (default 2) after a report opened — however many
reports opened and closed inside it since, and also while a single step takes minutes — the innermost open one
prints a line; then one comes every ``LIMITS_PROGRESS_INTERVAL`` seconds (default 30), and a final line from a
report that printed any. A terminal bar shows at once and its elapsed time keeps ticking. A long step without
a count is a :func:`stage` (``"check: theory (NNGP of 6 inputs): 12s elapsed"``); the command line runs every
command inside one, so each says within seconds that it is working. Of reports opened inside one another
only the innermost speaks on time (the others still print when they advance).
``LIMITS_PROGRESS=0`` (or ``disable=True``) silences all of it; ``LIMITS_PROGRESS=1`` forces the bar.

One daemon thread (:class:`_Heartbeat`) wakes every quarter second while reports are open, and ends when
none is. Every step (iteration or ``update``) is also an interruption point: a Ctrl-C that Python swallowed
elsewhere stops the work there (:mod:`limits.interrupts`)."""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
import weakref

from .interrupts import raise_if_interrupted

TICK = 0.25                  # seconds between the heartbeat's looks at the open reports


def first_line_seconds() -> float:
    """``$LIMITS_PROGRESS_FIRST`` (default 2): how long a report stays quiet before its first line."""
    try:
        return max(0.0, float(os.environ.get("LIMITS_PROGRESS_FIRST", 2.0)))
    except ValueError:
        return 2.0


class _Heartbeat:
    """The open reports (weakly: one dropped without ``close`` goes quiet when it is collected), in the order
    they were opened; a daemon thread calls ``beat(now, due)`` of the innermost — the last opened that is still
    open — every :data:`TICK` seconds, and ends when none is open."""

    def __init__(self):
        self._open = []
        self._lock = threading.RLock()      # a report collected while it is held closes itself: re-entered
        self._thread = None
        self.last_line = float("-inf")      # when any report last printed a line

    def note_line(self):
        self.last_line = time.perf_counter()

    def due(self, root, top, now) -> bool:
        """Whether the innermost report ``top`` should speak now: the first line ``first`` seconds after the
        outermost open report ``root`` started (however many reports opened and closed inside it since), then
        ``interval`` seconds after the last line any report printed."""
        if self.last_line < root.t0:
            return now - root.t0 >= root.first
        return now - self.last_line >= top.interval

    def add(self, report):
        with self._lock:
            self._open.append(weakref.ref(report))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="limits-progress", daemon=True)
                self._thread.start()

    def remove(self, report):
        with self._lock:
            self._open = [r for r in self._open if r() is not None and r() is not report]

    def innermost(self):
        with self._lock:
            self._open = [r for r in self._open if r() is not None]
            return self._open[-1]() if self._open else None

    def _run(self):
        while True:
            time.sleep(TICK)
            with self._lock:
                self._open = [r for r in self._open if r() is not None]
                if not self._open:
                    self._thread = None
                    return
                root, top = self._open[0](), self._open[-1]()
            try:
                if root is not None and top is not None:
                    now = time.perf_counter()
                    top.beat(now, self.due(root, top, now))
            except Exception:           # a report must never take the work down (a closed stream, …)
                pass
            del root, top


HEARTBEAT = _Heartbeat()


def _forget_in_child():
    """A forked child starts with no heartbeat (its thread was not copied; its lock might have been held)."""
    HEARTBEAT.__init__()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def format_seconds(s):
    """A duration for people: ``42s``, ``3.5min``, ``2.1h``."""
    s = max(0.0, float(s))
    return f"{s:.0f}s" if s < 120 else (f"{s / 60:.1f}min" if s < 7200 else f"{s / 3600:.1f}h")


class LineProgress:
    """tqdm-like object (``update``, ``close``, iteration, context manager) printing a line on ``stream``:
    from the heartbeat while it is the innermost open report (the first ``first`` seconds — default
    :func:`first_line_seconds` — after the outermost open report started, also while a step is running),
    at most every ``interval`` seconds as it advances, and a final line if it printed any. Without a
    ``total`` it is a stage: ``desc: 12s elapsed``."""

    def __init__(self, iterable=None, total=None, desc=None, interval=None, stream=None, initial=0, first=None,
                 **_):
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total, self.n, self.desc = total, int(initial), desc or "progress"
        self.interval = float(os.environ.get("LIMITS_PROGRESS_INTERVAL", 30) if interval is None else interval)
        self.first = first_line_seconds() if first is None else float(first)
        self.stream = stream or sys.stderr
        self.t0 = self.t_last = time.perf_counter()
        self.printed = False
        self.closed = False
        self._lock = threading.Lock()
        HEARTBEAT.add(self)

    def __iter__(self):
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
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

    def message(self, elapsed):
        if self.total:
            eta = (f", ETA {format_seconds(elapsed / self.n * (self.total - self.n))}"
                   if 0 < self.n < self.total else "")
            return (f"{self.desc}: {self.n}/{self.total} ({100 * self.n / self.total:.0f}%), "
                    f"{format_seconds(elapsed)} elapsed{eta}")
        if self.total is None and self.n == 0:
            return f"{self.desc}: {'done in ' + format_seconds(elapsed) if self.closed else format_seconds(elapsed) + ' elapsed'}"
        return f"{self.desc}: {self.n} done, {format_seconds(elapsed)} elapsed"

    def _line(self):
        self.printed, self.n_printed = True, self.n
        self.t_last = now = time.perf_counter()
        HEARTBEAT.note_line()
        try:
            print(self.message(now - self.t0), file=self.stream, flush=True)
        except (OSError, ValueError):          # closed or broken stream: stay quiet
            pass

    def beat(self, now, due):
        """From the heartbeat, while this is the innermost open report: a line when ``due``
        (:meth:`_Heartbeat.due`)."""
        with self._lock:
            if due and not self.closed:
                self._line()

    def update(self, n=1):
        raise_if_interrupted()
        with self._lock:
            self.n += n
            if time.perf_counter() - self.t_last >= self.interval:
                self._line()

    def refresh(self):
        return None

    def close(self):
        HEARTBEAT.remove(self)
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self.printed and (self.n_printed != self.n or (self.total is None and self.n == 0)):
                self._line()                   # a final line, unless the last one already shows it
            self.printed = False


def _checked(iterable):
    """``iterable``, with an interruption point before each item."""
    for item in iterable:
        raise_if_interrupted()
        yield item


@functools.lru_cache(maxsize=None)
def _tqdm_class():
    """tqdm whose ``update`` is an interruption point (its iteration is wrapped by :func:`_checked`) and whose
    elapsed time keeps ticking while a step runs (redrawn by the heartbeat once a second)."""
    from tqdm import tqdm          # plain text bar (tqdm.auto needs ipywidgets inside Jupyter)

    class CheckedTqdm(tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.t0 = self._redrawn = time.perf_counter()
            self.first = first_line_seconds()
            if not self.disable:
                HEARTBEAT.add(self)

        def update(self, n=1):
            raise_if_interrupted()
            return super().update(n)

        def beat(self, now, due):
            """The bar is on the screen from the start: only its elapsed time is redrawn, once a second."""
            if now - self._redrawn >= 1.0 and not self.disable:
                self._redrawn = now
                self.refresh()

        def close(self):
            HEARTBEAT.remove(self)
            return super().close()

    return CheckedTqdm


def _mode(disable):
    """'off', 'bar' or 'lines' for ``disable`` (None: the environment and whether stderr is a terminal)."""
    env = os.environ.get("LIMITS_PROGRESS")
    if disable is None:
        if env == "0":
            return "off"
        return "bar" if env == "1" or sys.stderr.isatty() else "lines"
    return "off" if disable else "bar"


def progress(iterable=None, total=None, desc=None, disable=None, **kwargs):
    """A tqdm bar on a terminal; a :class:`LineProgress` (first line after a couple of seconds, then periodic)
    otherwise. ``disable=True`` or ``LIMITS_PROGRESS=0`` silences it; ``disable=False`` or
    ``LIMITS_PROGRESS=1`` forces the bar."""
    if iterable is not None:
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        iterable = _checked(iterable)
    mode = _mode(disable)
    if mode == "lines":
        return LineProgress(iterable, total=total, desc=desc, **kwargs)
    return _tqdm_class()(iterable, total=total, desc=desc, disable=mode == "off", leave=False, **kwargs)


@contextlib.contextmanager
def stage(desc, disable=None):
    """One long step without a count (a kernel, a solve, a whole command): silent when it ends within
    :func:`first_line_seconds`, else ``desc: 2s elapsed`` and then a line every ``LIMITS_PROGRESS_INTERVAL``
    seconds while no report inside it is open, and ``desc: done in 40s`` at the end. Lines on a terminal too
    (a bar without a count would say nothing more). ``disable`` and ``LIMITS_PROGRESS=0`` as for
    :func:`progress`."""
    if _mode(disable) == "off":
        yield None
        return
    report = LineProgress(total=None, desc=desc)
    try:
        yield report
    finally:
        report.close()


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
