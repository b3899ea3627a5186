"""The benchmarks' timing protocol (benchmarks/_timing.py; benchmarks/README.md, "How each side is timed"): every side
gets its warm-up call, then the timed calls of all sides alternate; the steady state is the best of the timed calls;
memory is measured in a pass of its own; a peer interpreter kept alive answers calls timed by its own clock."""
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _timing  # noqa: E402


def test_sides_alternate_after_their_warm_up_and_the_best_timed_call_is_reported():
    order, costs = [], {"a": iter([5.0, 3.0, 1.0, 2.0]), "b": iter([9.0, 4.0, 6.0, 8.0])}

    def side(name):
        def call():
            order.append(name)
            assert not tracemalloc.is_tracing()          # nothing else runs inside a timed call
            c = next(costs[name])
            return c, 2 * c, name
        return call
    res = _timing.interleaved({"a": side("a"), "b": side("b")}, repeat=3)
    assert order == ["a", "b", "a", "b", "a", "b", "a", "b"]      # warm-ups, then three rounds
    a, b = res["a"][0], res["b"][0]
    assert (a["first_cpu"], a["cpu"], a["cpu_median"], a["cpus"]) == (5.0, 1.0, 2.0, [3.0, 1.0, 2.0])
    assert (b["first_cpu"], b["cpu"], b["wall"], b["repeat"]) == (9.0, 4.0, 8.0, 3)
    assert res["b"][1] == "b"


def test_local_side_times_only_the_call_and_memory_is_a_separate_pass():
    c, w, out = _timing.Local(lambda: sum(range(10_000)))()
    assert out == sum(range(10_000)) and 0.0 <= c and 0.0 <= w < 5.0
    assert _timing.traced_peak(lambda: bytearray(4 << 20)) >= 4 << 20
    assert not tracemalloc.is_tracing()


SETUP = r'''
INFO = {"version": "fake"}
def make(spec):
    def call():
        if spec.get("fail"):
            raise ValueError("bad spec")
        time.sleep(0.01)
        return np.arange(spec["n"]), np.ones(2)
    return call
'''


def test_a_peer_interpreter_answers_timed_calls_and_returns_its_arrays():
    with _timing.Peer(SETUP, python=sys.executable, timeout=60) as peer:
        assert peer.info["version"] == "fake"
        peer.prepare("k", {"n": 3})
        res = _timing.interleaved({"peer": peer.side("k"), "here": _timing.Local(lambda: time.sleep(0.01))}, repeat=2)
        st = res["peer"][0]
        assert st["wall"] >= 0.009 and st["cpu"] < st["wall"] and st["repeat"] == 2
        arange, ones = peer.result("k")
        assert arange.tolist() == [0, 1, 2] and ones.tolist() == [1.0, 1.0]
        assert peer.maxrss() > 0
        peer.prepare("bad", {"fail": True, "n": 1})
        with pytest.raises(_timing.PeerError, match="bad spec"):
            peer.side("bad")()
    assert peer.proc.poll() is not None


def test_a_missing_peer_is_skipped_with_the_reason():
    peer, why = _timing.Peer.start(SETUP, python="/nonexistent/python")
    assert peer is None and why.startswith("peer skipped: no interpreter at /nonexistent/python")
