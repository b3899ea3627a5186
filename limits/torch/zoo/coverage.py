"""The zoo coverage tables of ``docs/zoo.rst``, generated from the stored results of ``benchmarks/zoo_study.py``
(JSON under ``benchmarks/results/zoo/``; no torch, no transformers: the docs test reads them in the default suite).

    tables(results_dir) -> str            # every table as reStructuredText
    rows(results_dir) -> list[dict]       # the coverage rows (family, status, rates, drifts …)

A family **passes** when ``parameterise(…, "muP")`` accepts it and its coordinate checks fail no more often than
the nominal α allows (one-sided binomial p ≥ 0.01 of the failing count at α = 0.05); it is **refused** when
``parameterise`` (or the family list) refuses it, with the reason; otherwise the check **fails** and the row names
the tensor it flags most often.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

ALPHA = 0.05
MIN_CHECKS = 10                        # a family's verdict from its calibrated checks once it has this many
SURVEY_LABEL = "merged-8ac3264"        # the survey the layouts table shows (after merging main: ci, torchux, bridge)
SHORT_BUG = {"attention 1/sqrt(d)": "attn", "read-out x sqrt(r)": "read-out", "embedding lr / r": "emb lr",
             "hidden lr x r": "hidden lr"}


def _load(path):
    p = Path(path)
    return json.loads(p.read_text()) if p.exists() else None


def binom_tail(k, n, p):
    """P(X ≥ k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))


def upper95(k, n):
    """One-sided 95 % Clopper–Pearson upper bound of a rate k/n (bisection on the binomial CDF)."""
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if 1 - binom_tail(k + 1, n, mid) > 0.05:      # P(X ≤ k | mid) > 5 %: mid still plausible
            lo = mid
        else:
            hi = mid
    return hi


def _first_sentence(msg, limit=170):
    msg = msg.replace("ValueError: ", "").replace("parameterise: ", "")
    cut = msg.split("; ")[0]
    return cut if len(cut) <= limit else cut[:limit - 1] + "…"


def _attention(rec):
    att = rec.get("attention") or []
    if not att:
        return "none"
    kinds = sorted({a["kind"] for a in att})
    lay = {(a["heads"], a["head_dim"]) for a in att}
    what = "heads ∝ N" if ("scales", "fixed") in lay else "head dim ∝ N" if ("fixed", "scales") in lay else "?"
    q = {a["query_exponent"] for a in att}
    rew = f", query × N^{max(q):+g}" if any(abs(x) > 1e-9 for x in q) else ""
    return f"{len(att)} {'/'.join(kinds)} ({what}{rew})"


def _ties(rec):
    ro = rec.get("readouts") or []
    if not ro:
        return "none"
    return "; ".join(f"{t['readout'].rsplit('.', 1)[0]} = {t['storage'].rsplit('.', 1)[0]} (×N^-{t['exponent']:g})"
                     for t in ro)


def _tensors(rec):
    roles = rec.get("roles") or {}
    if not roles:
        return "—"
    order = ("input", "hidden", "output", "vector", "constant")
    total = sum(roles.values())
    scaled = total - roles.get("constant", 0)
    return f"{scaled}/{total} (" + ", ".join(f"{roles[k]} {k[:3]}" for k in order if roles.get(k)) + ")"


def _false_alarm(rec):
    runs = rec.get("false_alarm") or []
    if not runs:
        return None, "—"
    k, n = sum(not r["passed"] for r in runs), len(runs)
    return (k, n), f"{k}/{n} (≤ {100 * upper95(k, n):.0f} %)"


def _bugs(rec):
    bugs = rec.get("bugs") or {}
    parts = []
    for b, v in bugs.items():
        runs = v["runs"]
        if not runs:
            continue
        f = sum(not r["passed"] for r in runs)
        c = sum(bool(r.get("culprit_first")) for r in runs)
        parts.append(f"{SHORT_BUG.get(b, b)} {f}/{len(runs)} ({c} first)")
    return "; ".join(parts) or "—"


