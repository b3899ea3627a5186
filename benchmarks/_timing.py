"""Shared timing helpers for the benchmark modules, and the runner for peer libraries that live in an
optional interpreter (neural-tangents + jax; create it with ``python benchmarks/make_peer_env.py``)."""
import json
import math
import os
import subprocess
import time
from pathlib import Path

NT_PYTHON = os.environ.get("LIMITS_NT_PYTHON", "/work/venv-nt/bin/python")

# one CPU thread for the peer as for us (BLAS via limits.blas; XLA's Eigen pool and OpenMP here)
PEER_ENV = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "TF_CPP_MIN_LOG_LEVEL": "3", "JAX_PLATFORMS": "cpu"}
# and one thread for ours: limits' own threads (limits.parallel, default every core) are timed by bench_cores.py
os.environ.setdefault("LIMITS_NUM_THREADS", "1")


PEER_TIMED = r"""
def nt_timed(kfn, X, calls):
    # neural-tangents' kernel_fn on X (jit, nt.batch of <= 50 dividing P, results to the host), called ``calls``
    # times: the first call (jit included) and the best CPU / wall seconds; returns (timings, nngp, ntk).
    import time
    import jax
    import neural_tangents as nt
    import numpy as np
    b = min(50, X.shape[0])
    while X.shape[0] % b:
        b -= 1
    fn = nt.batch(jax.jit(kfn, static_argnames="get"), batch_size=b, store_on_device=False)
    res = {}
    for k in range(calls):
        c0, w0 = time.process_time(), time.perf_counter()
        r = fn(X, None, ("nngp", "ntk"))
        nngp, ntk = np.asarray(r.nngp), np.asarray(r.ntk)
        c, w = time.process_time() - c0, time.perf_counter() - w0
        res.setdefault("first_cpu", c)
        res.setdefault("first_wall", w)
        res["cpu"] = min(res.get("cpu", c), c)
        res["wall"] = min(res.get("wall", w), w)
    return res, nngp, ntk
"""


def timed(fn, repeat=1):
    """(best wall seconds over ``repeat`` runs, result of the last run)."""
    best = float("inf")
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _timed_call(fn, res, first):
    """Call ``fn`` once; fold its CPU and wall time into ``res`` (first call, best so far); its result."""
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    w, c = time.perf_counter() - w, time.process_time() - c
    if first:
        res.update(first_wall=w, first_cpu=c, wall=w, cpu=c)
    res["wall"] = min(res["wall"], w)
    res["cpu"] = min(res["cpu"], c)
    return out


def cpu_wall(fn, repeat=3):
    """Time ``fn`` ``repeat`` times: dict with the first call (``first_cpu``, ``first_wall``) and the best
    of all calls (``cpu``, ``wall``; CPU = ``time.process_time``, all threads), and the last result."""
    res, out = {}, None
    for k in range(repeat):
        out = _timed_call(fn, res, k == 0)
    return res, out


def cpu_wall_pair(fa, fb, repeat=5):
    """:func:`cpu_wall` of two functions, their calls interleaved (a, b, a, b, …) so that a load that comes
    and goes on a shared machine weighs on both alike; returns (res_a, out_a), (res_b, out_b)."""
    ra, rb, oa, ob = {}, {}, None, None
    for k in range(repeat):
        oa = _timed_call(fa, ra, k == 0)
        ob = _timed_call(fb, rb, k == 0)
    return (ra, oa), (rb, ob)


def cpu_wall_interleaved(fns, repeat=5):
    """:func:`cpu_wall` of several functions (a dict name -> fn), their calls interleaved (a, b, c, a, b, c, …);
    returns {name: (res, last result)}."""
    res = {k: {} for k in fns}
    out = {}
    for j in range(repeat):
        for k, fn in fns.items():
            out[k] = _timed_call(fn, res[k], j == 0)
    return {k: (res[k], out[k]) for k in fns}


