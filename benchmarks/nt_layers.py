"""Agreement of ``limits.kernels.kernel`` on compositions (``limits.serial``) with neural-tangents 0.6.5.

    python benchmarks/nt_layers.py            # prints the markdown table; exit 1 if a row exceeds 1e-10
    python benchmarks/nt_layers.py --fixture  # … and writes NT's kernels to tests/layers/data/nt_reference.npz
                                              # (the tests compare against it without neural-tangents)
    python benchmarks/nt_layers.py --from-fixture   # the table from the stored kernels (no neural-tangents needed)

neural-tangents runs in the optional peer interpreter (``LIMITS_NT_PYTHON``; ``python
benchmarks/make_peer_env.py``), never imported here. Each composition is sent as its JSON form and
translated there into ``stax`` layers: Dense/Conv (W_std = √σ_w², b_std = √σ_b², NTK parameterisation),
Relu/Erf/Gelu, Flatten, GlobalAvgPool, AvgPool (VALID / SAME, normalize_edges), LayerNorm(axis=-1),
GlobalSelfAttention(linear_scaling=True, W_key_std = qk_scale, W_value_std = √σ_w²), and
Residual(branch, ρ) = FanOut(2) → parallel(Identity, branch with its last layer's stds × ρ) → FanInSum.
Reported: max |ours − NT| / max |NT| for the NNGP, the NTK off the diagonal and the NTK's diagonal
(x = x'). On the diagonal a ReLU NTK needs E[φ'(u)φ'(v)] at correlation exactly 1 (= 1/2), where its
derivative in c is infinite: ours keeps an input's variance and its kernel with itself the same float
(``Kernel.synced``), so c = 1 exactly, in both representations (which agree to rounding); neural-tangents
rounds its self-covariances separately, so its diagonal carries errors up to ~1e-9 in some compositions.
The agreement criterion (1e-10) is applied to the NNGP and the off-diagonal NTK; the diagonal column
is shown for completeness.
"""
import hashlib
import io
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import run_peer  # noqa: E402

import limits  # noqa: E402

L = limits.layers
ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-10


