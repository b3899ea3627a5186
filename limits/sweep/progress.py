"""Sweep progress: a tqdm bar with ETA on a terminal (:func:`limits.progress.progress`), otherwise lines on
stderr — the first a couple of seconds after the sweep starts (``LIMITS_PROGRESS_FIRST``, also before the
first point is done: it says what the sweep is waiting for, e.g. its workers), then one every ``interval``
seconds, and a last one at the end of a sweep that printed one. ``LIMITS_PROGRESS=0`` or ``progress=False``
silences both."""
from __future__ import annotations

import os
import sys
import threading
import time


def _fmt(s):
    s = max(0.0, float(s))
    return f"{s:.0f}s" if s < 120 else (f"{s / 60:.1f}min" if s < 7200 else f"{s / 3600:.1f}h")


class SweepProgress:
    def __init__(self, total, done=0, desc="sweep", enabled=None, interval=10.0, stream=None):
        self.total, self.done, self.failed, self.start_done = total, done, 0, done
        self.desc, self.interval = desc, float(interval)
        self.stream = stream or sys.stderr
        self.t0 = self.t_last = time.perf_counter()
        env = os.environ.get("LIMITS_PROGRESS")
        if enabled is None:
            enabled = env != "0"
        self.bar = None
        self.lines = False
        self.printed = False
        self.phase = None
        self._closed = False
        self._lock = threading.Lock()
        if enabled:
            if getattr(self.stream, "isatty", lambda: False)() or env == "1":
                from ..progress import progress

                self.bar = progress(total=total, desc=desc, disable=False, initial=done, unit="pt")
            else:
                from ..progress import HEARTBEAT, first_line_seconds

                self.lines = True
                self.first = first_line_seconds()
                HEARTBEAT.add(self)

    def set_phase(self, text):
        """What the sweep is doing before its points come in (``"starting 2 dask workers"``); shown until the
        first point is done."""
        self.phase = text
        if self.bar is not None:
            self.bar.set_postfix_str(text or "", refresh=True)

    def update(self, n=1, failed=0):
        with self._lock:
            self.done += n
            self.failed += failed
            if self.bar is not None:
                if self.phase and self.done > self.start_done:
                    self.set_phase(None)
                self.bar.update(n)
                if self.failed:
                    self.bar.set_postfix(failed=self.failed, refresh=False)
            elif self.lines and time.perf_counter() - self.t_last >= self.interval:
                self._line()

    def beat(self, now, due):
        """From :data:`limits.progress.HEARTBEAT` while this is the innermost open report: a line when ``due``."""
        with self._lock:
            if due and not self._closed:
                self._line()

    def _line(self):
        from ..progress import HEARTBEAT

        HEARTBEAT.note_line()
        self.printed = True
        self.t_last = now = time.perf_counter()
        el = now - self.t0
        new = self.done - self.start_done
        left = self.total - self.done
        eta = f", ETA {_fmt(el / new * left)}" if new and left else ""
        doing = f"; {self.phase}" if self.phase and not new else ""
        print(f"{self.desc}: {self.done}/{self.total} points ({self.start_done} reused, {self.failed} failed), "
              f"{_fmt(el)} elapsed{eta}{doing}", file=self.stream, flush=True)

    def close(self):
        if self.lines:
            from ..progress import HEARTBEAT

            HEARTBEAT.remove(self)
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.bar is not None:
                self.bar.close()
            elif self.lines and (self.printed or time.perf_counter() - self.t0 >= self.interval):
                self._line()                 # a closing line for logs (short sweeps stay quiet)
