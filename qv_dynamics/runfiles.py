"""Result files of a run (``summary.json``, ``*.npz``, PNG plots) written safely.

* Every file is written to a temporary file in the same folder and renamed over the target
  (``os.replace`` is atomic on POSIX): a reader, or a failed write, never leaves a half-written file.
* A run owns a fixed set of file names in its ``--out`` folder; :func:`prepare_out_dir` removes the
  ones left by an earlier run before the new one starts (and says which), so no stale ``figure.png``
  sits beside a fresh ``summary.json``.
* :func:`check_writable` is called before the run, so an unwritable ``--out`` is refused at once
  instead of after minutes of simulation.
"""
from __future__ import annotations

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
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def write_text(path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return _atomic(Path(path), lambda tmp: Path(tmp).write_text(text), "")


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


__all__ = ["OutputError", "write_text", "write_json", "savez", "savefig", "check_writable", "prepare_out_dir"]
