"""Shared timing helper for the benchmark modules."""
import time


def timed(fn, repeat=1):
    """(best wall seconds over ``repeat`` runs, result of the last run)."""
    best = float("inf")
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out
