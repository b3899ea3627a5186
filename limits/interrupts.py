"""A Ctrl-C that must not be lost.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be when SIGINT arrives. If
that is inside a weakref callback or a ``__del__`` (for example the import system's module-lock
callback while a module is being imported), the exception is printed as "Exception ignored" and the
program runs on — a long computation then ignores the user's Ctrl-C. The command line's SIGINT
handler therefore *records* the interruption (:func:`note`); its ``sys.unraisablehook`` raises a
swallowed one again in the main thread once the callback has returned (``limits.cli._note_interrupts``),
and, as the last resort, long loops call :func:`raise_if_interrupted` at each step (every
:func:`limits.progress.progress` iteration and ``update`` does), so the work stops at the next step.

Nothing is recorded unless the command line installed its handler, or a long library computation runs inside
:func:`recorded` (the tile stores do: dask's callbacks swallow a Ctrl-C in library use too); other library use and
in-process calls are unaffected.
"""
from __future__ import annotations

import contextlib

_SEEN: list[int] = []


def note(signum: int) -> None:
    """Record that SIGINT arrived (called by the command line's signal handler)."""
    _SEEN.append(int(signum))


def seen() -> bool:
    """Whether a Ctrl-C has been recorded in this process."""
    return bool(_SEEN)


def raise_if_interrupted() -> None:
    """Raise ``KeyboardInterrupt`` if a Ctrl-C was recorded (it may have been swallowed elsewhere)."""
    if _SEEN:
        raise KeyboardInterrupt


def _quiet_resource_tracker():
    """Start multiprocessing's resource tracker (unless running) with its "leaked semaphore objects" warning
    silenced: semaphores of worker processes killed at shutdown (by a Ctrl-C, or a worker over its memory limit)
    are unlinked by the tracker at exit all the same — its warning would be the only line after ``limits:
    interrupted``. The tracker takes its warning filters from the interpreter flags (``-W``) it is started with."""
    import sys
    from multiprocessing import resource_tracker

    tracker = getattr(resource_tracker, "_resource_tracker", None)
    if tracker is None or getattr(tracker, "_pid", None) is not None:
        return
    opt = "ignore::UserWarning:multiprocessing.resource_tracker"
    sys.warnoptions.append(opt)
    try:
        resource_tracker.ensure_running()
    except Exception:  # noqa: BLE001 — the warning is cosmetic; never fail a run over it
        pass
    finally:
        sys.warnoptions.remove(opt)


@contextlib.contextmanager
def children_ignore_sigint():
    """SIGINT ignored while worker processes (a dask LocalCluster, a process pool) are started: they inherit the
    ignored signal (Python then installs no KeyboardInterrupt handler), so a Ctrl-C at the terminal — delivered
    to the whole process group — reaches only the driver, which shuts the workers down; they print no
    tracebacks, and the resource tracker no "leaked semaphore" warning (:func:`_quiet_resource_tracker`). A
    Ctrl-C during the few seconds of start-up is lost."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _quiet_resource_tracker()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def recorded():
    """While the block runs, a Ctrl-C in the main thread raises ``KeyboardInterrupt`` as usual and is also recorded,
    so one swallowed inside a callback (a dask event-loop hook, a ``__del__``) still stops the work at its next
    progress step (:func:`raise_if_interrupted`). Afterwards Python's handler is back and the record made here is
    cleared. Does nothing off the main thread or where another handler is installed (the command line's records
    already)."""
    import signal
    import threading

    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    n = len(_SEEN)

    def handler(signum, frame):
        note(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        del _SEEN[n:]
