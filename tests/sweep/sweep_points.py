"""Point functions for the sweep tests (a module, so loky and dask workers can import them)."""
import os
import time
from pathlib import Path

import numpy as np


def noisy(width, depth, seed, scale=1.0):
    """A finite-network-like estimate: its value depends on (width, depth) and on the seed only."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((width, width)) / np.sqrt(width)
    G = A @ A.T
    return {"trace": float(np.trace(G)) / width * depth * scale,
            "eig": np.linalg.eigvalsh(G)[:depth],          # shape varies with depth → padded
            "theory": float(depth * scale)}


def dmft_loss(gamma0):
    """The DMFT loss curve of docs/sweeps/dmft_gamma0.toml (shorter): depth-2 linear, seed 000 toy task."""
    import limits

    X, y = limits.dmft.toy_task(P=10, D=20, seed=0)
    d = limits.dmft.solve(X, y, depth=2, activation="linear", gamma0=gamma0, T=2.0, dt=0.05)
    return {"loss": d.loss, "f": d.f}


def sleepy(x, seed, delay=0.05, fail_at=None):
    """Sleeps ``delay`` s; raises at ``x == fail_at``."""
    time.sleep(delay)
    if fail_at is not None and x == fail_at:
        raise ArithmeticError(f"x = {x} is the failing point")
    return {"y": 2.0 * x + np.random.default_rng(seed).random(), "pid": os.getpid()}


def sleepy_nopid(x, seed, delay=0.05):
    time.sleep(delay)
    return {"y": 2.0 * x + np.random.default_rng(seed).random()}


def touch_then_sleep(x, marker_dir, delay=0.3):
    """Leaves a file when a point starts (so a test knows work is in flight), then sleeps."""
    Path(marker_dir, f"start-{x}-{os.getpid()}").touch()
    time.sleep(delay)
    return x * x


def die_once(x, marker_dir, delay=0.05):
    """The worker process running x == 3 exits hard (like a segfault or an OOM kill) — once."""
    time.sleep(delay)
    flag = Path(marker_dir, "died")
    if x == 3 and not flag.exists():
        flag.touch()
        os._exit(1)
    return float(x) + 0.5


def exits_at(x, at=1):
    """Calls sys.exit at ``x == at`` (a point function that ends the process, as scripts do)."""
    import sys

    if x == at:
        sys.exit(3)
    return float(x)


def returns(x, name="failed"):
    """An output named ``name`` besides ``y``."""
    return {"y": float(x), name: float(x) + 0.5}


def _wait_for_gate(gate, limit=1800.0):
    """Block until the file ``gate`` exists (a test creates it; or interrupts the sweep while points wait)."""
    deadline = time.monotonic() + limit
    while not gate.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{gate} was not created within {limit:.0f} s")
        time.sleep(0.01)


def gated(x, seed, gate_dir, free=3):
    """``sleepy_nopid``'s y without its sleep: points x < ``free`` return at once, the others wait for the file
    ``gate_dir/open`` — so a test interrupting the sweep after ``free`` points finds the next one in flight, whatever
    the machine's load (a fixed sleep per point made that a race)."""
    if x >= free:
        _wait_for_gate(Path(gate_dir, "open"))
    return {"y": 2.0 * x + np.random.default_rng(seed).random()}


def touch_then_wait(x, marker_dir):
    """Leaves ``start-<x>-<pid>`` in ``marker_dir`` (work is in flight, in that process), then waits for the file
    ``marker_dir/open``; returns x²."""
    Path(marker_dir, f"start-{x}-{os.getpid()}").touch()
    _wait_for_gate(Path(marker_dir, "open"))
    return x * x
