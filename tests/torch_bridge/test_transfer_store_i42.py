"""Issue 42 item 1 for `limits transfer`: its store is a sweep store (limits.sweep.run), so it is made only in a new
or empty directory or an existing sweep store — a foreign non-empty directory is refused (exit 2 naming --store)
before a run trains or a file is written into it; `--n-jobs`/`--scheduler`/`--store` come from the command line
only (transfer has no file that could set them)."""
import os

import pytest

pytest.importorskip("torch")

from limits.cli import main  # noqa: E402

ARGV = ["transfer", "--factory", "limits.torch.demos:mlp", "--param", "muP", "--widths", "8", "16", "32",
        "--lrs", "0.01", "0.03", "0.1", "--steps", "2", "--seeds", "2", "--backend", "serial", "--no-calibrate"]


def _listing(d):
    return sorted((str(p.relative_to(d)), p.read_bytes() if p.is_file() else None) for p in d.rglob("*"))


def test_transfer_store_is_never_a_foreign_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LIMITS_PROGRESS", "0")
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("\\documentclass{article}\n")
    before = _listing(home)
    assert main([*ARGV, "--store", str(home)]) == 2
    err = capsys.readouterr().err
    assert "non-empty directory that is not a sweep store" in err and len(err.strip().splitlines()) == 1, err
    assert _listing(home) == before
    store = tmp_path / "runs"
    assert main([*ARGV, "--store", str(store)]) in (0, 1)          # a new directory: made, runs stored
    capsys.readouterr()
    assert (store / "sweep.json").is_file() and os.listdir(store / "points")
    assert main([*ARGV, "--store", str(store)]) in (0, 1)          # its own store: resumed
