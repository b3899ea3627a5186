"""docs/torch_checks.rst shows the calibration of the torch checks (no verdict without a measurement, the data
checks, equivalent()'s init law) as generated from the committed data; the data say what the docs claim. No torch
needed: the tables are made from the JSON files."""
import json

import pytest

from benchmark_scripts import ROOT, data, load

DOC = ROOT / "docs" / "torch_checks.rst"


@pytest.mark.parametrize("name", ["measurement_rule", "equivalence_init_law"])
def test_the_docs_tables_are_the_committed_data(name):
    m = load(name)
    block = DOC.read_text().split(m.BEGIN, 1)[1].split(m.END, 1)[0].strip().splitlines()
    assert block == "\n".join(m.rst(data(m))).strip().splitlines(), (
        f"docs/torch_checks.rst is stale: paste python benchmarks/{name}.py --rst between its markers")


def test_the_measurement_rule_refuses_no_correct_module_and_every_broken_one():
    d = data(load("measurement_rule"))
    correct = [r for runs in d["coord"]["correct"].values() for r in runs]
    assert len(d["coord"]["correct"]) >= 15 and len(correct) >= 60 and not any(r["refused"] for r in correct)
    assert all(all(r["refused"] for r in runs) for runs in d["coord"]["broken"].values())
    assert not any(v["refused"] for v in d["transfer"]["correct"].values())
    assert all(v["refused"] for v in d["transfer"]["broken"].values())
    assert not any(v["refused"] for v in d["data"]["correct"].values())
    assert all(v["refused"] for v in d["data"]["broken"].values())


def test_the_init_law_statistics_hold_their_size_and_refuse_no_correct_module():
    """The calibrated statistics within 2.5× of the nominal rate at every n (the previous fourth moment: up to 92×),
    within 1.5× from n = 1000; no correct module refused in 20 calls at max_draws 64; every wrong one refused."""
    from scipy.stats import norm

    d = data(load("equivalence_init_law"))
    nominal = 2 * norm.sf(d["z_crit"])
    for n, s in d["size"].items():
        assert all(r <= 2.5 * nominal for r in s["new"]), (n, s)
        if int(n) >= 1000:
            assert all(r <= 1.5 * nominal for r in s["new"]), (n, s)
    assert max(s["old"][2] for s in d["size"].values()) > 20 * nominal            # the cause, as measured
    for name, runs in d["modules"]["correct"].items():
        assert runs["64"]["refused"] == 0 and runs["64"]["calls"] >= 20, name
    for name, runs in d["modules"]["wrong"].items():
        assert runs["64"]["refused"] == runs["64"]["calls"], name


def test_the_init_law_statistics_recomputed_on_a_small_sample():
    """A cheap piece of the Monte Carlo again: 4000 Gaussian samples of n = 448 — the calibrated kurtosis z is
    N(0, 1)-like (mean and SD within 0.1), the previous studentised fourth moment is skewed far left."""
    import numpy as np

    m = load("equivalence_init_law")
    v = np.random.default_rng(7).standard_normal((4000, 448))
    new, old = m.new_z(v)[:, 2], m.old_z(v)[:, 2]
    assert abs(new.mean()) < 0.1 and abs(new.std() - 1) < 0.1
    assert np.mean(old < -2.576) > 3 * 0.005                 # its lower 0.5 % tail holds > 1.5 % of the samples
    assert json.loads(json.dumps(float(new.std())))          # plain float


def test_the_torch_commands_say_what_they_do_within_seconds():
    """benchmarks/results/cliedges/torch_first_line.json (python benchmarks/torch_first_line.py --before …): the
    first stderr line of coord-check and transfer comes before torch is imported — sooner than the old first
    output, which was the result itself — and no silence is as long as the old one."""
    d = json.loads((ROOT / "benchmarks" / "results" / "cliedges" / "torch_first_line.json").read_text())
    for name, row in d["commands"].items():
        now, before = row["now"], row["before"]
        assert now["exit"] in (0, 1) and before["exit"] in (0, 1), name
        assert now["first_line"].startswith(("coord-check: ", "transfer: ")), name
        assert now["first_s"] < 0.5 * before["longest_silence_s"], name
        assert now["longest_silence_s"] < before["longest_silence_s"], name
        assert now["lines"] >= 4, name
