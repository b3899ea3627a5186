"""A figure whose caption or source reference changed in the code, but not its parameters, keeps its
cached data and gets the new text in its JSON file (the docs' gallery reads captions from there)."""
import json

import numpy as np

import limits.gallery as gallery


def test_cached_figure_refreshes_caption_and_source(tmp_path):
    calls = []

    def compute(params, rng):
        calls.append(params["n"])
        return {"x": np.linspace(0.0, 1.0, params["n"]) + rng.standard_normal(params["n"])}

    def plot(data, params):
        from limits.style import pyplot

        fig, ax = pyplot().subplots()
        ax.plot(data["x"])
        return fig

    name = "_test_caption_refresh"
    gallery._FIGURES.pop(name, None)
    try:
        gallery.register(name, component="core", compute=compute, plot=plot, params={"n": 4},
                         caption="old caption", seed_ref="old.md §1")
        gallery.make(name, quick=True, outdir=tmp_path)
        before = json.loads((tmp_path / f"{name}.json").read_text())
        npz = (tmp_path / f"{name}.npz").read_bytes()
        gallery._FIGURES.pop(name)
        gallery.register(name, component="core", compute=compute, plot=plot, params={"n": 4},
                         caption="new caption", seed_ref="docs/theory/nfd.rst §5")
        m = gallery.make(name, quick=True, outdir=tmp_path)
        after = json.loads((tmp_path / f"{name}.json").read_text())
        assert m.cached and calls == [4]                                   # not recomputed
        assert after["caption"] == "new caption" and after["seed_ref"] == "docs/theory/nfd.rst §5"
        assert {k: v for k, v in after.items() if k not in ("caption", "seed_ref")} == \
            {k: v for k, v in before.items() if k not in ("caption", "seed_ref")}
        assert (tmp_path / f"{name}.npz").read_bytes() == npz
        # the rewritten file is byte-identical to what a fresh computation writes
        text = (tmp_path / f"{name}.json").read_text()
        gallery.make(name, quick=True, outdir=tmp_path, force=True)
        fresh = json.loads((tmp_path / f"{name}.json").read_text())
        fresh["wall_time_s"] = after["wall_time_s"]
        assert json.dumps(fresh, indent=1, sort_keys=True, default=str) == text
    finally:
        gallery._FIGURES.pop(name, None)
