"""The one loader of the package's compiled (numba) kernels, with the numpy path as the fallback.

A kernel module (the simulator's :mod:`qv_dynamics.kernels.sim`, the decomposition's
:mod:`qv_dynamics.kernels.quasi`, the laws' ``qv_control.kernels.laws``) marks its kernel functions with
:func:`kernel` (``numba.njit(cache=True)``: numba's disk cache; with one explicit signature, or typed at the
first call) and has a ``warm()`` that runs each once. It lives in its package's kernel room (``P.kernels``, whose
``KERNEL_MODULES`` lists it), and the package is listed under the entry-point group :data:`GROUP` of the
installed package (setup.py), so :func:`warm_all` (``qv warm``, run by scripts/setup.sh; once for a
colcon-installed copy, which has its own cache) fills the cache of every kernel without qv_dynamics naming a
package above it. A process then gets a kernel from :func:`load` in ~0.1 s, and never compiles at start.
:func:`load` returns None, and the caller keeps its numpy path, when:

- the environment has ``QV_COMPILED=0`` (the reference path, e.g. to compare or to debug);
- numba is not installed;
- numba cannot use a cache for ``cache=True`` functions (no writable ``__pycache__`` next to the module
  nor a user cache directory: numba raises at decoration);
- the cache does not hold the kernels for this source (not warmed, or the file or numba changed since), or a
  helper module the kernels draw from (another kernel file, a constant of the package) changed after the
  cache was written: numba keys a kernel's cache on its own file only, so without this check it would load
  stale code (:func:`kernel_sources`); ``qv warm`` then recompiles. A compile takes ~10–50 s, which a node
  starting, a law being built or a simulation stepping must not wait for;
- numba's cache cannot be queried (:func:`_in_disk_cache`).

Why, per kernel module, is in :data:`STATUS` (diagnostics and benchmarks print it; nothing decides on it).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import re
from functools import lru_cache
from importlib.metadata import entry_points
from types import ModuleType

GROUP = "qv_ros.kernels"
STATUS: dict[str, str] = {}
_LOADED: dict[tuple[str, str | None], object] = {}


def kernel(signature: str | None = None):
    """Decorator of a kernel entry point: ``numba.njit(cache=True)``. With a ``signature`` it is compiled for
    that one only, when :func:`load` asks (importing the module compiles nothing; an argument of another type
    then raises instead of compiling in a running loop); without, numba types it at the first call."""
    from numba import njit

    def wrap(fn):
        dispatcher = njit(cache=True)(fn)
        dispatcher.qv_signature = signature
        return dispatcher
    return wrap


def kernels_of(module: ModuleType) -> list:
    """The functions ``module`` defines with :func:`kernel` (not those it imports)."""
    return [v for v in vars(module).values()
            if hasattr(v, "qv_signature") and getattr(v, "py_func", None) is not None
            and v.py_func.__module__ == module.__name__]


#: ``from <module> import`` at the start of a line (the form the kernel modules import by). A regex, not ``ast``:
#: a node starting loads several kernel modules, and parsing their sources cost it ~0.1 s; a match inside a
#: docstring only adds a file to watch (a stricter staleness check, never a looser one)
_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import\b", re.MULTILINE)


@lru_cache(maxsize=None)
def _package_imports(path: str, package: str) -> frozenset[str]:
    """Source files of the qv_dynamics / qv_control modules (but this loader) the module at ``path`` imports
    from."""
    found = set()
    for module in _FROM_IMPORT.findall(open(path, encoding="utf-8").read()):
        dots = len(module) - len(module.lstrip("."))
        if dots and not package:
            continue
        name = importlib.util.resolve_name(module, package) if dots else module
        if name.split(".")[0] in ("qv_dynamics", "qv_control") and name != __name__:  # not the loader
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.origin and spec.origin.endswith(".py"):
                found.add(spec.origin)
    return frozenset(found)


def kernel_sources(module: ModuleType) -> list[str]:
    """The source files whose text a kernel module's compiled code depends on: its own, the package modules it
    imports from, and, through any of those that defines jitted helpers, theirs (numba freezes the helpers'
    code and the imported constants into the cached machine code of the caller)."""
    seen, todo = set(), [(module.__file__, module.__package__ or "")]
    while todo:
        path, package = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        text = open(path, encoding="utf-8").read()
        if path == module.__file__ or "njit" in text or "@kernel" in text:
            for dep in _package_imports(path, package):
                dep_package = ".".join(_module_name(dep).split(".")[:-1])
                todo.append((dep, dep_package))
    return sorted(seen)


def _module_name(path: str) -> str:
    """``qv_dynamics.kernels.sim_linalg`` of ``.../qv_dynamics/kernels/sim_linalg.py``."""
    parts = os.path.normpath(path)[:-3].split(os.sep)
    top = max(i for i, p in enumerate(parts) if p in ("qv_dynamics", "qv_control"))
    return ".".join(parts[top:])


def _in_disk_cache(dispatcher, newest_source: float = 0.0) -> bool:
    """Whether numba's disk cache holds code of ``dispatcher`` for its current source and numba (an index
    that is missing, or written for another source stamp or numba version, loads as empty), written after
    ``newest_source`` (the mtime of the newest file in :func:`kernel_sources`).

    Numba has no public query for this: its "Notes on Caching" (developer docs) describe the per-function
    index file, and ``Dispatcher.stats`` counts cache hits only after a call has compiled or loaded. So this
    one function reads the private index; if a numba release moves it, the AttributeError makes
    :func:`load` take the numpy path and say so (never a compile at start)."""
    cache_file = dispatcher._cache._cache_file
    return bool(cache_file._load_index()) and os.path.getmtime(cache_file._index_path) >= newest_source


def jitted_of(module: ModuleType) -> list:
    """Every numba dispatcher ``module`` defines (kernels and the jitted helpers they call)."""
    return [v for v in vars(module).values()
            if hasattr(v, "_cache") and getattr(getattr(v, "py_func", None), "__module__", None) == module.__name__]


def flush_stale(module: ModuleType) -> None:
    """Empty numba's disk cache of every jitted function of ``module`` and of the package modules its kernels draw
    from (:func:`kernel_sources`) whose cache is older than the sources it depends on: numba keys each function's
    cache on its own file, so a helper whose file did not change, calling one whose file did, would load its old
    machine code (the callee's code inlined in it)."""
    for path in kernel_sources(module):
        mod = importlib.import_module(_module_name(path))
        newest = _newest_source(mod)
        for fn in jitted_of(mod):
            if not _in_disk_cache(fn, newest):
                fn._cache.flush()


def cache_ready(*dispatchers, newest_source: float = 0.0) -> bool:
    """Whether numba's disk cache holds all these kernels for their current source, written after
    ``newest_source``: then a process loads them instead of compiling."""
    return all(_in_disk_cache(d, newest_source) for d in dispatchers)


def _newest_source(mod: ModuleType) -> float:
    return max(os.path.getmtime(f) for f in kernel_sources(mod))


def compile_kernel(dispatcher):
    """A signature kernel compiled (or loaded from the cache) for its one signature, further compilation
    disabled; a kernel typed at its first call is returned as it is."""
    if dispatcher.qv_signature is not None:
        dispatcher.compile(dispatcher.qv_signature)
        dispatcher.disable_compile()
    return dispatcher


def _open(module: str, name: str | None, force: bool):
    """``module`` (name None) or ``module.name`` ready to call, or None with the reason in STATUS."""
    if not force and os.environ.get("QV_COMPILED", "1") == "0":
        STATUS[module] = "disabled by QV_COMPILED=0"
        return None
    try:
        mod = importlib.import_module(module)
        kernels = kernels_of(mod) if name is None else [getattr(mod, name)]
        newest = _newest_source(mod)
        if not cache_ready(*kernels, newest_source=newest):
            if not force:
                STATUS[module] = ("numpy path (no compiled cache, or one older than the kernel sources: "
                                  "run scripts/setup.sh or qv warm)")
                return None
            flush_stale(mod)
        for k in kernels:
            compile_kernel(k)
    except Exception as exc:  # ImportError, numba's RuntimeError for an unusable cache, typing errors
        if force:
            raise
        STATUS[module] = f"numpy path ({type(exc).__name__}: {exc})"
        return None
    STATUS[module] = "compiled"
    return mod if name is None else kernels[0]


def load(module: str, name: str | None = None, *, force: bool = False):
    """The kernel ``module.name`` (or, name None, the kernel module with all its kernel functions) ready to call,
    or None: the caller's numpy path, the reason in ``STATUS[module]`` (module doc). Decided once per process;
    ``force``: compile if the cache is cold, ignore ``QV_COMPILED=0``, and raise what the module doc lists
    (numba missing, unusable cache) instead of returning None."""
    key = (module, name)
    if key not in _LOADED or (force and _LOADED[key] is None):
        _LOADED[key] = _open(module, name, force)
    return _LOADED[key]


def kernel_modules() -> list[str]:
    """The kernel modules of every package the installed package lists under :data:`GROUP` (setup.py): a listed
    package ``P`` (or any module of it) has its kernels in the room ``P.kernels``, whose ``KERNEL_MODULES`` names
    them. The rooms are read from the source tree, so a listing installed before a kernel moved still finds it."""
    packages = {ep.value.split(".")[0] for ep in entry_points(group=GROUP)}
    return sorted(m for p in packages for m in importlib.import_module(f"{p}.kernels").KERNEL_MODULES)


def warm_all() -> dict[str, str]:
    """Compile every kernel module's kernel functions into numba's disk cache (or load them) and run its
    ``warm()``; returns STATUS of each. Raises when the package is not installed (no module listed)."""
    modules = kernel_modules()
    if not modules:
        raise RuntimeError(f"no kernel module listed under the entry-point group {GROUP!r}: install the package "
                           "(pip install -e . or colcon build) first")
    for module in modules:
        load(module, force=True).warm()
    return {m: STATUS[m] for m in modules}


def main(argv: list[str] | None = None) -> int:
    """``qv warm``: :func:`warm_all`, one line of STATUS per module."""
    if argv:
        print("usage: qv warm  (compile every kernel module into numba's disk cache)")
        return 0 if argv[0] in ("-h", "--help") else 2
    for module, status in warm_all().items():
        print(f"qv warm: {module} {status}")
    return 0


__all__ = ["GROUP", "STATUS", "cache_ready", "compile_kernel", "kernels_of", "kernel", "kernel_modules",
           "kernel_sources", "load", "main", "warm_all"]
