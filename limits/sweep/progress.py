"""Sweep progress: a tqdm bar with ETA on a terminal (:func:`limits.progress.progress`), otherwise lines on stderr:
one when the computing starts (:meth:`SweepProgress.start`: where, how many points), then one every ``interval``
seconds — also while no point finishes (a slow first point, workers still starting) — and a last one at the end of
a sweep that printed one. ``LIMITS_PROGRESS=0`` or ``progress=False`` silences both."""
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
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = None
        if enabled:
            if getattr(self.stream, "isatty", lambda: False)() or env == "1":
                from ..progress import progress

                self.bar = progress(total=total, desc=desc, disable=False, initial=done, unit="pt")
            else:
                self.lines = True

    def start(self, where):
        """Computing starts (``where``: the backend and its workers): a line now, before the first point, and then
        one every ``interval`` seconds even while no point finishes (lines mode only)."""
        if not self.lines:
            return
        self._line(f", starting on {where}")
        if self.interval > 0:
            self._ticker = threading.Thread(target=self._tick, name="sweep-progress", daemon=True)
            self._ticker.start()

    def _tick(self):
        while not self._stop.wait(self.interval / 4):
            if time.perf_counter() - self.t_last >= self.interval:
                self._line()

    def update(self, n=1, failed=0):
        self.done += n
        self.failed += failed
        if self.bar is not None:
            self.bar.update(n)
            if self.failed:
                self.bar.set_postfix(failed=self.failed, refresh=False)
        elif self.lines and time.perf_counter() - self.t_last >= self.interval:
            self._line()

    def _line(self, note=""):
        with self._lock:
            self.printed = True
            self.t_last = now = time.perf_counter()
            el = now - self.t0
            new = self.done - self.start_done
            left = self.total - self.done
            eta = f", ETA {_fmt(el / new * left)}" if new and left else ""
            try:
                print(f"{self.desc}: {self.done}/{self.total} points ({self.start_done} reused, {self.failed} failed), "
                      f"{_fmt(el)} elapsed{eta}{note}", file=self.stream, flush=True)
            except (OSError, ValueError):          # a closed or broken stream: stay quiet
                pass

    def close(self):
        if getattr(self, "_closed", False):
            return
        self._closed = True
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self.bar is not None:
            self.bar.close()
        elif self.lines and (self.printed or time.perf_counter() - self.t0 >= self.interval):
            self._line()                 # a closing line for logs (short sweeps stay quiet)