def cases():
    """(name, composition, input shape) — compositions both libraries support: the CNN / LayerNorm / attention /
    residual rows, then :func:`strided_cases` and :func:`embedding_cases`."""
    conv = lambda **kw: L.Conv(filter_shape=(3, 3), **kw)  # noqa: E731
    return [
        ("CNN + global average pooling", limits.serial(conv(padding="SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                                                       conv(padding="SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                                                       L.GlobalAvgPool(), L.Dense(sigma_w2=1.0, sigma_b2=0.0)), (6, 6, 6, 3)),
        ("CNN + flatten (no pooling)", limits.serial(conv(padding="SAME", sigma_w2=1.5, sigma_b2=0.05), L.Activation("erf"),
                                                     conv(padding="CIRCULAR", sigma_w2=1.5, sigma_b2=0.05), L.Activation("relu"),
                                                     L.Flatten(), L.Dense(sigma_w2=1.0, sigma_b2=0.1)), (6, 6, 6, 3)),
        ("CNN + AvgPool 2×2 + flatten", limits.serial(conv(padding="CIRCULAR", sigma_w2=2.0), L.Activation("relu"),
                                                      L.AvgPool((2, 2)), L.Flatten(), L.Dense(sigma_w2=1.0)), (5, 6, 6, 2)),
        ("CNN + AvgPool 3×3 SAME, stride 2 + GAP", limits.serial(conv(padding="SAME", sigma_w2=2.0, sigma_b2=0.1), L.Activation("relu"),
                                                               L.AvgPool((3, 3), strides=(2, 2), padding="SAME"), conv(padding="SAME", sigma_w2=2.0),
                                                               L.Activation("relu"), L.GlobalAvgPool(), L.Dense(sigma_w2=1.0)), (5, 7, 6, 2)),
        ("CNN + AvgPool 2×3 SAME, normalize_edges + flatten", limits.serial(conv(padding="SAME", sigma_w2=1.5, sigma_b2=0.2), L.Activation("erf"),
                                                                            L.AvgPool((2, 3), strides=(1, 2), padding="SAME", normalize_edges=True),
                                                                            L.Flatten(), L.Dense(sigma_w2=1.0, sigma_b2=0.1)), (5, 5, 6, 2)),
        ("1-D CNN (filter 5) + pooling", limits.serial(L.Conv(filter_shape=(5,), padding="SAME", sigma_w2=1.7, sigma_b2=0.2),
                                                       L.Activation("gelu"), L.GlobalAvgPool(), L.Dense()), (5, 9, 3)),
        ("residual CNN", limits.serial(conv(padding="SAME", sigma_w2=1.0, sigma_b2=0.1),
                                       L.Residual(limits.serial(L.Activation("relu"), conv(padding="SAME", sigma_w2=2.0, sigma_b2=0.1)), rho=0.7),
                                       L.Residual(limits.serial(L.Activation("relu"), conv(padding="CIRCULAR", sigma_w2=2.0)), rho=0.7),
                                       L.Activation("relu"), L.GlobalAvgPool(), L.Dense(sigma_w2=1.0, sigma_b2=0.0)), (5, 5, 5, 3)),
        ("LayerNorm MLP", limits.serial(L.Dense(sigma_w2=1.0, sigma_b2=0.1), L.LayerNorm(), L.Activation("erf"),
                                        L.Dense(sigma_w2=1.5, sigma_b2=0.1), L.LayerNorm(), L.Activation("relu"),
                                        L.Dense(sigma_w2=1.0, sigma_b2=0.0)), (8, 7)),
        ("attention + dense", limits.serial(L.Dense(sigma_w2=1.0, sigma_b2=0.1),
                                            L.Attention(n_heads=2, qk_scale=0.8, sigma_w2=1.3, sigma_b2=0.05),
                                            L.Activation("relu"), L.Dense(sigma_w2=2.0, sigma_b2=0.1),
                                            L.GlobalAvgPool(), L.Dense()), (5, 6, 4)),
        ("MLP = limits.mlp(...).to_serial()", limits.mlp(7, 3, activation="relu", sigma_w2=2.0, sigma_b2=0.1).to_serial(), (8, 7)),
    ] + strided_cases() + embedding_cases()


def _c(fs, s, pad, w=2.0, b=0.1):
    return L.Conv(filter_shape=fs, strides=s, padding=pad, sigma_w2=w, sigma_b2=b)


def strided_cases():
    """Strided / VALID convolutions (issue 33 item 3): 1-D and 2-D, strides 1–3, VALID / SAME / CIRCULAR, odd
    and even sizes, filters larger than a stride and than the input (CIRCULAR wraps more than once), pooling
    after a strided convolution, Flatten and GlobalAvgPool read-outs, relu / erf; 2-D axes above
    ``limits.layers.conv.DENSE_MAX`` take the strided-slice path, the others the small-matrix path."""
    R, E = L.Activation("relu"), L.Activation("erf")
    gap, flat, out = L.GlobalAvgPool(), L.Flatten(), L.Dense(sigma_w2=1.0, sigma_b2=0.05)
    s = limits.serial
    return [
        ("2-D VALID 3×3 s1 → VALID 2×2 s2 → GAP", s(_c((3, 3), (1, 1), "VALID"), R, _c((2, 2), (2, 2), "VALID"), R, gap, out), (4, 8, 8, 2)),
        ("2-D VALID 3×3 s2 → flatten (7×7)", s(_c((3, 3), (2, 2), "VALID", 1.5, 0.2), E, flat, out), (4, 7, 7, 2)),
        ("2-D VALID 4×4 s3 → GAP (9×8)", s(_c((4, 4), (3, 3), "VALID"), R, gap, out), (4, 9, 8, 2)),
        ("2-D SAME 3×3 s2 → SAME 3×3 s2 → GAP (8×8)", s(_c((3, 3), (2, 2), "SAME"), R, _c((3, 3), (2, 2), "SAME"), R, gap, out), (4, 8, 8, 2)),
        ("2-D SAME 3×3 s2 → flatten (7×7)", s(_c((3, 3), (2, 2), "SAME", 1.5, 0.0), E, flat, out), (4, 7, 7, 2)),
        ("2-D SAME 2×2 s3 → flatten (8×7)", s(_c((2, 2), (3, 3), "SAME"), R, flat, out), (4, 8, 7, 2)),
        ("2-D SAME 4×3 s(2, 3) → GAP (7×8)", s(_c((4, 3), (2, 3), "SAME"), R, gap, out), (4, 7, 8, 2)),
        ("2-D CIRCULAR 3×3 s2 → CIRCULAR 3×3 s1 → GAP", s(_c((3, 3), (2, 2), "CIRCULAR"), R, _c((3, 3), (1, 1), "CIRCULAR"), R, gap, out), (4, 8, 8, 2)),
        ("2-D CIRCULAR 2×2 s3 → flatten (7×8)", s(_c((2, 2), (3, 3), "CIRCULAR", 1.5, 0.2), E, flat, out), (4, 7, 8, 2)),
        ("2-D CIRCULAR 5×5 s2 on 4×3 (filter > input)", s(_c((5, 5), (2, 2), "CIRCULAR"), R, gap, out), (4, 4, 3, 2)),
        ("2-D SAME 1×1 s2 (subsampling) → flatten", s(_c((1, 1), (2, 2), "SAME"), R, flat, out), (4, 7, 7, 2)),
        ("2-D SAME 3×3 s2 → AvgPool 2×2 VALID → flatten", s(_c((3, 3), (2, 2), "SAME"), R, L.AvgPool((2, 2), (2, 2), "VALID"), flat, out), (4, 8, 8, 2)),
        ("2-D VALID 3×3 s2 → AvgPool 3×3 s2 SAME → GAP", s(_c((3, 3), (2, 2), "VALID", 1.5, 0.1), E, L.AvgPool((3, 3), (2, 2), "SAME"), gap, out), (4, 9, 9, 2)),
        ("2-D down-sampling CNN (benchmark network)", s(_c((3, 3), (1, 1), "SAME"), R, _c((3, 3), (2, 2), "SAME"), R,
                                                        _c((3, 3), (2, 2), "SAME"), R, gap, out), (4, 8, 8, 1)),
        ("2-D SAME 3×3 s2 → residual block → GAP", s(_c((3, 3), (2, 2), "SAME"), L.Residual(s(R, _c((3, 3), (1, 1), "SAME")), rho=0.7),
                                                     R, gap, out), (4, 7, 7, 2)),
        ("2-D VALID 3×3 s2 → attention → GAP", s(_c((3, 3), (2, 2), "VALID"), R, L.Attention(1, 0.7, 1.2, 0.1), gap, out), (4, 7, 7, 2)),
        ("2-D SAME 3×3 s2 → CIRCULAR 3×3 s2 → GAP (12×10, slice path)", s(_c((3, 3), (2, 2), "SAME"), R, _c((3, 3), (2, 2), "CIRCULAR"),
                                                                          R, gap, out), (3, 12, 10, 2)),
        ("2-D VALID 3×3 s(3, 1) → flatten (11×6, mixed paths)", s(_c((3, 3), (3, 1), "VALID", 1.5, 0.2), E, flat, out), (4, 11, 6, 2)),
        ("2-D VALID 3×3 s(3, 1) → GAP (11×6, mixed paths)", s(_c((3, 3), (3, 1), "VALID"), R, gap, out), (4, 11, 6, 2)),
        ("1-D VALID 3 s1 → VALID 2 s2 → GAP", s(_c((3,), (1,), "VALID"), R, _c((2,), (2,), "VALID"), R, gap, out), (4, 9, 2)),
        ("1-D VALID 4 s3 → flatten (10)", s(_c((4,), (3,), "VALID", 1.5, 0.2), E, flat, out), (4, 10, 2)),
        ("1-D SAME 3 s2 → SAME 4 s3 → GAP (9)", s(_c((3,), (2,), "SAME"), R, _c((4,), (3,), "SAME"), R, gap, out), (4, 9, 2)),
        ("1-D SAME 2 s2 → flatten (8)", s(_c((2,), (2,), "SAME", 1.5, 0.0), E, flat, out), (4, 8, 2)),
        ("1-D CIRCULAR 3 s2 → CIRCULAR 5 s1 → GAP (8)", s(_c((3,), (2,), "CIRCULAR"), R, _c((5,), (1,), "CIRCULAR"), R, gap, out), (4, 8, 2)),
        ("1-D CIRCULAR 4 s3 → flatten (7)", s(_c((4,), (3,), "CIRCULAR", 1.5, 0.2), E, flat, out), (4, 7, 2)),
        ("1-D CIRCULAR 7 s2 on 5 (filter > input)", s(_c((7,), (2,), "CIRCULAR"), R, gap, out), (4, 5, 2)),
        ("1-D SAME 5 s1 → AvgPool 2 s2 VALID → GAP", s(_c((5,), (1,), "SAME"), R, L.AvgPool((2,), (2,), "VALID"), gap, out), (4, 9, 2)),
        ("1-D VALID 3 s2 → AvgPool 3 s2 SAME → flatten", s(_c((3,), (2,), "VALID"), E, L.AvgPool((3,), (2,), "SAME"), flat, out), (4, 12, 2)),
    ]


def embedding_cases():
    """Attention with positional embeddings added (neural-tangents' pos_emb_type="SUM"; issue 33 item 4)."""
    R = L.Activation("relu")
    s = limits.serial
    att = lambda **kw: L.Attention(pos_emb="SUM", **kw)  # noqa: E731
    return [
        ("attention + positional embedding (keys only)", s(L.Dense(1.0, 0.1), att(n_heads=1, qk_scale=1.0, sigma_pe2=0.8), R,
                                                           L.GlobalAvgPool(), L.Dense()), (4, 5, 3)),
        ("attention + positional embedding (keys and values), 2 heads", s(L.Dense(1.0, 0.1), att(n_heads=2, qk_scale=0.7, sigma_w2=1.3,
                                                                                                   sigma_b2=0.05, sigma_pe2=0.5,
                                                                                                   pos_emb_values=True),
                                                                           R, L.Dense(2.0, 0.1), L.Flatten(), L.Dense()), (4, 6, 3)),
        ("strided conv + attention with embedding (2-D positions)", s(_c((3, 3), (2, 2), "SAME"), R,
                                                                      att(n_heads=1, qk_scale=0.5, sigma_pe2=1.5, pos_emb_values=True),
                                                                      R, L.GlobalAvgPool(), L.Dense()), (4, 7, 6, 2)),
    ]


TRANSLATE = r"""
import json, sys
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import neural_tangents
from neural_tangents import stax

W = 8
ACT = {"relu": stax.Relu, "erf": stax.Erf, "gelu": stax.Gelu}

def layer(d, rho=1.0):
    t = d["layer"]
    if t == "Dense":
        return stax.Dense(W, W_std=rho * d["sigma_w2"] ** 0.5, b_std=rho * d["sigma_b2"] ** 0.5)
    if t == "Conv":
        fs = tuple(d["filter_shape"])
        return stax.Conv(W, fs, strides=tuple(d.get("strides") or (1,) * len(fs)), padding=d["padding"],
                         W_std=rho * d["sigma_w2"] ** 0.5, b_std=rho * d["sigma_b2"] ** 0.5)
    if t == "Activation":
        return ACT[d["name"]]()
    if t == "Flatten":
        return stax.Flatten()
    if t == "GlobalAvgPool":
        return stax.GlobalAvgPool()
    if t == "AvgPool":
        return stax.AvgPool(tuple(d["window_shape"]), tuple(d["strides"]), d["padding"],
                            normalize_edges=d.get("normalize_edges", False))
    if t == "LayerNorm":
        return stax.LayerNorm(axis=-1, eps=d["eps"])
    if t == "Identity":
        return stax.Identity()
    if t == "Attention":
        return stax.GlobalSelfAttention(W, W, W, d["n_heads"], linear_scaling=True, W_key_std=d["qk_scale"],
                                        W_query_std=1.0, W_value_std=rho * d["sigma_w2"] ** 0.5, W_out_std=1.0,
                                        b_std=rho * d["sigma_b2"] ** 0.5, pos_emb_type=d.get("pos_emb", "NONE"),
                                        W_pos_emb_std=d.get("sigma_pe2", 1.0) ** 0.5,
                                        val_pos_emb=d.get("pos_emb_values", False))
    if t == "Residual":
        br = d["branch"]
        inner = [layer(x) for x in br[:-1]] + [layer(br[-1], d["rho"])]
        return stax.serial(stax.FanOut(2), stax.parallel(stax.Identity(), stax.serial(*inner)), stax.FanInSum())
    raise ValueError(t)
"""

PEER = TRANSLATE + r"""
spec = json.load(open(sys.argv[1]))
out = []
for c in spec:
    X = np.array(c["X"], dtype=np.float64)
    _, _, kfn = stax.serial(*[layer(d) for d in c["model"]["serial"]])
    k = kfn(X, None, ("nngp", "ntk"))
    out.append({"nngp": np.asarray(k.nngp).tolist(), "ntk": np.asarray(k.ntk).tolist()})
print(json.dumps({"version": neural_tangents.__version__, "jax": jax.__version__, "kernels": out}))
"""


NT_SETUP = TRANSLATE + r"""
INFO = {"version": neural_tangents.__version__, "jax": jax.__version__}
def make(spec):
    # neural-tangents' kernel_fn of the composition on X (jit, nt.batch of <= 50 dividing P, results to the host):
    # the timed peer of benchmarks/bench_layers.py and bench_compositions.py (_timing.Peer)
    _, _, kfn = stax.serial(*[layer(d) for d in spec["model"]["serial"]])
    X = np.load(spec["X"])
    b = min(50, X.shape[0])
    while X.shape[0] % b:
        b -= 1
    fn = neural_tangents.batch(jax.jit(kfn, static_argnames="get"), batch_size=b, store_on_device=False)
    def call():
        r = fn(X, None, ("nngp", "ntk"))
        return np.asarray(r.nngp), np.asarray(r.ntk)
    return call
"""


def compare(k, nt):
    """Max |ours − NT| and max |ours − NT| / max |NT| of the NNGP, the NTK off the diagonal (x ≠ x') and its diagonal."""
    off = ~np.eye(k.nngp.shape[0], dtype=bool)
    out = {}
    for key, sel in (("nngp", np.ones_like(off)), ("ntk_off", off), ("ntk_diag", ~off)):
        ours, ref = (k.nngp, np.asarray(nt["nngp"])) if key == "nngp" else (k.ntk, np.asarray(nt["ntk"]))
        d = np.abs(ours - ref)[sel]
        out[key] = (float(d.max()) if d.size else 0.0, float(d.max() / np.max(np.abs(ref))) if d.size else 0.0)
    return out


FIXTURE = ROOT / "tests" / "layers" / "data" / "nt_reference.npz"


def _digest(model, *arrays):
    h = hashlib.sha256(json.dumps(model, sort_keys=True).encode())
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()


def write_fixture(rows, nt, path=FIXTURE):
    """The neural-tangents kernels as a test fixture (``tests/layers/test_layers_nt_reference.py``): per case
    the input X_i and NT's nngp_i / ntk_i, and a JSON ``meta`` string (versions, the command, per case its name,
    composition and the sha256 of composition + arrays)."""
    from limits.results import atomic_write_bytes

    arrays, meta = {}, []
    for i, ((name, m, X, _), r) in enumerate(zip(rows, nt["kernels"])):
        nngp, ntk = np.asarray(r["nngp"]), np.asarray(r["ntk"])
        arrays.update({f"X_{i}": X, f"nngp_{i}": nngp, f"ntk_{i}": ntk})
        meta.append({"name": name, "model": m.to_dict(), "sha256": _digest(m.to_dict(), X, nngp, ntk)})
    arrays["meta"] = np.array(json.dumps({"neural_tangents": nt["version"], "jax": nt["jax"], "float": "float64",
                                          "command": "python benchmarks/nt_layers.py --fixture", "cases": meta}))
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())
    return path


