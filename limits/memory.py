"""Available physical memory: models, kernels and finite networks size their arrays against it."""
from __future__ import annotations


def available_memory() -> int | None:
    """Available physical memory in bytes (``os.sysconf``), or None where the platform does not say."""
    import os

    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None
