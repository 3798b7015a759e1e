"""Loading compiled (numba) kernels with a numpy fallback (issue 11).

A kernel module marks its entry points with :func:`kernel` (one explicit signature each, numba's disk cache);
scripts/setup.sh fills the cache (``warm()`` of each module), and :func:`load` then gives a process the
kernel in ~0.1 s, compiled for that signature only (an argument of another type raises instead of compiling
in a running loop). It returns None, and the caller keeps its numpy path, when:

- the environment has ``QV_COMPILED=0`` (the reference path, e.g. to compare or to debug);
- numba is not installed;
- numba cannot use a cache for ``cache=True`` functions (no writable ``__pycache__`` next to the module
  nor a user cache directory: numba raises at decoration);
- the cache does not hold the kernel for this source (not warmed, or the file changed since): a compile
  takes ~10–30 s, which a node starting or a law being built must not wait for (``warm()`` compiles).
  The simulator's kernels follow the same rule (:func:`qv_dynamics.sim.kernels.cached`).

The outcome per kernel module is in :data:`STATUS` (for diagnostics; nothing else reads it).
"""
from __future__ import annotations

import importlib
import os

STATUS: dict[str, str] = {}
_LOADED: dict[tuple[str, str], object] = {}


def kernel(signature: str):
    """Decorator of a kernel entry point: ``numba.njit(cache=True)``, compiled for ``signature`` only when
    :func:`load` or :func:`compile_kernel` asks (so importing the module compiles nothing)."""
    from numba import njit

    def wrap(fn):
        dispatcher = njit(cache=True)(fn)
        dispatcher.qv_signature = signature
        return dispatcher
    return wrap


def cache_ready(*dispatchers) -> bool:
    """Whether numba's disk cache holds compiled code of these functions for their current source (same
    source stamp, same numba): then a process loads them instead of compiling."""
    try:
        return all(bool(d._cache._cache_file._load_index()) for d in dispatchers)
    except Exception:  # noqa: BLE001 - numba internals moved: assume cached (numba compiles when it is not)
        return True


def compile_kernel(dispatcher):
    """The kernel compiled (or loaded from the cache) for its one signature, further compilation disabled."""
    dispatcher.compile(dispatcher.qv_signature)
    dispatcher.disable_compile()
    return dispatcher


def load(module: str, name: str):
    """``module.name`` compiled, or None (module doc); imported once per process."""
    key = (module, name)
    if key not in _LOADED:
        fn = None
        if os.environ.get("QV_COMPILED", "1") == "0":
            STATUS[module] = "disabled by QV_COMPILED=0"
        else:
            try:
                fn = getattr(importlib.import_module(module), name)
                if cache_ready(fn):
                    fn = compile_kernel(fn)
                    STATUS[module] = "compiled"
                else:
                    fn = None
                    STATUS[module] = f"numpy path (no compiled cache: run scripts/setup.sh or {module}.warm())"
            except Exception as exc:  # ImportError, numba's RuntimeError for an unusable cache, typing errors
                fn = None
                STATUS[module] = f"numpy path ({type(exc).__name__}: {exc})"
        _LOADED[key] = fn
    return _LOADED[key]


__all__ = ["STATUS", "cache_ready", "compile_kernel", "kernel", "load"]
