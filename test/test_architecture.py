"""The layout's rules, checked on the source: pure math never imports ROS, qv_dynamics never imports qv_control,
every module and function stays small enough to read, and no modules import each other in a circle.

Walks the AST of every module of both packages (and launch/, bench/); a failure names the file, line and import.

The circle rule: module A depends on module B when any import statement of A names B, at module level or inside
a function (a function-level import defers the cost, not the coupling: the two files still cannot be read, tested
or moved apart). ``from P import x`` names the module ``P.x`` when that is a module, else the package ``P``
(its ``__init__``). The modules of qv_dynamics, qv_control and bench/ (whose scripts import each other by file
name) must form no circle: the dependency graph has no strongly connected component of more than one module."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("qv_dynamics", "qv_control")
ROS_MODULES = {"rclpy", "launch", "launch_ros", "std_msgs", "sensor_msgs", "geometry_msgs", "nav_msgs",
               "trajectory_msgs", "visualization_msgs", "diagnostic_msgs", "rosgraph_msgs", "builtin_interfaces",
               "rcl_interfaces"}
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80


def python_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
    return out


def _module_index(root: Path) -> dict[str, Path]:
    """Module name -> file, for the packages and bench/ (its files by their bare name, as its scripts import)."""
    index = {module_name(p, root): p for p in python_files(root)}
    index.update({p.stem: p for p in sorted((root / "bench").glob("*.py"))})
    return index


def _dependencies(path: Path, name: str, index: dict[str, Path], root: Path) -> set[str]:
    """The modules of ``index`` that the file imports (module doc: every import statement, at any depth)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    deps = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            deps.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (".".join(package[:len(package) - (node.level - 1)] + ([node.module] if node.module else []))
                    if node.level else node.module or "")
            for alias in node.names:
                deps.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in index else base)
    return {d for d in deps if d in index and d != name}


def import_circles(root: Path = ROOT) -> list[list[str]]:
    """Every set of modules that import each other in a circle (Tarjan's strongly connected components of more
    than one module), each sorted."""
    index = _module_index(root)
    graph = {name: _dependencies(path, name, index, root) for name, path in index.items()}
    order, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in order:
            visit(v)
    return sorted(circles)


def ros_allowed(path: Path, root: Path = ROOT) -> bool:
    """ROS imports are allowed in a ``ros/`` folder, the demo package and launch files only."""
    rel = path.relative_to(root).parts
    return "ros" in rel[:-1] or rel[:2] == ("qv_control", "demo") or rel[0] == "launch"


def layout_violations(root: Path = ROOT) -> list[str]:
    """Every breach of the import rules, as ``file:line: message``."""
    bad = []
    for path in python_files(root) + sorted((root / "launch").glob("*.py")):
        rel = path.relative_to(root)
        for line, name in imported_modules(path, root):
            top = name.split(".")[0]
            if top in ROS_MODULES and not ros_allowed(path, root):
                bad.append(f"{rel}:{line}: imports {name} outside a ros/ folder, qv_control/demo or launch/")
            if rel.parts[0] == "qv_dynamics" and top == "qv_control":
                bad.append(f"{rel}:{line}: qv_dynamics imports {name} (qv_control depends on qv_dynamics, "
                           "never the reverse)")
    return bad


def size_violations(root: Path = ROOT) -> list[str]:
    """Files over MAX_FILE_LINES lines and functions over MAX_FUNCTION_LINES lines."""
    bad = []
    for path in python_files(root):
        rel = path.relative_to(root)
        text = path.read_text()
        n = len(text.splitlines())
        if n > MAX_FILE_LINES:
            bad.append(f"{rel}: {n} lines > {MAX_FILE_LINES}")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    bad.append(f"{rel}:{node.lineno}: {node.name} has {length} lines > {MAX_FUNCTION_LINES}")
    return bad


def test_ros_imports_only_in_ros_folders_and_no_upward_import():
    assert layout_violations() == []


def test_files_and_functions_are_small():
    assert size_violations() == []


def test_no_import_circles():
    assert import_circles() == []


def test_the_circle_check_finds_a_function_level_circle(tmp_path):
    """A planted circle through a function-level import, one through ``from . import``, and bench scripts."""
    pkg = tmp_path / "qv_control"
    pkg.mkdir()
    (tmp_path / "qv_dynamics").mkdir()
    (tmp_path / "bench").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import f\n")
    (pkg / "b.py").write_text("def f():\n    from qv_control.a import g\n")
    (pkg / "c.py").write_text("from . import d\n")
    (pkg / "d.py").write_text("import qv_control.c\n")
    (pkg / "e.py").write_text("from . import a\n")  # depends on the circle, is not in it
    (tmp_path / "bench" / "x.py").write_text("def run():\n    from y import z\n")
    (tmp_path / "bench" / "y.py").write_text("from x import run\n")
    assert import_circles(tmp_path) == [["qv_control.a", "qv_control.b"], ["qv_control.c", "qv_control.d"],
                                        ["x", "y"]]


def test_the_checks_catch_a_violation(tmp_path):
    """The checks themselves fail on a planted breach (so a green run means something)."""
    pkg = tmp_path / "qv_dynamics"
    (pkg / "ros").mkdir(parents=True)
    (tmp_path / "qv_control").mkdir()
    (tmp_path / "launch").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "math_module.py").write_text("import numpy\nfrom rclpy.node import Node\nfrom qv_control import make_law\n")
    (pkg / "ros" / "node.py").write_text("import rclpy\nfrom ..math_module import Node\n")
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "qv_control" / "big.py").write_text(f"def f():\n{body}\n" + "\n" * MAX_FILE_LINES)
    layout = layout_violations(tmp_path)
    assert layout == ["qv_dynamics/math_module.py:2: imports rclpy.node outside a ros/ folder, qv_control/demo or "
                      "launch/",
                      "qv_dynamics/math_module.py:3: qv_dynamics imports qv_control (qv_control depends on "
                      "qv_dynamics, never the reverse)"]
    sizes = size_violations(tmp_path)
    assert len(sizes) == 2 and "big.py:" in sizes[0] and "f has 81 lines" in sizes[1]


@pytest.mark.parametrize("name", ["qv_dynamics", "qv_control"])
def test_public_api_imports(name):
    """The public names of SPEC §4 stay where the docs say."""
    if name == "qv_dynamics":
        from qv_dynamics import ConstrainedSystem, direct_dynamics, quasi_decompose, simulate  # noqa: F401
    else:
        from qv_control import Reference, State, make_law  # noqa: F401
