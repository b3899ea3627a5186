"""``python -m limits.cli`` — the same as the ``limits`` command."""
import sys

from limits.cli import main

if __name__ == "__main__":
    sys.exit(main())
