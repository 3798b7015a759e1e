"""Loading compiled (numba) kernels with a numpy fallback (issue 11).

A kernel module compiles its functions for their one signature at import, from numba's disk cache that
scripts/setup.sh fills (``warm()`` of each module), so a process pays ~0.3 s once instead of compiling.
:func:`load` returns the kernel, or None, and the caller keeps its numpy path, when:

- the environment has ``QV_COMPILED=0`` (the reference path, e.g. to compare or to debug);
- numba is not installed;
- numba cannot use a cache for ``cache=True`` functions (no writable ``__pycache__`` next to the module
  nor a user cache directory: numba raises at decoration), or compiling fails.

The outcome per kernel module is in :data:`STATUS` (for diagnostics; nothing else reads it).
"""
from __future__ import annotations

import importlib
import os

STATUS: dict[str, str] = {}
_LOADED: dict[tuple[str, str], object] = {}


def load(module: str, name: str):
    """``module.name`` compiled, or None (module doc); imported once per process."""
    key = (module, name)
    if key not in _LOADED:
        kernel = None
        if os.environ.get("QV_COMPILED", "1") == "0":
            STATUS[module] = "disabled by QV_COMPILED=0"
        else:
            try:
                kernel = getattr(importlib.import_module(module), name)
                STATUS[module] = "compiled"
            except Exception as exc:  # ImportError, numba's RuntimeError for an unusable cache, typing errors
                STATUS[module] = f"numpy path ({type(exc).__name__}: {exc})"
        _LOADED[key] = kernel
    return _LOADED[key]


__all__ = ["STATUS", "load"]
