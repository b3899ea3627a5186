"""The benchmark tables of README.md and docs/performance.rst, generated from the rows the benchmark runs wrote::

    python benchmarks/run.py kernels --merge benchmarks/results/kernels.json  # measure (minutes)
    python benchmarks/readme_rows.py                                          # print the rows
    python benchmarks/readme_rows.py --write       # write them, the README's figure and benchmarks/results/table.md

``--write`` puts the full rows (one per workload: every size, baseline, target and verdict) into
docs/performance.rst, the compact table (workload | limits | neural-tangents | ratio, one number per cell) and
the machine line into README.md and docs/performance.rst, draws the README's figure of the ratios
(``benchmarks/results/readme/ratios.png``, its numbers in ``ratios.json``) and regenerates ``benchmarks/results/table.md``,
every row of every ``benchmarks/results/*.json`` (all modules). ``tests/test_readme_benchmarks.py`` fails when a page,
that table or the figure's numbers disagree with the data.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "results" / "kernels.json"
CLOSED = "| NNGP + NTK, closed forms (erf, relu, gelu): `limits` vs plain numpy / neural-tangents, steady-state CPU"
VARIANCE = "| NNGP + NTK without a closed form or at large variance, P = 1000, L = 100"
TARGET_CLOSED = "≥ 2× numpy, ≥ 4× NT (joint), ≥ 2× NT (cross, all layers kept)"


def _load(path=DATA):
    return json.loads(Path(path).read_text())


def _x(v):
    return f"{v:.2f}×"


def _closed_row(rows):
    main = [r for r in rows if r.get("baseline_cpu_seconds") is not None]
    if not main:
        raise ValueError("no closed-form rows in the benchmark data")
    parts, met, missed = [], [], []
    for r in main:
        nt = "NT skipped" if r.get("nt_ratio") is None else \
            f"NT {_x(r['nt_ratio'])} (NT's first call {r['nt_first_cpu']:.1f} s with its compile)"
        parts.append(f"{r['name'].replace('NNGP+NTK, ', '')}: {r['cpu_seconds']:.3f} s (floor "
                     f"{r['floor_cpu']:.3f} s), numpy {_x(r['ratio'])}, {nt}")
        nt_goal = 4.0 if "4x NT" in r.get("target", "4x NT") else 2.0      # cross / all-layers rows: ≥ 2× NT
        ok = r["ratio"] >= 2.0 and (r.get("nt_ratio") or 0.0) >= nt_goal
        (met if ok else missed).append(r["name"].split(" NNGP")[0])
    agree = max(r["agree_numpy"] for r in main)
    agree_nt = [r["agree_nt"] for r in main if r.get("agree_nt") is not None]
    exps = {r["name"].split(",")[0]: r["exponent"] for r in rows if "exponent" in r}
    cost = "; ".join(f"{k.replace('cost exponent in ', 'CPU ∝ ')}^{v:.2f}" for k, v in exps.items())
    versions = sorted({r["nt_version"] for r in main if r.get("nt_version")})
    meas = ("; ".join(parts) + ". Floor: libm's arcsin/arctan alone on every packed entry (every entry of a "
            "cross block)"
            + f". Agree with numpy ≤ {agree:.1e}"
            + (f", with NT ≤ {max(agree_nt):.1e}" if agree_nt else "")
            + (f"; {cost} (theory 1 in L, 2 in P)" if cost else "")
            + (f"; peer {versions[0]}" if versions else "")
            + " — `python benchmarks/run.py kernels`")
    status = ("met" if not missed else
              ("met for " + ", ".join(met) + "; " if met else "") + "**not met** for " + ", ".join(missed)
              + " (floor: one libm arcsin/arctan per packed entry, docs/performance.rst)")
    return f"{CLOSED} | {meas} | {TARGET_CLOSED}: {status} |"


def _variance_row(rows):
    big = [r for r in rows if "P=1000, L=100" in r["name"] and r.get("baseline_cpu_seconds") is None
           and "exponent" not in r]
    if not big:
        raise ValueError("no large-variance rows in the benchmark data")
    parts = [f"{r['name'].replace('NNGP+NTK, P=1000, L=100, ', '')}: {r['cpu_seconds']:.2f} s" for r in big]
    slow = [r["name"].split(" ")[0] + " at " + r["name"].split(", ")[-2] for r in big if r["cpu_seconds"] >= 10.0]
    status = "met at the variances measured" if not slow else "**not met** for " + ", ".join(slow)
    gh = [r for r in rows if "plain Gauss–Hermite" in r["name"]]
    extra = ""
    if gh:
        g = gh[0]
        extra = (f"; a plain numpy Gauss–Hermite recursion ({g['name'].split('(')[1].split(')')[0]}) is "
                 f"{g['ratio']:.0f}× slower at {', '.join(g['name'].split(', ')[1:3])} and "
                 f"{g['note'].split('max rel. diff ')[1]} off")
    return (f"{VARIANCE} | {'; '.join(parts)} (CPU){extra} — `python benchmarks/run.py kernels` | "
            f"< 10 s at any variance: {status} |")


TABLE = ROOT.joinpath("benchmarks/results/table.md")


def _cell(v):
    return str(v).replace("|", "/").replace("\n", " ")


def all_rows(folder=DATA.parent):
    """Every row of every ``benchmarks/results/*.json`` (one file per run; a module may appear in one file)."""
    out, seen = [], {}
    for path in sorted(Path(folder).glob("*.json")):
        data = _load(path)
        for mod in {r["module"] for r in data}:
            if mod in seen:
                raise ValueError(f"benchmark module {mod!r} is in both {seen[mod]} and {path.name}")
            seen[mod] = path.name
        out += [{**r, "_file": path.name} for r in data]
    return out


def table_md(folder=DATA.parent) -> str:
    """benchmarks/results/table.md: every benchmark row of the last runs, by module — the time (CPU time where
    the module measures it, else wall), the in-run baseline's time, the target and the module's note."""
    rows_ = all_rows(folder)
    lines = ["# Benchmark results (generated)", "",
             "Generated by `python benchmarks/readme_rows.py --write` from `benchmarks/results/*.json`, which "
             "`python benchmarks/run.py MODULE … --json benchmarks/results/NAME.json` writes. Times in seconds; "
             "“baseline” is the simple alternative timed in the same run (see each module's docstring for what "
             "it is and which way its ratio points). Absolute times on a shared 2-core machine are noise; "
             "compare within a row.", ""]
    for mod in sorted({r["module"] for r in rows_}):
        mine = [r for r in rows_ if r["module"] == mod]
        lines += [f"## {mod} (`benchmarks/bench_{mod}.py`, data `benchmarks/results/{mine[0]['_file']}`)", "",
                  "| workload | time (s) | baseline (s) | target | note |", "|---|---|---|---|---|"]
        for r in mine:
            t = r.get("cpu_seconds", r.get("seconds"))
            base = r.get("baseline_cpu_seconds", r.get("baseline_seconds"))
            lines.append(f"| {_cell(r['name'])} | {'—' if t is None else f'{t:.4g}'} | "
                         f"{'—' if base is None else f'{base:.4g}'} | {_cell(r.get('target') or '')} | "
                         f"{_cell(r.get('note') or '')} |")
        lines.append("")
    return "\n".join(lines)


BIGP = "| large P: NNGP + NTK, MLP L = 10, P = 20,000 (`kernels.kernel_blocked`); kernel regression, 1000 test points"
LARGEP = ("| beyond memory: erf NNGP regression on dask (`limits regress … --solver cg --backend dask`; tiles on disk, "
          "preconditioned CG), 1000 test points")
PREDICT = "| NTK ensemble prediction (mean + covariance at 50 times), P_train = 2000, P_test = 500, depth-9 MLP"


def _find(rows_, *words):
    hit = [r for r in rows_ if all(w in r["name"] for w in words)]
    if len(hit) != 1:
        raise ValueError(f"expected one benchmark row naming {words}, found {len(hit)}")
    return hit[0]


def _note_number(note, after):
    """The number that follows ``after`` in a benchmark note (e.g. 'peak RSS 6.05 GiB' → '6.05')."""
    i = note.index(after) + len(after)
    return note[i:].split()[0].rstrip(",;)")


def _bigp_row(rows_):
    parts = []
    for act in ("erf", "relu"):
        big = _find(rows_, f"{act} MLP L=10 NNGP+NTK, P=20000")
        cmp_ = _find(rows_, f"{act} MLP L=10 NNGP+NTK, P=5000")
        law = _find(rows_, f"{act} kernel_blocked cost law")
        expo = law["note"].split("P^")[1].split(" over")[0]
        parts.append(f"{act}: {big['seconds']:.0f} s CPU, peak RSS {_note_number(big['note'], 'peak RSS ')} GiB; "
                     f"plain numpy at P = 5000 {cmp_['ratio']:.1f}× slower; CPU ∝ P^{expo}")
    f32 = _find(rows_, "float32 error")
    reg = _find(rows_, "NNGP kernel regression, P=20000")
    flow = _find(rows_, "NTK gradient-flow limit", "P=20000")
    meas = ("; ".join(parts) + f"; float32 storage: max relative error {_note_number(f32['note'], 'vs float64: erf ')}"
            f" · NNGP regression {reg['seconds']:.0f} s CPU, {_note_number(reg['note'], 'peak RSS ')} GiB; "
            f"NTK flow limit {flow['seconds']:.0f} s CPU, {_note_number(flow['note'], 'peak RSS ')} GiB"
            " — `python benchmarks/run.py bigp`")
    ok = all(float(_note_number(r["note"], "peak RSS ")) < 7.45 for r in
             (_find(rows_, "erf MLP L=10 NNGP+NTK, P=20000"), _find(rows_, "relu MLP L=10 NNGP+NTK, P=20000"), reg, flow))
    return f"{BIGP} | {meas} | < 8 GB: {'met' if ok else '**not met**'} |"


def _largep_row(rows_):
    """The large-P path's row, once its benchmark rows exist (``LIMITS_BENCH_BIGP=cg python benchmarks/run.py bigp``)."""
    try:
        big = _find(rows_, "dask path (tiles on disk, PCG)")
        its = _find(rows_, "PCG iterations vs P")
        law = _find(rows_, "large-P path cost laws in P")
        cmp_ = _find(rows_, "dask/PCG path vs in-memory Cholesky")
    except (KeyError, StopIteration, ValueError, IndexError):
        return None
    P = big["name"].split("P=")[1].split(",")[0]
    head = big["note"].split(" (tiles")[0]
    rss = big["note"].split("peak RSS ")[1].split(" (bound")[0]
    meas = (f"P = {int(P):,}: {head}; peak RSS {rss}; {big['note'].split('; CG ')[1].split(';')[0]} · "
            f"CG iterations {its['note'].split('pivoted Cholesky: ')[1].split('; tolerance')[0]} · "
            f"{law['note']} · {cmp_['name'].split(':')[0]}: {cmp_['note'].split('; Cholesky CPU')[0]}"
            " — `python benchmarks/run.py bigp`")
    workers = [float(v) for v in big["note"].split("peak RSS driver ")[1].split(", workers ")[1].split(" GiB")[0].split(", ")]
    diff = float(cmp_["note"].split("of the means ")[1].split(",")[0])
    ok = max(workers) < 1.0 and diff <= 1e-8          # a worker holds one tile (≈ 0.1 GiB at block 2048)
    return (f"{LARGEP} | {meas} | worker memory independent of P (< 1 GiB), same mean as Cholesky to 1e-8: "
            f"{'met' if ok else '**not met**'} |")


def _predict_row(rows_):
    parts = []
    ok = True
    for act in ("erf", "relu"):
        npy = _find(rows_, f"{act} MLP depth 9", "plain numpy")
        nt = _find(rows_, f"{act} MLP depth 9", "neural-tangents")
        r_np = npy["baseline_cpu_seconds"] / npy["cpu_seconds"]
        r_nt = nt["baseline_cpu_seconds"] / nt["cpu_seconds"]
        how = "steady state" if "timing" in nt else "incl. compile"
        parts.append(f"{act} {npy['cpu_seconds']:.1f} s CPU: plain numpy {r_np:.1f}× slower, "
                     f"neural-tangents ({how}) {r_nt:.1f}× slower (CPU; {nt['ratio']:.1f}× wall)")
        ok = ok and r_nt >= 2.0
    return (f"{PREDICT} | {'; '.join(parts)} — `python benchmarks/run.py predict` | ≥ 2× NT: "
            f"{'met' if ok else '**not met**'} |")


DIGITS = ("| predictions on digits (P = 1200 train / 400 test, 10 outputs, depth-3 MLP): `nngp_posterior`; "
          "`gradient_descent` flow, mean + covariance at 20 times")
COLD = "| cold start (fresh interpreter, CPU): small `limits nngp`; `import limits` + first gelu kernel, P = 3000"
SAMPLER = "| finite Monte Carlo kernels: sampler chosen by a cost model (`method=\"auto\"`) over width × P"


def _digits_row(rows_):
    parts, missed = [], []
    for r in [r for r in rows_ if r["name"].startswith("digits P=1200/400")]:
        act = r["name"].split(", ")[1].split(" ")[0]
        what = "posterior" if "nngp_posterior" in r["name"] else "GD"
        nt = "NT skipped" if r.get("nt_ratio") is None else f"NT {r['nt_ratio']:.1f}× slower (steady state)"
        parts.append(f"{act} {what} {r['cpu_seconds']:.2f} s: plain numpy {r['ratio']:.2f}× slower, {nt}")
        if r["ratio"] < 2.0 or (r.get("nt_ratio") or 0.0) < 2.0:
            missed.append(f"{act} {what}")
    if not parts:
        raise ValueError("no digits prediction rows in the benchmark data")
    status = "met" if not missed else ("**not met** vs plain numpy for " + ", ".join(missed)
                                       + " (the kernel recursion and the O(P³) eigendecomposition dominate, as in numpy)")
    return f"{DIGITS} | {'; '.join(parts)} (CPU) — `python benchmarks/run.py predict` | ≥ 2× numpy and NT: {status} |"


def _cold_row(rows_):
    small = _find(rows_, "cold limits nngp")
    first = _find(rows_, "cold import limits + first kernel")
    nt = ("NT skipped" if first.get("ratio") is None else
          f"neural-tangents' first call incl. compile {first['baseline_cpu_seconds']:.2f} s ({first['ratio']:.2f}×)")
    ok = small["cpu_seconds"] < 1.0 and (first.get("ratio") or 0.0) > 1.0
    return (f"{COLD} | `limits nngp --random 20 5 --depth 3` {small['cpu_seconds']:.2f} s; import + first kernel "
            f"{first['cpu_seconds']:.2f} s vs {nt} — `python benchmarks/run.py cli` | < 1 s; faster than NT's first "
            f"call: {'met' if ok else '**not met**'} |")


def _sampler_row(rows_):
    r = _find(rows_, "finite MC sampler choice")
    n = r["note"].count(" auto=")
    return (f"{SAMPLER} | worst chosen / faster sampler {r['ratio']:.2f}× over {n} (network, width, P) cells, 64 inits "
            f"— `python benchmarks/run.py finite` | ≤ 1.2×: {'met' if r['ratio'] <= 1.2 else '**not met**'} |")


PC = "| linear predictive coding: equilibrated energy (`pc.equilibrium_energy`) vs jpc, equilibrium, κ(H_z) at N = H = 512"


def _pc_row(rows_):
    parts, ok = [], True
    for N, L in ((256, 65), (1024, 64)):
        r = _find(rows_, f"pc equilibrated energy N={N} L={L}")
        head = r["note"].split(" | ")[0]
        ours = float(_note_number(head, "ours "))
        numpy = float(_note_number(head, "numpy "))
        peer = [seg for seg in r["note"].split(" | ") if seg.startswith("jpc ")]
        if peer and "jpc " in head:
            jpc = float(_note_number(head, "jpc "))
            who = peer[0].split(" (")[0].replace(" linear_equilib_energy", "")
            parts.append(f"N = {N}, L = {L}: {ours:.1f} ms CPU, {who}'s `linear_equilib_energy` (jit) "
                         f"{jpc / ours:.2f}× slower, plain numpy of the same formula {numpy / ours:.2f}× our time")
            ok = ok and jpc > ours
        else:
            parts.append(f"N = {N}, L = {L}: {ours:.1f} ms CPU, jpc skipped, plain numpy {numpy / ours:.2f}× our time")
            ok = False
    eq = _find(rows_, "pc equilibrium N=1024")
    dense = _find(rows_, "pc equilibrium vs dense")
    kap = [_find(rows_, f"kappa(H_z) {k} N=512") for k in ("sp", "mupc 1-skip")]
    cpu = [float(_note_number(k["note"], "; CPU ")) for k in kap]
    rss = max(float(_note_number(k["note"], "maxrss ")) for k in kap)
    meas = (f"energy, B = 64 — {'; '.join(parts)} · equilibrium N = 1024, L = 64: {eq['seconds']:.2f} s, the dense "
            f"H_z solve at N = 256, H = 64 {dense['ratio']:.0f}× slower · κ(H_z) SP / μPC 1-skip: {cpu[0]:.0f} / "
            f"{cpu[1]:.0f} s CPU, peak RSS {rss:.2f} GB — `python benchmarks/run.py pc` (jpc: benchmarks/README.md)")
    ok_all = ok and eq["seconds"] < 1.0 and dense["ratio"] >= 100 and max(cpu) < 300 and rss < 8
    return (f"{PC} | {meas} | faster than jpc; < 1 s; ≥ 100×; < 5 min, < 8 GB: "
            f"{'met' if ok_all else '**not met**'} |")


LAYERS = ("| CNN-GP + CNTK of 8×8 digits (`limits.serial`: 3 × [Conv 3×3 SAME, ReLU] → GlobalAvgPool → Dense), "
          "P = 1000, vs neural-tangents")


def _layers_row(rows_):
    """The composition benchmark's row (``LIMITS_BENCH_LAYERS=full python benchmarks/run.py layers``)."""
    try:
        big = _find(rows_, "P=1000 8x8")
    except ValueError:
        return None
    law = _find(rows_, "cost law (ours)")
    if "baseline_seconds" not in big:
        return (f"{LAYERS} | P = 1000: {big['seconds']:.0f} s CPU; neural-tangents skipped ({big['note']}) — "
                "`LIMITS_BENCH_LAYERS=full python benchmarks/run.py layers` | faster than neural-tangents' steady "
                "state on CPU: **not measured** |")
    small = sorted([r for r in rows_ if r.get("P") and r["P"] < 1000 and "baseline_seconds" in r and not r.get("strided")],
                   key=lambda r: (r["side"], r["P"]))
    how = "estimated" if big.get("nt_steady_estimated") else "measured"
    first = big["nt_first_seconds"]
    first = "did not finish" if first != first else f"{first:.0f} s"
    note = big["note"]
    detail = note[note.index("; neural-tangents ") + 2:] if "; neural-tangents " in note else note
    nt = f"neural-tangents steady state {big['baseline_seconds']:.0f} s ({how}: {detail}), its first call (incl. jit) {first}"
    diff = big.get("max_rel_diff", float("nan"))
    diff = f"max rel. difference {diff:.1e}" if diff == diff else "kernels not compared (no neural-tangents output)"
    others = "; ".join(f"{r['side']}×{r['side']} P = {r['P']}: {r['seconds']:.2f} s vs NT {r['baseline_seconds']:.2f} s "
                       f"({r['ratio']:.2f}×)" for r in small)
    meas = (f"P = 1000: {big['seconds']:.0f} s CPU, peak {big['peak_bytes'] / 2**20:.0f} MiB (numpy allocations); "
            f"{nt}; NT / ours {big['ratio']:.2f}×; {diff} · {others} · "
            f"{law['note']} — `LIMITS_BENCH_LAYERS=full python benchmarks/run.py layers`")
    if "timing" not in big:
        meas = meas.replace(" — `LIMITS_BENCH", " · P = 1000 timed 2026-11-27 by the earlier protocol (one call each, "
                            "neural-tangents concurrently, ours under tracemalloc; not re-measured: about three CPU-hours "
                            "on this machine) — `LIMITS_BENCH", 1)
    ok = big["ratio"] > 1 and all(r["ratio"] > 1 for r in small)
    return f"{LAYERS} | {meas} | faster than neural-tangents' steady state on CPU: {'met' if ok else '**not met**'} |"


STRIDED = ("| down-sampling CNN-GP + CNTK of 8×8 digits (3 × [Conv 3×3 SAME, ReLU] with strides 1, 2, 2 → GlobalAvgPool "
           "→ Dense): vs its stride-1 version, plain numpy and neural-tangents")


def _strided_row(rows_):
    """The down-sampling network's row (``python benchmarks/bench_layers.py --strided --merge
    benchmarks/results/layers.json``): per P ours (CPU, wall), the stride-1 version, plain numpy, NT."""
    parts, ok = [], True
    for r in sorted(rows_, key=lambda r: r["P"]):
        nt = "NT skipped"
        if "baseline_seconds" in r:
            nt = (f"NT steady {r['baseline_seconds']:.2f} s = {_x(r['ratio'])} (wall {_x(r['nt_wall_ratio'])}; its first "
                  f"call incl. jit {r['nt_first_seconds']:.2f} s), max rel. diff {r['max_rel_diff']:.1e}")
        parts.append(f"P = {r['P']}: {r['seconds']:.2f} s CPU ({r['wall']:.2f} s wall); stride-1 version "
                     f"{r['stride1_seconds']:.2f} s ({_x(r['stride1_ratio'])}); plain numpy {_x(r['numpy_ratio'])} "
                     f"(wall {_x(r['numpy_wall_ratio'])}); {nt}")
        ok = ok and r["stride1_ratio"] > 1.5 and r["numpy_ratio"] > 1 and r.get("ratio", 0.0) > 1
    meas = ("; ".join(parts) + ". Floor: the first layer keeps the full 8×8 resolution (64² position pairs, as in the "
            "stride-1 network), the strided ones cost 16² and 4² — `python benchmarks/bench_layers.py --strided "
            "--merge benchmarks/results/layers.json`")
    return (f"{STRIDED} | {meas} | a fraction of the stride-1 cost, faster than plain numpy and neural-tangents: "
            f"{'met' if ok else '**not met**'} |")


COMPOSITIONS = ("| issue 36 compositions (`limits.serial`, packed pairs of inputs): CNN-GP + CNTK of 8×8 digits (3 × "
                "[Conv 3×3 SAME, ReLU] → GlobalAvgPool / Flatten → Dense) and attention + LayerNorm on 16 / 32 tokens, vs "
                "plain numpy and neural-tangents")
GOALS = {"cnn-gap": 4.0, "cnn-flatten": 4.0, "attn-ln-16": 2.0, "attn-ln-32": 2.0}     # × neural-tangents


def _compositions_row(rows_):
    """Issue 36's rows (``nice python benchmarks/bench_compositions.py --merge benchmarks/results/compositions.json``):
    per case and P ours (CPU, peak), plain numpy and neural-tangents ratios, the floor; goals 1 (≥ 4× NT)
    and 3 (≥ 2× NT) met when every measured row of the case reaches them."""
    parts, verdicts = [], []
    for case, goal in GOALS.items():
        rs = sorted([r for r in rows_ if r.get("case") == case and not r.get("packing")], key=lambda r: r["P"])
        if not rs:
            continue
        cells = []
        for r in rs:
            wall = (_x(r["nt_wall_ratio"]) if (r.get("nt_wall_ratio") or 0) > 0 else
                    "not known: its compile share exceeded the call under load")
            nt = (f"NT {_x(r['ratio'])} (wall {wall}, max RSS {r['nt_maxrss'] / 2**20:.0f} MiB)"
                  if "ratio" in r else "NT skipped")
            fl = f", {r['floor_ratio']:.1f}× the floor {r['floor_seconds']:.2f} s" if "floor_ratio" in r else ""
            cells.append(f"P = {r['P']}: {r['seconds']:.2f} s CPU, peak {r['peak_bytes'] / 2**20:.0f} MiB{fl}; numpy "
                         f"{_x(r['numpy_ratio'])} (peak {r['numpy_peak_bytes'] / 2**20:.0f} MiB); {nt}")
        ok = all(r.get("ratio", 0.0) >= goal for r in rs)
        parts.append(f"{case}: " + "; ".join(cells))
        verdicts.append(f"{case} ≥ {goal:g}× NT: {'met' if ok else '**not met**'}")
    if not parts:
        return None
    pk = [r for r in rows_ if r.get("packing")]
    if pk:
        parts.append("packing (goal 4; symmetric K(X, X) vs the cross kernel of X and a copy): " + "; ".join(
            f"{r['case']} P = {r['P']}: cross / symmetric {_x(r['cross_ratio'])} (ideal {_x(r['ideal_ratio'])})"
            for r in pk))
        verdicts.append("packing within 10 % of ideal: " + ("met" if all(r["left"] <= 0.10 for r in pk) else "**not met**"))
    meas = (" · ".join(parts) + " — floor (timed in the same run): CNNs 16 additions per 3×3 conv layer (NNGP + "
            "NTK) and one arctan per ReLU layer per pair of positions (Flatten: equal positions only); attention one "
            "arctan per pair of positions and four T×T matrix products per pair of inputs — `nice python "
            "benchmarks/bench_compositions.py --merge benchmarks/results/compositions.json`")
    return f"{COMPOSITIONS} | {meas} | {'; '.join(verdicts)} |"


TILES = ("| issue 36 images beyond one machine: CNN-GP + CNTK of 16×16 digits (8×8 digits and their mirror images, "
         "each pixel repeated 2×2 by `np.kron`; 3 × [Conv 3×3 SAME, ReLU] → Flatten → Dense) as a tile store filled on "
         "dask, 2 workers (`kernels.kernel_blocked(net, X, out=DIR, backend=\"dask\")`), interrupted and resumed")


def _tiles_row(rows_):
    """Goal 5's row (``nice python benchmarks/bench_tiles.py --P 2000 --json benchmarks/results/tiles.json``): met
    when P ≥ 2000 at ≥ 16×16, the run was interrupted with some but not all tiles on disk, the resumed store
    computed only the missing tiles and equals the one-shot store bit
    for bit, the serial tiles equal the dask tiles, and the tiles equal the in-memory kernel to 1e-12."""
    parts, ok = [], True
    for r in sorted(rows_, key=lambda r: r["P"]):
        it = r["interrupt"]
        rss = ", ".join(f"{v / 2**30:.2f}" for v in r["worker_peak_rss"])
        parts.append(
            f"P = {r['P']}, {r['tiles']} tiles of {r['block']}: {r['cpu_seconds']:.0f} s CPU (tasks "
            f"{r['task_cpu_seconds']:.0f} s, driver {r['driver_cpu_seconds']:.0f} s, the rest the workers' dask), wall "
            f"{r['wall']:.0f} s; worker peak RSS {rss} GiB (one task estimated {r['task_memory_estimate'] / 2**20:.0f} "
            f"MiB); {r['disk_bytes'] / 2**20:.0f} MiB of tiles (estimate {r['disk_bytes_estimate'] / 2**20:.0f} MiB); "
            f"in-memory `kernels.kernel` {r['baseline_cpu_seconds']:.0f} s CPU, {r['baseline_maxrss'] / 2**30:.2f} GiB "
            f"(the tiles on dask take {_x(r['cpu_seconds'] / r['baseline_cpu_seconds'])} its CPU); Ctrl-C at {it['kept']} tiles on disk → the rerun computed "
            f"{it['resume_computed']} ({'only the missing' if it['only_missing'] else '**not only the missing**'}), "
            f"every tile file {'equal' if it['bit_identical'] else '**not equal**'} to the one-shot run's; "
            f"{r['serial_equal']} of {r['serial_checked']} tiles recomputed serially equal bit for bit; vs "
            f"`kernels.kernel` on {r['checked_inputs']} inputs max rel. diff {r['max_rel_diff']:.1e}; "
            f"{r['progress_lines']} progress lines (stderr not a terminal)")
        ok = ok and r["P"] >= 2000 and r["side"] >= 16 and 0 < it["kept"] < r["tiles"] and it["only_missing"] and \
            it["bit_identical"] and \
            r["serial_equal"] == r["serial_checked"] and r["max_rel_diff"] <= 1e-12
    meas = "; ".join(parts) + " — `nice python benchmarks/bench_tiles.py --P 2000 --json benchmarks/results/tiles.json`"
    return (f"{TILES} | {meas} | P ≥ 2000 at 16×16 on dask, resumed = one-shot bit for bit: "
            f"{'met' if ok else '**not met**'} |")


def rows(path=DATA):
    data = _load(path)
    out = [_closed_row(data), _variance_row(data)]
    others = all_rows(Path(path).parent) if Path(path).parent == DATA.parent else []
    mods = {r["module"] for r in others}
    if "bigp" in mods:
        out.append(_bigp_row([r for r in others if r["module"] == "bigp"]))
        lp = _largep_row([r for r in others if r["module"] == "bigp"])
        if lp is not None:
            out.append(lp)
    if "pc" in mods:
        out.append(_pc_row([r for r in others if r["module"] == "pc"]))
    if "predict" in mods:
        out.append(_predict_row([r for r in others if r["module"] == "predict"]))
        if any(r["name"].startswith("digits P=1200/400") for r in others):
            out.append(_digits_row([r for r in others if r["module"] == "predict"]))
    if any(r["module"] == "cli" and r["name"].startswith("cold import limits") for r in others):
        out.append(_cold_row([r for r in others if r["module"] == "cli"]))
    if any(r["module"] == "finite" and r["name"].startswith("finite MC sampler choice") for r in others):
        out.append(_sampler_row([r for r in others if r["module"] == "finite"]))
    if "layers" in mods:
        lr = _layers_row([r for r in others if r["module"] == "layers"])
        if lr is not None:
            out.append(lr)
        st = [r for r in others if r["module"] == "layers" and r.get("strided")]
        if st:
            out.append(_strided_row(st))
    if "compositions" in mods:
        cr = _compositions_row([r for r in others if r["module"] == "compositions"])
        if cr is not None:
            out.append(cr)
    if "tiles" in mods:
        out.append(_tiles_row([r for r in others if r["module"] == "tiles"]))
    return out


def replace(readme: str, new_rows) -> str:
    """Page text with the generated rows in place of the lines starting with the same first cell."""
    lines = readme.splitlines()
    for row in new_rows:
        head = row.split(" | ")[0]
        hits = [i for i, ln in enumerate(lines) if ln.startswith(head)]
        if len(hits) != 1:
            raise ValueError(f"expected one row starting with {head!r}, found {len(hits)}")
        lines[hits[0]] = row
    return "\n".join(lines) + ("\n" if readme.endswith("\n") else "")


# ------------------------------------------------------------------------------------- the README's compact table
PAGE = ROOT / "docs/performance.rst"               # the full rows
README = ROOT / "README.md"                            # the compact table and its figure
BEGIN, END = "<!-- benchmarks:begin (python benchmarks/readme_rows.py --write) -->", "<!-- benchmarks:end -->"
MACHINE_BEGIN = "<!-- benchmark-machine:begin (python benchmarks/readme_rows.py --write) -->"
MACHINE_END = "<!-- benchmark-machine:end -->"
FIGURE = ROOT / "benchmarks" / "results" / "readme" / "ratios.png"     # beside its numbers, ratios.json

# (workload as the README names it, module, words of the row's name, key of ours, key of neural-tangents')
COMPACT = [
    ("NNGP + NTK, residual erf network, P = 1000, L = 100", "kernels", ("residual erf NNGP+NTK, P=1000",),
     "cpu_seconds", "nt_cpu"),
    ("NNGP + NTK, relu MLP, P = 1000, L = 10", "kernels", ("relu MLP NNGP+NTK, P=1000",), "cpu_seconds", "nt_cpu"),
    ("cross kernel, relu MLP, 2000 × 600 inputs, L = 5", "kernels", ("cross relu MLP",), "cpu_seconds", "nt_cpu"),
    ("CNN-GP + CNTK, 8×8 digits, global pooling, P = 200", "compositions", ("composition cnn-gap P=200",),
     "seconds", "baseline_seconds"),
    ("CNN-GP + CNTK, down-sampling CNN, P = 200", "layers", ("down-sampling", "P=200"), "seconds", "baseline_seconds"),
    ("CNN-GP + CNTK, 8×8 digits, Flatten, P = 1000", "compositions", ("composition cnn-flatten P=1000",),
     "seconds", "baseline_seconds"),
    ("attention + LayerNorm, 16 tokens, P = 1000", "compositions", ("composition attn-ln-16 P=1000",),
     "seconds", "baseline_seconds"),
    ("attention + LayerNorm, 32 tokens, P = 200", "compositions", ("composition attn-ln-32 P=200",),
     "seconds", "baseline_seconds"),
    ("NTK ensemble prediction, mean + covariance at 50 times, P = 2000", "predict",
     ("erf MLP depth 9", "neural-tangents"), "cpu_seconds", "baseline_cpu_seconds"),
    ("NNGP posterior on digits, P = 1200, 10 outputs", "predict", ("digits P=1200/400, relu", "nngp_posterior"),
     "cpu_seconds", "nt_cpu_seconds"),
]


def compact_data(folder=DATA.parent) -> list[dict]:
    """The README's workloads with ours and neural-tangents' steady-state CPU seconds and their ratio (NT / ours);
    a workload whose data lack neural-tangents' time is left out."""
    rows_, out = all_rows(folder), []
    for label, mod, words, ours, peer in COMPACT:
        r = _find([r for r in rows_ if r["module"] == mod], *words)
        if r.get(peer) is None:
            continue
        out.append({"workload": label, "limits": float(r[ours]), "peer": float(r[peer]),
                    "ratio": float(r[peer]) / float(r[ours]), "row": r["name"], "module": mod})
    return out


def compact_rows(folder=DATA.parent) -> list[str]:
    lines = ["| workload | limits (CPU s) | neural-tangents (CPU s) | neural-tangents / limits |", "|---|---:|---:|---:|"]
    for d in compact_data(folder):
        lines.append(f"| {d['workload']} | {_secs(d['limits'])} | {_secs(d['peer'])} | {d['ratio']:.1f} |")
    return lines


def _secs(t):
    return f"{t:.3f}" if t < 1 else f"{t:.2f}" if t < 100 else f"{t:.0f}"


def machine_lines(folder=DATA.parent) -> list[str]:
    """One sentence: the machine and the load under which the compact table's rows were measured (from the rows)."""
    rows_ = all_rows(folder)
    data = compact_data(folder)
    ms = [r["machine"] for d in data for r in rows_ if r["name"] == d["row"] and "machine" in r]
    old = [d["workload"] for d in data for r in rows_ if r["name"] == d["row"] and "timing" not in r]
    out = []
    if ms:
        loads = [x for m in ms for x in (m["load"][0], m.get("load_after", m["load"])[0])]
        dates = sorted({m["date"] for m in ms})
        out.append(f"Measured {dates[0]}{' – ' + dates[-1] if len(dates) > 1 else ''} on {ms[0]['cores']} cores "
                   f"({ms[0]['cpu']}) shared with other jobs: 1-minute load average {min(loads):.1f}–{max(loads):.1f} "
                   f"while these rows ran.")
    if old:
        out.append(f"Not yet re-measured with this protocol (the earlier run: one or two calls per side, some peers "
                   f"concurrently): {'; '.join(old)}.")
    return out or ["The machine and its load were not recorded for these rows."]


def ratio_figure(data, path=FIGURE):
    """The README's figure: neural-tangents' CPU time over ours per workload (log scale; 1 = as fast)."""
    from limits.style import paper_style, pyplot, save_figure

    plt = pyplot()
    with paper_style():
        fig, ax = plt.subplots(figsize=(7.0, 0.32 * len(data) + 0.9))
        y = list(range(len(data)))[::-1]
        ax.barh(y, [d["ratio"] for d in data], color=["#0072B2" if d["ratio"] >= 1 else "#D55E00" for d in data])
        ax.set_xscale("log")
        ax.axvline(1.0, color="0.3", lw=0.8)
        ax.set_yticks(y, [d["workload"] for d in data], fontsize=7)
        for yi, d in zip(y, data):
            ax.text(d["ratio"] * 1.04, yi, f"{d['ratio']:.1f}×", va="center", fontsize=7)
        ax.set_xlabel("neural-tangents CPU time / limits CPU time (steady state, best of 5, one thread each)", fontsize=7)
        lo, hi = min(0.8, min(d["ratio"] for d in data) * 0.8), max(d["ratio"] for d in data) * 2.0
        ax.set_xlim(lo, hi)
        ticks = [t for t in (0.5, 1, 2, 5, 10, 20, 50, 100) if lo <= t <= hi]
        ax.set_xticks(ticks, [f"{t:g}×" for t in ticks], fontsize=7)
        ax.minorticks_off()
        fig.tight_layout()
        save_figure(fig, path)
        plt.close(fig)
    return path


def write(folder=DATA.parent):
    """Write every generated table and the figure (module docstring)."""
    from limits.results import atomic_write_text, replace_marked_block

    atomic_write_text(PAGE, replace(PAGE.read_text(), rows()))
    replace_marked_block(PAGE, MACHINE_BEGIN, MACHINE_END, machine_lines(folder))
    replace_marked_block(README, BEGIN, END, compact_rows(folder) + [""] + machine_lines(folder))
    data = compact_data(folder)
    FIGURE.parent.mkdir(exist_ok=True)
    atomic_write_text(FIGURE.with_suffix(".json"), json.dumps(data, indent=1) + "\n")
    ratio_figure(data)
    atomic_write_text(TABLE, table_md())
    for begin, end, lines in bench_tables(folder):
        replace_marked_block(BENCH_README, begin, end, lines)


BENCH_README = ROOT / "benchmarks" / "README.md"


def bench_tables(folder=DATA.parent):
    """The tables of benchmarks/README.md generated from the data: (begin marker, end marker, lines)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_compositions
    import bench_layers

    rows_ = all_rows(folder)
    comp = [r for r in rows_ if r["module"] == "compositions"]
    lay = [r for r in rows_ if r["module"] == "layers"]
    mark = "(python benchmarks/readme_rows.py --write) -->"
    return [(f"<!-- compositions-table:begin {mark}", "<!-- compositions-table:end -->",
             bench_compositions.table(comp).splitlines() + [""] + machine_note(comp)),
            (f"<!-- layers-table:begin {mark}", "<!-- layers-table:end -->",
             bench_layers.table(lay).splitlines() + [""] + machine_note(lay))]


def machine_note(rows_) -> list[str]:
    """Where and under which load ``rows_`` ran, and by which protocol (rows without a record: the earlier one)."""
    ms = [r["machine"] for r in rows_ if "machine" in r]
    old = [r["name"] for r in rows_ if "machine" not in r and r.get("P")]
    out = []
    if ms:
        loads = [x for m in ms for x in (m["load"][0], m.get("load_after", m["load"])[0])]
        out.append(f"Measured {min(m['date'] for m in ms)} on {ms[0]['cores']} cores ({ms[0]['cpu']}) shared with other "
                   f"jobs, 1-minute load average {min(loads):.1f}–{max(loads):.1f}.")
    if old:
        out.append(f"Not re-measured with this protocol (timed before 2026-12-07: one or two calls, the peer "
                   f"concurrently, ours under tracemalloc): {'; '.join(old)}.")
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    new = rows()
    if "--write" in argv:
        write()
    print("\n".join(new + [""] + compact_rows()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
