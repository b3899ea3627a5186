"""Create the optional peer-benchmark environment (neural-tangents 0.6.5 on jax/jaxlib 0.4.30) in a
separate virtual environment — never a dependency of ``limits`` or of its tests:

    python benchmarks/make_peer_env.py [DIR]        # default DIR: $LIMITS_NT_VENV or ~/.venv-limits-nt

then point the benchmarks at it with ``export LIMITS_NT_PYTHON=DIR/bin/python`` (the benchmarks skip
the peer columns cleanly when that interpreter is missing).
"""
import os
import subprocess
import sys
import venv
from pathlib import Path

PACKAGES = ["neural-tangents==0.6.5", "jax==0.4.30", "jaxlib==0.4.30"]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    target = Path(argv[0] if argv else os.environ.get("LIMITS_NT_VENV", Path.home() / ".venv-limits-nt"))
    if not (target / "bin" / "python").exists():
        venv.EnvBuilder(with_pip=True).create(target)
    py = target / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--upgrade", "pip"], check=True)
    subprocess.run([str(py), "-m", "pip", "install", *PACKAGES], check=True)
    subprocess.run([str(py), "-c", "import neural_tangents, jax; print(neural_tangents.__version__, jax.__version__)"],
                   check=True)
    print(f"peer environment ready: export LIMITS_NT_PYTHON={py}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