def _drift(tr, param):
    s = (tr or {}).get("studies", (tr or {}).get("transfer", {})).get(param)
    if not s:
        return "—"
    if "refused" in s:
        return "refused"
    lo, hi = s["drift_ci"]
    seeds = tr.get("design", {}).get("seeds") or tr.get("transfer_seeds")
    return f"{s['drift']:+.2f} [{lo:+.2f}, {hi:+.2f}] {s['verdict']}" + (f" ({seeds} seeds)" if seeds else "")


def _status(rec, fa, surveyed=None, eps=None):
    if rec is None:
        return "not measured" if surveyed is None else "survey only: " + _survey_cell(surveyed)
    if rec.get("status") in ("refused", "refused by name"):
        return "refused: " + _first_sentence(rec.get("message", ""))
    if fa is None or fa[1] < MIN_CHECKS:          # a calibrated study still running: the survey's verdict meanwhile
        return ("parameterised (no checks yet)" if surveyed is None else "survey only: " + _survey_cell(surveyed))
    k, n = fa
    if binom_tail(k, n, ALPHA) >= 0.01:
        return "passes" + _eps_condition(rec, eps)
    counts = {}
    for r in rec["false_alarm"]:
        for t in r["failing"][:1]:
            counts[t] = counts.get(t, 0) + 1
    worst = max(counts, key=counts.get) if counts else "?"
    return f"check fails ({k}/{n}; most often {worst})"


def _eps_condition(rec, eps):
    """" with Adam ε ≤ …" for a family checked at a smaller Adam ε than torch's (``adam_eps``), from the ε study
    ``eps`` (its scan's threshold and the gradients behind it)."""
    if rec.get("adam_eps") is None:
        return ""
    thr = eps_threshold(eps or {})
    bound = f"ε ≤ {thr:.0e}" if thr else f"ε = {rec['adam_eps']:.0e}"
    return (f" with Adam {bound} (checked at {rec['adam_eps']:.0e}): torch's ε = 1e-8 exceeds the block gradients "
            "behind the 1e-6 layer scale")


def rows(results, survey_label=SURVEY_LABEL) -> list:
    """One dict per family of :data:`limits.torch.zoo.families.FAMILIES` (module docstring); a family without a
    calibrated study yet shows its verdict in the survey ``survey_label`` (4 seeds, its own head layout)."""
    from .families import FAMILIES

    study = Path(results) / "study"
    s = _load(Path(results) / "survey" / f"{survey_label}.json") or {"rows": []}
    surveyed = {}
    for r in s["rows"]:
        surveyed.setdefault(r["family"], {})[r["layout"]] = r
    out = []
    for fam in FAMILIES:
        sv = surveyed.get(fam.key, {})
        sv = sv.get(fam.layout) or (next(iter(sv.values())) if len(sv) == 1 else None)
        rec = _load(study / f"{fam.key}.check.json")
        tr = _load(study / f"{fam.key}.transfer.json")
        fa, fa_text = _false_alarm(rec or {})
        eps = _load(study / f"{fam.key}.eps.json")
        out.append({"family": fam.title, "key": fam.key, "class": fam.class_name,
                    "layout": (rec or {}).get("layout", fam.layout), "status": _status(rec, fa, sv, eps),
                    "attention": _attention(rec or {}), "ties": _ties(rec or {}), "tensors": _tensors(rec or {}),
                    "false_alarm": fa_text, "bugs": _bugs(rec or {}), "sp": _drift(tr, "SP"),
                    "mup": _drift(tr, "muP"), "note": fam.note})
    return out


def _list_table(header, body, widths=None):
    lines = [".. list-table::", "   :header-rows: 1"]
    if widths:
        lines.append("   :widths: " + " ".join(str(w) for w in widths))
    lines.append("")
    for row in [header] + body:
        lines.append("   * - " + _cell(row[0]))
        lines += ["     - " + _cell(c) for c in row[1:]]
    return "\n".join(lines)


def _cell(c):
    return str(c).replace("|", "¦").replace("*", "×") or "—"


def coverage_table(results) -> str:
    head = ["family", "layout", "verdict", "attention found", "ties", "parameterised tensors",
            "check false alarms", "bugs flagged", "transfer drift SP", "transfer drift μP"]
    body = [[r["family"], r["layout"], r["status"], r["attention"], r["ties"], r["tensors"], r["false_alarm"],
             r["bugs"], r["sp"], r["mup"]] for r in rows(results)]
    return _list_table(head, body)


