"""The benchmark scripts the README tests read (benchmarks/ is not a package), their committed data, and the
generated block between a script's markers in a Markdown file."""
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load(name):
    """``benchmarks/NAME.py`` as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def data(m):
    """The script's committed JSON data (``m.DATA``)."""
    return json.loads(m.DATA.read_text())


def marked_block(m, path=ROOT / "README.md") -> list[str]:
    """The lines between the script's ``BEGIN`` and ``END`` markers in ``path``."""
    return path.read_text().split(m.BEGIN, 1)[1].split(m.END, 1)[0].strip().splitlines()
