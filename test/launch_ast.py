"""Reading launch files with ``ast`` (launch/launch_ros are not installable here): their module-level
constants, with names imported from the shared ``qv_control/ros/launch_actions.py`` resolved."""
from __future__ import annotations

import ast
from pathlib import Path


def _value(node: ast.expr, names: dict):
    """A literal, a name of ``names``, a dict of those with ``**name`` entries merged, or a list/tuple of
    those with ``*name`` entries spliced."""
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        out = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                out.extend(_value(elt.value, names))
            else:
                out.append(_value(elt, names))
        return out if isinstance(node, ast.List) else tuple(out)
    if isinstance(node, ast.Dict):
        out = {}
        for key, val in zip(node.keys, node.values):
            if key is None:
                out.update(_value(val, names))
            else:
                out[ast.literal_eval(key)] = _value(val, names)
        return out
    return ast.literal_eval(node)


def constants(tree: ast.Module, shared: Path | None = None) -> dict:
    """Module-level ``NAME = value`` assignments that evaluate statically; names from ``shared`` (the
    launch_actions module the file imports) and earlier constants of the file resolved."""
    names = constants(ast.parse(shared.read_text(), filename=str(shared))) if shared is not None else {}
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = _value(node.value, {**names, **out})
            except (ValueError, KeyError, TypeError):
                pass
    return out
