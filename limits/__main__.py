"""``python -m limits`` — the same as the ``limits`` command (see :mod:`limits.cli`)."""
import sys

from limits.cli import main

if __name__ == "__main__":
    sys.exit(main())