def layouts_table(results, label) -> str:
    """Both head layouts of every family in the survey ``label``: accepted and checked, or refused and why."""
    from .families import FAMILIES

    s = _load(Path(results) / "survey" / f"{label}.json") or {"rows": []}
    by = {(r["family"], r["layout"]): r for r in s["rows"]}
    body = []
    for fam in FAMILIES:
        cells = []
        for lay in ("heads ∝ N", "head dim ∝ N"):
            r = by.get((fam.key, lay))
            if r is None and lay == "heads ∝ N":
                r = by.get((fam.key, "no attention"))
            cells.append("—" if r is None else _survey_cell(r))
        body.append([fam.title] + cells)
    return _list_table(["family", "heads ∝ N (head dim 16)", "head dim ∝ N (heads fixed)"], body)


def _survey_cell(r):
    if r["status"] == "passed":
        return f"passes ({r['check']['seeds']} seeds)"
    if r["status"] == "check fails":
        f = r["check"]["failures"][0]
        return f"check fails: {f[0]} {f[2]} ∝ N^{f[3]:+.2f}, predicted {f[6]}"
    return f"{r['status']}: " + _first_sentence(r.get("message", ""), 140)


def scaling_table(results) -> str:
    """The HF pull request's criterion, measured (``zoo_study.py scaling``), beside limits' own verdict."""
    s = _load(Path(results) / "scaling.json") or {"rows": []}
    cov = {r["key"]: r["status"] for r in rows(results)}
    body = []
    for r in s["rows"]:
        att = r.get("attention") or []
        used = sum(bool(a.get("has_scaling") and a.get("used")) for a in att)
        body.append([r["family"], r["class"], "yes" if r.get("causal_lm") else "no",
                     f"{used}/{len(att)}" if att else "—", r["verdict"], cov.get(r["family"], "survey only")])
    return _list_table(["family", "class (transformers " + str(s.get("transformers", "?")) + ")", "causal LM",
                        "attention modules with a used scaling", "the pull request's approach", "limits"], body)


def depth_table(results) -> str:
    """Depth-μP vs width-only μP on the depth family: the first check's exponents, how many of the repeated
    checks flag it, and the learning-rate drift per doubling of depth."""
    d = _load(Path(results) / "study" / "depth.json")
    if not d:
        return "(not measured yet)"
    body = []
    for name, runs in d.get("runs", {}).items():
        k, n = sum(not r["passed"] for r in runs), len(runs)
        first = runs[0]["rows"]
        for i, q in enumerate(first):
            body.append([name if i == 0 else "", q["quantity"], q["fitted"], q["predicted"], q["verdict"],
                         f"{k}/{n}" if i == 0 else "", _drift(d, name) if i == 0 else ""])
    return _list_table(["table", "quantity (exponent of L)", "fitted [95 % CI], first check", "predicted",
                        "verdict", "checks flagged", "lr drift per doubling of depth"], body)


EPS_ROWS = ("convnext.embeddings.patch_embeddings.weight", "convnext.encoder.stages.0.layers.0.dwconv.weight",
            "convnext.encoder.stages.0.layers.0.pwconv1.weight", "convnext.encoder.stages.0.layers.0.pwconv2.bias",
            "convnext.encoder.stages.0.layers.0.layer_scale_parameter",
            "convnext.encoder.stages.1.layers.0.pwconv2.weight", "classifier.weight")


def _eps_rate(v):
    k = sum(not r["passed"] for r in v["runs"])
    return k, len(v["runs"])


def eps_threshold(d):
    """The largest constant ε of the scan at and below which no scanned ε's checks fail more often than α allows
    (None if even the smallest does)."""
    scan = sorted((v["eps"], v) for v in d.get("variants", {}).values()
                  if v.get("eps_exponent", 0) == 0 and v.get("layer_scale", 1e-6) != 1.0 and v["runs"])
    best = None
    for eps, v in scan:                       # ascending ε: stop at the first that fails
        k, n = _eps_rate(v)
        if binom_tail(k, n, ALPHA) < 0.01:
            break
        best = eps
    return best


