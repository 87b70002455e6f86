"""Which path the batch loops take: the optional C extension frontier._native, or Python and numpy.

`pip install` compiles frontier/_native.c when a C compiler is there (setup.py: an optional extension, so
an install without one succeeds). `native()` returns that module, or None when it was not built or
FRONTIER_NO_NATIVE is set (to anything but "" or "0"); callers ask when they build a filter or hash a batch,
so the variable also switches a running process (the tests run both paths). Both paths give the same
fingerprints and the same positions, so filters, snapshots and logs written by one are read by the other.
Light: no numpy (workers import frontier.seen.fingerprint, which asks it).
"""

from __future__ import annotations

import warnings
from types import ModuleType

NO_NATIVE_ENV = "FRONTIER_NO_NATIVE"
COMPILED = "compiled (frontier._native)"
FALLBACK = "numpy"


NATIVE_VERSION = 7  # frontier/_native.c's NATIVE_VERSION: the functions this source calls


def built_extension() -> ModuleType | None:
    """frontier._native when it is built from this source, else None (a stale build is not used: it warns)."""
    try:
        from frontier import _native
    except ImportError:  # not built (no compiler at install time)
        return None
    if getattr(_native, "VERSION", 0) != NATIVE_VERSION:
        warnings.warn(f"frontier._native was built from other source (version {getattr(_native, 'VERSION', 0)}, "
                      f"this code wants {NATIVE_VERSION}): using the numpy path; rebuild it with pip install -e .",
                      RuntimeWarning, stacklevel=2)
        return None
    return _native


_BUILT = built_extension()


def native() -> ModuleType | None:
    """frontier._native if it is built and not switched off by FRONTIER_NO_NATIVE, else None. Cheap enough
    for per-URL calls: the extension reads the variable with getenv (os.environ.get of an unset name costs
    a caught exception, 0.6 us)."""
    if _BUILT is None or _BUILT.switched_off():
        return None
    return _BUILT


def implementation() -> str:
    """The path filters built now take, for benchmarks: COMPILED or FALLBACK."""
    return COMPILED if native() is not None else FALLBACK