def table(rows, nt):
    """Markdown: per composition the max abs / rel difference of the NNGP, the NTK off the diagonal and on it."""
    lines = ["| composition | input | representation | NNGP abs / rel | NTK (x ≠ x') abs / rel | NTK diagonal abs / rel |",
             "|---|---|---|---:|---:|---:|"]
    worst = 0.0
    for i, (name, m, X, k) in enumerate(rows):
        rep = k.diagnostics["input_representation"]
        if nt is None:
            lines.append(f"| {name} | {X.shape} | {rep} | skipped | skipped | skipped |")
            continue
        d = compare(k, nt["kernels"][i])
        worst = max(worst, d["nngp"][1], d["ntk_off"][1])
        cells = " | ".join(f"{d[key][0]:.1e} / {d[key][1]:.1e}" for key in ("nngp", "ntk_off", "ntk_diag"))
        lines.append(f"| {name} | {X.shape} | {rep} | {cells} |")
    return "\n".join(lines), worst


def fixture_rows(path=FIXTURE):
    """(rows, nt) for :func:`table` from the committed fixture (no neural-tangents needed): our kernels recomputed on
    the stored inputs, neural-tangents' kernels as stored."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        rows, kernels = [], []
        for i, c in enumerate(meta["cases"]):
            m = limits.layers.Serial.from_dict(c["model"])
            X = z[f"X_{i}"]
            rows.append((c["name"], m, X, limits.kernels.kernel(m, X)))
            kernels.append({"nngp": z[f"nngp_{i}"].tolist(), "ntk": z[f"ntk_{i}"].tolist()})
    return rows, {"kernels": kernels, "version": meta["neural_tangents"], "jax": meta["jax"]}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--from-fixture" in argv:                   # the agreement table without neural-tangents installed
        text, worst = table(*fixture_rows())
        print(text + f"\n\nstored neural-tangents kernels ({FIXTURE.name}); worst relative difference {worst:.1e}")
        return 0 if worst <= TOL else 1
    rng = np.random.default_rng(0)
    rows = []
    for name, m, shape in cases():
        X = rng.standard_normal(shape)
        rows.append((name, m, X, limits.kernels.kernel(m, X)))
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps([{"model": m.to_dict(), "X": X.tolist()} for _, m, X, _ in rows]))
        nt, why = run_peer(PEER, spec)
    text, worst = table(rows, nt)
    print(text)
    if nt is None:
        print(why)
        return 0
    print(f"\nneural-tangents {nt['version']} (jax {nt['jax']}), float64; worst relative difference (NNGP, "
          f"off-diagonal NTK) {worst:.1e} (tolerance {TOL:g})")
    if "--fixture" in argv:
        print(f"wrote {write_fixture(rows, nt)}")
    return 0 if worst <= TOL else 1


if __name__ == "__main__":
    sys.exit(main())