def fit_exponent(xs, ts):
    """Least-squares slope of log t against log x (the empirical cost exponent)."""
    lx = [math.log(x) for x in xs]
    lt = [math.log(max(t, 1e-12)) for t in ts]
    mx, mt = sum(lx) / len(lx), sum(lt) / len(lt)
    num = sum((a - mx) * (b - mt) for a, b in zip(lx, lt))
    den = sum((a - mx) ** 2 for a in lx)
    return num / den if den > 0 else float("nan")


def run_peer(script: str, *args, python=None, timeout=3600):
    """Run ``script`` (python source) in the peer interpreter; returns (parsed JSON of its last stdout
    line, "") or (None, reason it was skipped). Never raises for a missing or broken peer."""
    python = python or NT_PYTHON
    if not Path(python).exists():
        return None, (f"peer skipped: no interpreter at {python} (python benchmarks/make_peer_env.py; "
                      "or set LIMITS_NT_PYTHON)")
    env = {**os.environ, **PEER_ENV}
    try:
        r = subprocess.run([python, "-c", script, *map(str, args)], capture_output=True, text=True,
                           timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"peer skipped: {exc}"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return None, f"peer skipped: {last}"
    try:
        return json.loads(r.stdout.strip().splitlines()[-1]), ""
    except (ValueError, IndexError):
        return None, "peer skipped: no JSON result on its stdout"


# ------------------------------------------------------------------------------------- the timing protocol
# Every comparison with a peer library follows one protocol (benchmarks/README.md, "How each side is timed"):
# each side runs in its own process with one BLAS/XLA thread; each side is called once to warm up (the peer's jit
# compile, our first-call imports and caches: reported as "first"), then REPEAT timed calls of all sides are
# interleaved (a, b, c, a, b, c, …) so that a load that comes and goes weighs on every side alike; each call is
# timed by the process that runs it (``time.process_time``: that process's CPU, all its threads; and wall), with
# nothing else inside the timed region; the steady state is the best (minimum) of the REPEAT calls, the median is
# kept beside it. Memory is measured in a separate, untimed pass (:func:`traced_peak`) or, for a peer process, by
# its max RSS (``getrusage``, which costs nothing during the calls).
REPEAT = 5


class Local:
    """A side timed in this process: ``fn()`` → its result."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self):
        w, c = time.perf_counter(), time.process_time()
        out = self.fn()
        return time.process_time() - c, time.perf_counter() - w, out


def interleaved(sides, repeat=REPEAT, warmup=1):
    """Time the sides ({name: callable → (cpu, wall, result)}, e.g. :class:`Local` or :meth:`Peer.side`): ``warmup``
    calls of each (the first recorded as ``first_cpu``/``first_wall``), then ``repeat`` rounds of one call of every
    side in turn. Returns {name: (stats, last result)}; stats: ``cpu``/``wall`` the best of the timed calls,
    ``cpu_median``/``wall_median``, ``cpus`` (every timed call), ``first_cpu``/``first_wall``, ``repeat``."""
    stats = {k: {"cpus": [], "walls": []} for k in sides}
    out = {}
    for k, side in sides.items():
        for j in range(warmup):
            c, w, out[k] = side()
            if j == 0:
                stats[k].update(first_cpu=c, first_wall=w)
    for _ in range(repeat):
        for k, side in sides.items():
            c, w, out[k] = side()
            stats[k]["cpus"].append(c)
            stats[k]["walls"].append(w)
    for k, s in stats.items():
        s.update(cpu=min(s["cpus"]), wall=min(s["walls"]), cpu_median=float(_median(s["cpus"])),
                 wall_median=float(_median(s["walls"])), repeat=repeat)
        s.setdefault("first_cpu", s["cpus"][0])
        s.setdefault("first_wall", s["walls"][0])
    return {k: (stats[k], out[k]) for k in sides}


def _median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def traced_peak(fn):
    """Peak bytes of the numpy (and Python) allocations of one call of ``fn`` — tracemalloc, in an untimed pass of
    its own (tracemalloc slows the calls it watches, so it never runs around a timed call)."""
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def machine():
    """What the timings ran on: CPU model, cores, load averages (1, 5, 15 min), date."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "load": [round(x, 2) for x in os.getloadavg()],
            "date": time.strftime("%Y-%m-%d")}


