"""A Ctrl-C that must not be lost.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be when SIGINT arrives. If
that is inside a weakref callback or a ``__del__`` (for example the import system's module-lock
callback while a module is being imported), the exception is printed as "Exception ignored" and the
program runs on — a long computation then ignores the user's Ctrl-C. The command line's SIGINT
handler therefore *records* the interruption (:func:`note`); its ``sys.unraisablehook`` raises a
swallowed one again in the main thread once the callback has returned (``limits.cli._note_interrupts``),
and, as the last resort, long loops call :func:`raise_if_interrupted` at each step (every
:func:`limits.progress.progress` iteration and ``update`` does), so the work stops at the next step.

Nothing is recorded unless the command line installed its handler: library use and in-process calls
are unaffected.
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


@contextlib.contextmanager
def children_ignore_sigint():
    """SIGINT ignored while worker processes (a dask LocalCluster, a process pool) are started: they inherit the
    ignored signal (Python then installs no KeyboardInterrupt handler), so a Ctrl-C at the terminal — delivered
    to the whole process group — reaches only the driver, which shuts the workers down; they print no
    tracebacks. A Ctrl-C during the few seconds of start-up is lost."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