def _eps_of(v, widths):
    e = [v["eps"] * (w / widths[0]) ** -v.get("eps_exponent", 0) for w in widths]
    return f"{e[0]:.0e}" if len(set(e)) == 1 else " … ".join(f"{x:.1e}" for x in (e[0], e[-1]))


def eps_table(results) -> str:
    """ConvNeXt under Adam's ε (``zoo_study.py eps``): the first-step gradients of a few tensors and the fraction of
    the sign step Adam takes at torch's ε = 1e-8, then the check per ε (and at layer scale 1)."""
    d = _load(Path(results) / "study" / "convnext.eps.json")
    if not d:
        return "(not measured yet)"
    ws = d["widths"]
    body = []
    for name in EPS_ROWS:
        g = d["gradients"].get(name)
        if g:
            body.append([name.replace("convnext.", "").replace("encoder.stages.", "stage "),
                         " · ".join(f"{x:.0e}" for x in g["rms"]), f"{g['exponent']:+.2f}",
                         " · ".join(f"{x:.2f}" for x in g["sign_fraction"])])
    grads = _list_table([f"tensor (first step, {len(ws)} widths {ws[0]}…{ws[-1]})", "RMS gradient", "exponent",
                         "|g| / (|g| + 1e-8): Adam's fraction of the sign step"], body)
    body = []
    for name, v in d["variants"].items():
        k, n = _eps_rate(v)
        first = [r["failing"][0] for r in v["runs"] if r["failing"]]
        body.append([name, _eps_of(v, ws), f"{k}/{n}", max(set(first), key=first.count) if first else "—"])
    thr = eps_threshold(d)
    checks = _list_table(["ConvNeXt variant", "Adam ε at N = " + f"{ws[0]} … {ws[-1]}",
                          f"checks flagged ({d.get('seeds', 10)} seeds each)", "tensor named first most often"],
                         body)
    note = (f"The check passes for every scanned constant ε ≤ {thr:.0e}." if thr else
            "No scanned constant ε passes the check.")
    return grads + "\n\n" + checks + "\n\n" + note


def _short_drift(tr_cell):
    """"-0.89 [-0.97, -0.76] drifts" → "-0.89 drifts"."""
    if tr_cell in ("—", "refused"):
        return tr_cell
    return tr_cell.split(" [")[0] + " " + tr_cell.rsplit("] ", 1)[1].split(" (")[0]


def _short_bugs(rec):
    runs = [r for v in (rec.get("bugs") or {}).values() for r in v["runs"]]
    if not runs:
        return "—"
    return f"{sum(not r['passed'] for r in runs)}/{len(runs)}"


def short_table(results, survey_label=SURVEY_LABEL) -> str:
    """The coverage table in short, as markdown (for the README): one row per family that passes, one row for the
    families refused (their reasons are in docs/zoo.rst), one per family whose check fails."""
    study = Path(results) / "study"
    head = ["model family (transformers, unmodified)", "μP", "false alarms", "bugs flagged",
            "lr drift per width doubling, SP / μP"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    refused = []
    for r in rows(results, survey_label):
        if r["status"].startswith("refused"):
            refused.append(r["family"])
            continue
        rec = _load(study / f"{r['key']}.check.json") or {}
        verdict = r["status"].split(" (checked at")[0].replace("survey only: ", "")
        lines.append(f"| {r['family']} | {verdict} | {r['false_alarm'].split(' (')[0]} | {_short_bugs(rec)} | "
                     f"{_short_drift(r['sp'])} / {_short_drift(r['mup'])} |")
    if refused:
        lines.append(f"| {', '.join(refused)} | refused, naming the module and what is not derived | — | — | — |")
    return "\n".join(lines)


def tables(results, survey_label) -> dict:
    """{marker name: reST table} for the docs page."""
    return {"coverage": coverage_table(results), "layouts": layouts_table(results, survey_label),
            "scaling": scaling_table(results), "depth": depth_table(results), "eps": eps_table(results)}


__all__ = ["rows", "tables", "short_table", "eps_threshold", "coverage_table", "layouts_table", "scaling_table", "depth_table", "upper95",
           "binom_tail"]
