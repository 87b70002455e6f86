"""Which path the batch loops take: the optional C extension frontier._native, or Python and numpy.

`pip install` compiles frontier/_native.c when a C compiler is there (setup.py: an optional extension, so
an install without one succeeds). `native()` returns that module, or None when it was not built or
FRONTIER_NO_NATIVE is set (to anything but "" or "0"); callers ask when they build a filter or hash a batch,
so the variable also switches a running process (the tests run both paths). Both paths give the same
fingerprints and the same positions, so filters, snapshots and logs written by one are read by the other.
Light: no numpy (workers import frontier.fingerprint, which asks it).
"""

from __future__ import annotations

import os
from types import ModuleType

NO_NATIVE_ENV = "FRONTIER_NO_NATIVE"
COMPILED = "compiled (frontier._native)"
FALLBACK = "numpy"


def native() -> ModuleType | None:
    """frontier._native if it is built and not switched off by FRONTIER_NO_NATIVE, else None."""
    if os.environ.get(NO_NATIVE_ENV, "") not in ("", "0"):
        return None
    try:
        from frontier import _native
    except ImportError:  # not built (no compiler at install time)
        return None
    return _native


def implementation() -> str:
    """The path filters built now take, for benchmarks: COMPILED or FALLBACK."""
    return COMPILED if native() is not None else FALLBACK
