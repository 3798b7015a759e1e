"""Result files of a run (``summary.json``, ``*.npz``, PNG plots) written safely.

* Every file is written to a temporary file in the same folder and renamed over the target
  (``os.replace`` is atomic on POSIX): a reader, or a failed write, never leaves a half-written file.
* A run owns a fixed set of file names in its ``--out`` folder; :func:`prepare_out_dir` removes the
  ones left by an earlier run before the new one starts (and says which), so no stale ``figure.png``
  sits beside a fresh ``summary.json``.
* :func:`check_writable` is called before the run, so an unwritable ``--out`` is refused at once
  instead of after minutes of simulation. :func:`reserve` takes an exclusive ``flock`` on the folder itself
  for the run (``qv`` does, for its ``--out``), so a second run into the same folder is refused instead of
  overwriting the first one's files.
* Files get the permissions the umask gives a new file (``0o666 & ~umask``), as ``open()`` would.
* Reports never claim a success the run did not have: every file written here since :func:`begin_run` is
  remembered, and :func:`mark_interrupted` (called by the ``qv`` command's signal handling) marks the reports
  among them as incomplete: a JSON mapping gets ``"ok": false, "complete": false, "interrupted": <signal>``,
  a Markdown report a first line saying so. The commands write their summary last, so a signal during the
  run leaves no summary at all, and one after it leaves a marked one.
"""
from __future__ import annotations

import fcntl
import fnmatch
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterable

from .errors import QVError


class OutputError(QVError):
    """An output folder that cannot be created or written."""


def _atomic(path: Path, write: Callable[[str], None], suffix: str) -> Path:
    """Call ``write(tmp_path)`` and rename the temporary file onto ``path``; the temporary is removed on
    any error (the previous ``path``, if any, is left untouched)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{suffix}", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's file is 0600 whatever the umask
        os.replace(tmp, path)
        _WRITTEN.append(path.resolve())
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


# the files written through this module since begin_run (mark_interrupted marks the reports among them)
_WRITTEN: list[Path] = []
INCOMPLETE_MD = "> **Incomplete**: the run that wrote this report was interrupted ({}) before it finished.\n\n"


def begin_run() -> None:
    """Forget the files of earlier runs in this process: :func:`mark_interrupted` marks this run's only."""
    _WRITTEN.clear()


def mark_interrupted(reason: str) -> list[str]:
    """Mark every report written since :func:`begin_run` as incomplete (module doc); returns their paths.
    Further SIGINT/SIGTERM wait until the marks are written (the run is ending anyway)."""
    import signal
    import threading

    old = {}
    if threading.current_thread() is threading.main_thread():
        old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    marked = []
    try:
        for path in dict.fromkeys(_WRITTEN):
            try:
                if path.suffix == ".json":
                    doc = json.loads(path.read_text(encoding="utf-8"))
                    if not isinstance(doc, dict):
                        continue
                    doc.update(ok=False, complete=False, interrupted=reason)
                    text = json.dumps(doc, indent=2)
                elif path.suffix == ".md":
                    text = INCOMPLETE_MD.format(reason) + path.read_text(encoding="utf-8")
                else:
                    continue
                _atomic(path, lambda tmp, text=text: Path(tmp).write_text(text, encoding="utf-8"), "")
                marked.append(str(path))
            except (OSError, ValueError):  # removed or unreadable meanwhile: nothing left that claims success
                continue
    finally:
        _WRITTEN.clear()
        for s, h in old.items():
            signal.signal(s, h)
    return marked


def _umask() -> int:
    """The process's umask (read without changing it where /proc allows)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return _atomic(Path(path), lambda tmp: Path(tmp).write_text(text, encoding="utf-8"), "")


def write_json(path, obj) -> Path:
    """``json.dumps(obj, indent=2)`` to ``path`` atomically (``obj`` already JSON-able)."""
    return write_text(path, json.dumps(obj, indent=2))


def savez(path, **arrays) -> Path:
    """``numpy.savez_compressed`` to ``path`` atomically (the temporary keeps the ``.npz`` suffix, which
    numpy would otherwise append)."""
    import numpy as np

    return _atomic(Path(path), lambda tmp: np.savez_compressed(tmp, **arrays), ".npz")


def savefig(fig, path, **kwargs) -> Path:
    """``fig.savefig`` to ``path`` atomically (the format follows the target's suffix)."""
    path = Path(path)
    kwargs.setdefault("format", path.suffix.lstrip(".") or "png")
    return _atomic(path, lambda tmp: fig.savefig(tmp, **kwargs), path.suffix)


# folder (resolved) -> descriptor holding its lock, for the life of the process
_LOCKS: dict[str, int] = {}


def check_writable(directory) -> Path:
    """Create ``directory`` (parents included) and prove it writable with a probe file; OutputError with
    the reason otherwise."""
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".qv_write_probe.", dir=d)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"output folder '{d}' is not writable: {exc.strerror or exc}") from None
    return d


def reserve(directory) -> None:
    """Take an exclusive, non-blocking ``flock`` on the folder, held until :func:`release` or the process ends
    (a second call from this process is a no-op); OutputError when another process holds it: two runs never
    write into one folder at once. The ``qv`` commands reserve their ``--out`` folder for their run."""
    key = os.path.realpath(directory)
    if key in _LOCKS:
        return
    fd = os.open(key, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OutputError(f"output folder '{directory}' is in use by another run (choose another --out, or "
                          "wait for that run to end)") from None
    except OSError:  # a file system without flock: nothing to reserve with
        os.close(fd)
        return
    _LOCKS[key] = fd


def release(directory=None) -> None:
    """Give up the reservation of :func:`reserve` (every one this process holds when ``directory`` is None;
    a no-op for a folder it does not hold)."""
    keys = list(_LOCKS) if directory is None else [os.path.realpath(directory)]
    for key in keys:
        fd = _LOCKS.pop(key, None)
        if fd is not None:
            os.close(fd)


def prepare_out_dir(directory, patterns: Iterable[str], log: Callable[[str], None] | None = print) -> list[str]:
    """Check ``directory`` is writable and remove the files of an earlier run that match ``patterns``
    (file names, shell wildcards allowed); returns the removed names and reports them through ``log``.
    Files this run does not own are left alone."""
    d = check_writable(directory)
    pats = list(patterns)
    removed = []
    for p in sorted(d.iterdir()):
        leftover = p.name.startswith(".") and ".tmp" in p.name  # temporary of an interrupted write
        if p.is_file() and (leftover or any(fnmatch.fnmatch(p.name, pat) for pat in pats)):
            try:
                p.unlink()
            except OSError as exc:
                raise OutputError(f"cannot remove the earlier run's {p}: {exc.strerror or exc}") from None
            removed.append(p.name)
    if removed and log is not None:
        log(f"{d}: removed {len(removed)} file(s) of an earlier run: {', '.join(removed)}")
    return removed


def machine() -> str:
    """One line naming the machine a figure was measured on: CPU model, cores, load, Python and numpy (written
    beside every generated table of the docs)."""
    import platform

    import numpy as np

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{cpu}, {os.cpu_count()} cores (load {load} over 1/5/15 min), {platform.system()} "
            f"{platform.release()}, Python {platform.python_version()}, numpy {np.__version__}")


__all__ = ["OutputError", "machine", "write_text", "write_json", "savez", "savefig", "check_writable", "reserve",
           "release", "prepare_out_dir", "begin_run", "mark_interrupted"]
