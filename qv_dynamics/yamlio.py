"""The one reader of the package's text and YAML files (model configs, parameters files, demo and scene
configs, URDFs): every way a file can be bad is one :class:`~qv_dynamics.errors.ModelError` naming the file.

- :func:`read_text`: a file that does not exist, is a folder, is larger than ``max_bytes``, is not UTF-8
  or holds NUL bytes (a binary file) is refused with the reason (never a UnicodeDecodeError).
- :func:`load_yaml`: one document, parsed by libyaml when present; a syntax error is one line with its
  line and column. The document is bounded before it is built: at most :data:`MAX_LIST` entries in a list
  (a 2.5-million-point trace would otherwise take minutes downstream), at most :data:`MAX_ALIASES` aliases
  and :data:`MAX_NODES` values once every alias is expanded (nested aliases, the "billion laughs", grow
  exponentially: a consumer walking them runs for minutes), at most :data:`MAX_DEPTH` levels, and no key
  twice in a mapping (YAML keeps the last one silently). ``aliases=False`` refuses anchors and aliases
  altogether (a ROS 2 parameters file: rcl does not read them).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import ModelError

MAX_BYTES = 1 << 20          # a YAML configuration larger than 1 MiB is not a configuration
MAX_TEXT_BYTES = 64 << 20    # other text inputs (URDF)
MAX_LIST = 10_000            # entries of one list
MAX_ALIASES = 100            # alias references in one document
MAX_NODES = 200_000          # values in the document with every alias expanded
MAX_DEPTH = 64               # nesting levels

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_text(path, what: str = "file", max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of ``path`` (a leading byte-order mark dropped); ModelError naming ``what`` and the file
    when it cannot be read, is too large, is not UTF-8 or is binary."""
    p = Path(path).expanduser()
    try:
        if p.is_dir():
            raise ModelError(f"{what} {p} is a folder, not a file")
        size = p.stat().st_size
        if size > max_bytes:
            raise ModelError(f"{what} {p} is {size} bytes, more than the {max_bytes} allowed")
        data = p.read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelError(f"{what} {p} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") \
            from None
    if "\x00" in text:
        raise ModelError(f"{what} {p} is a binary file (NUL byte at offset {text.index(chr(0))}), not text")
    return text[1:] if text.startswith("\ufeff") else text


def _one_line(exc: yaml.YAMLError, text: str) -> str:
    """A YAML error as one line: the problem and where (line, column counted from 1); a tab in the
    indentation is said so (YAML indents with spaces only)."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if problem.startswith("but ") and getattr(exc, "context", None):
        problem = f"{exc.context}, {problem}"
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return problem
    line = text.splitlines()[mark.line] if mark.line < len(text.splitlines()) else ""
    if "\t" in line[:len(line) - len(line.lstrip())]:
        problem = "a tab in the indentation (YAML indents with spaces only)"
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"


def _check_events(loader, where: str) -> None:
    """No anchor and no alias in the stream (``aliases=False``)."""
    while loader.check_event():
        ev = loader.get_event()
        if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
            mark = ev.start_mark
            raise ModelError(f"{where}: YAML anchors and aliases (&, *) are not supported here (line "
                             f"{mark.line + 1}, column {mark.column + 1}); write the values out")


def _check_nodes(root, where: str, max_list: int) -> None:
    """The bounds of the module doc on a composed document (iterative: no recursion limit to meet)."""
    seen: dict[int, int] = {}     # id(node) -> expanded size (a node met twice came from an alias)
    aliases = 0
    order, stack = [], [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            aliases += 1
            if aliases > MAX_ALIASES:
                raise ModelError(f"{where}: more than {MAX_ALIASES} YAML aliases")
            continue
        seen[id(node)] = 0
        if depth > MAX_DEPTH:
            raise ModelError(f"{where}: nested deeper than {MAX_DEPTH} levels")
        order.append(node)
        if isinstance(node, yaml.SequenceNode):
            if len(node.value) > max_list:
                raise ModelError(f"{where}: a list of {len(node.value)} entries at line "
                                 f"{node.start_mark.line + 1} (at most {max_list})")
            stack.extend((v, depth + 1) for v in node.value)
        elif isinstance(node, yaml.MappingNode):
            keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
            if len(set(keys)) != len(keys):
                dup = next(k for i, k in enumerate(keys) if k in keys[:i])
                raise ModelError(f"{where}: key '{dup}' appears twice in the mapping at line "
                                 f"{node.start_mark.line + 1}")
            stack.extend((x, depth + 1) for kv in node.value for x in kv)
    for node in reversed(order):  # children before parents: the expanded size of every node
        kids = node.value if isinstance(node, yaml.SequenceNode) else \
            [x for kv in node.value for x in kv] if isinstance(node, yaml.MappingNode) else ()
        seen[id(node)] = 1 + sum(seen[id(k)] for k in kids)
        if seen[id(node)] > MAX_NODES:
            raise ModelError(f"{where}: more than {MAX_NODES} values once its aliases are expanded")


def load_yaml(path=None, what: str = "YAML file", *, text: str | None = None, aliases: bool = True,
              max_list: int = MAX_LIST, max_bytes: int = MAX_BYTES) -> Any:
    """The one YAML document of ``path`` (or of ``text``), checked and bounded (module doc); None for an
    empty document. ModelError with the reason, naming ``what`` and the file."""
    where = f"{what} {path}" if path is not None else what
    if text is None:
        text = read_text(path, what, max_bytes)
    elif len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ModelError(f"{where}: more than {max_bytes} bytes")
    try:
        if not aliases:
            loader = _LOADER(text)
            try:
                _check_events(loader, where)
            finally:
                loader.dispose()
        loader = _LOADER(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_nodes(node, where, max_list)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise ModelError(f"{where} does not parse as YAML: {_one_line(exc, text)}") from None
    except RecursionError:
        raise ModelError(f"{where}: nested deeper than {MAX_DEPTH} levels") from None


__all__ = ["MAX_ALIASES", "MAX_BYTES", "MAX_DEPTH", "MAX_LIST", "MAX_NODES", "load_yaml", "read_text"]