PEER_LOOP = r'''
import json, resource, sys, time
import numpy as np
_OUT, sys.stdout = sys.stdout, sys.stderr          # what the peer libraries print goes to stderr
def _reply(**kw):
    _OUT.write("@@ " + json.dumps(kw) + "\n")
    _OUT.flush()
_fns, _last = {}, {}
def _serve():
    for line in sys.stdin:
        m = json.loads(line)
        op, key = m["op"], m.get("key")
        try:
            if op == "prepare":
                _fns[key] = make(m["spec"])
                _reply(ok=True)
            elif op == "call":
                c, w = time.process_time(), time.perf_counter()
                _last[key] = _fns[key]()
                _reply(cpu=time.process_time() - c, wall=time.perf_counter() - w)
            elif op == "save":
                np.savez(m["path"], *[np.asarray(a) for a in _last[key]])
                _reply(ok=True)
            elif op == "info":
                _reply(maxrss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, **INFO)
            elif op == "quit":
                _reply(ok=True)
                return
        except Exception as exc:                       # reported to the driver, which raises PeerError
            _reply(error=f"{type(exc).__name__}: {exc}")
'''


class PeerError(RuntimeError):
    """The peer process failed, timed out or is missing; the message says why."""


class Peer:
    """A peer library's interpreter kept alive for interleaved timing (:func:`interleaved`).

    ``setup`` is Python source run in the peer (with ``PEER_ENV``: one XLA/BLAS thread) that defines
    ``make(spec) -> fn`` — ``fn()`` computes the peer's result (blocking until it is ready) and returns a tuple of
    arrays — and ``INFO`` (a dict, e.g. the library's version). :meth:`side` gives a callable for
    :func:`interleaved`: one call in the peer, timed there by its own process clock. Raises :class:`PeerError` when
    the interpreter is missing or the peer fails; ``Peer.start`` returns (peer, "") or (None, why) instead."""

    def __init__(self, setup, python=None, timeout=6 * 3600):
        import select  # noqa: F401  (POSIX; the benchmarks run on Linux)

        python = python or NT_PYTHON
        if not Path(python).exists():
            raise PeerError(f"peer skipped: no interpreter at {python} (python benchmarks/make_peer_env.py; "
                            "or set LIMITS_NT_PYTHON)")
        self.timeout = timeout
        self._err = open(os.devnull, "w")
        self.proc = subprocess.Popen([python, "-c", PEER_LOOP + setup + "\n_serve()\n"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._err, text=True,
                                     env={**os.environ, **PEER_ENV})
        self.info = self.ask("info")

    @classmethod
    def start(cls, setup, python=None, timeout=6 * 3600):
        try:
            return cls(setup, python, timeout), ""
        except PeerError as exc:
            return None, str(exc)

    def ask(self, op, **msg):
        import select

        if self.proc.poll() is not None:
            raise PeerError(f"peer skipped: its process ended (exit {self.proc.returncode})")
        self.proc.stdin.write(json.dumps({"op": op, **msg}) + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                self.close(kill=True)
                raise PeerError(f"peer skipped: {op} took more than {self.timeout:.0f} s")
            line = self.proc.stdout.readline()
            if not line:
                raise PeerError(f"peer skipped: its process ended during {op} (exit {self.proc.wait()})")
            if line.startswith("@@ "):
                r = json.loads(line[3:])
                if "error" in r:
                    raise PeerError(f"peer skipped: {r['error']}")
                return r

    def prepare(self, key, spec):
        self.ask("prepare", key=key, spec=spec)

    def side(self, key):
        def call():
            r = self.ask("call", key=key)
            return r["cpu"], r["wall"], None
        return call

    def result(self, key):
        """The arrays of the last call of ``key``."""
        import tempfile

        import numpy as np

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "out.npz"
            self.ask("save", key=key, path=str(path))
            with np.load(path, allow_pickle=False) as z:
                return [z[f"arr_{i}"] for i in range(len(z.files))]

    def maxrss(self):
        return self.ask("info")["maxrss"]

    def close(self, kill=False):
        if self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                try:
                    self.ask("quit")
                except PeerError:
                    pass
            self.proc.wait()
        self._err.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
