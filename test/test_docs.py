"""The documentation: it builds with warnings as errors, its generated pages are current, and every code block
of the README, the getting-started page and the tutorials runs.

Code blocks, per page, in a fresh temporary folder (with ``config/`` of the package beside it):

- ``yaml`` blocks whose first line is ``# file: NAME`` are written to NAME; every other one must parse;
- ``python`` blocks run in order in one interpreter (a page's later blocks see its earlier ones' files);
- ``bash`` blocks, line by line: ``.venv/bin/python -m qv_control.cli ...`` runs (``--duration`` shortened to
  0.2 s); ``ros2 launch qv_ros FILE name:=value ...`` needs FILE in launch/ declaring every ``name`` (launch is
  not installed here); ``ros2 service call /node/NAME std_srvs/srv/Trigger`` needs a Trigger service NAME the
  task layer creates; ``ros2 topic echo /node/NAME`` needs a publisher of ``~/NAME`` (or ``/NAME``) in a node's
  source; ``ros2 run qv_ros EXE --ros-args -r __node:=NAME --params-file FILE ...`` needs EXE among the
  package's executables and a section NAME in FILE (a file the page wrote); ``bash scripts/X.sh`` needs the
  script (CI runs scripts/test.sh, and the demo's short
  version is test_demo_short.py); the set-up lines of a ROS 2 workspace (cd, git clone, colcon build, source,
  ros2 run qv_ros qv warm) are listed in SETUP; any other command fails the test.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "doc"
PAGES = [ROOT / "README.md", DOC / "getting_started.md",
         *sorted(p for p in (DOC / "tutorials").glob("*.md") if p.name != "index.md")]
SETUP = ("cd ", "git clone", "colcon build", "source ", "ros2 run qv_ros qv warm")
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 23) % 200


def blocks(page: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text(encoding="utf-8"))]


def test_docs_build_with_warnings_as_errors(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOC),
                           str(tmp_path / "html")], capture_output=True, text=True, timeout=240,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "html" / "reference" / "api.html").is_file()


def test_generated_pages_are_current():
    proc = subprocess.run([sys.executable, str(DOC / "generate.py"), "--check"], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr


def _launch_arguments(name: str) -> set[str]:
    text = (ROOT / "launch" / name).read_text() + (ROOT / "qv_control" / "ros" / "launch_actions.py").read_text()
    return set(re.findall(r"DeclareLaunchArgument\(\s*\"(\w+)\"", text))


def _node_sources() -> str:
    folders = (ROOT / "qv_control" / "ros", ROOT / "qv_dynamics" / "ros")
    return "".join(p.read_text() for d in folders for p in sorted(d.glob("*.py")))


def _trigger_services() -> set[str]:
    """The std_srvs/Trigger services of the task layer (created in a loop over (name, handler) pairs)."""
    text = (ROOT / "qv_control" / "ros" / "task_layer.py").read_text()
    assert "create_service(Trigger" in text
    return set(re.findall(r'\("(\w+)", self\._\w+\)', text))


def _run_shell_line(line: str, cwd: Path, env: dict) -> None:
    words = line.split()
    if line.startswith(".venv/bin/python -m qv_control.cli"):
        args = [sys.executable, *words[1:]]
        if "--duration" in args:
            args[args.index("--duration") + 1] = "0.2"
        proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (line, proc.stdout[-2000:], proc.stderr[-2000:])
    elif words[:3] == ["ros2", "launch", "qv_ros"]:
        assert (ROOT / "launch" / words[3]).is_file(), line
        names = {w.split(":=")[0] for w in words[4:] if ":=" in w}
        assert names <= _launch_arguments(words[3]), (line, names - _launch_arguments(words[3]))
    elif words[:3] == ["ros2", "run", "qv_ros"] and "--ros-args" in words:
        assert f'"{words[3]} = qv_entry:' in (ROOT / "setup.py").read_text(), line
        node = words[words.index("-r") + 1].split("__node:=")[1]
        params = yaml.safe_load((cwd / words[words.index("--params-file") + 1]).read_text())
        assert "ros__parameters" in params[node], line
    elif words[:3] == ["ros2", "service", "call"]:
        assert words[4] == "std_srvs/srv/Trigger" and words[3].rsplit("/", 1)[-1] in _trigger_services(), line
    elif words[:3] == ["ros2", "topic", "echo"]:
        name = words[3].rsplit("/", 1)[-1]
        assert f'"~/{name}"' in _node_sources() or f'"/{name}"' in _node_sources(), line
    elif words[:1] == ["bash"]:
        assert (ROOT / words[1]).is_file(), line
    else:
        assert line.startswith(SETUP), f"a command the docs test cannot run or check: {line}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_code_blocks_run(page, tmp_path):
    (tmp_path / "config").symlink_to(ROOT / "config", target_is_directory=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg", ROS_DOMAIN_ID=str(DOMAIN),
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    found = blocks(page)
    assert found, f"{page} has no code block"
    python = []
    for lang, body in found:
        if lang == "yaml":
            doc = yaml.safe_load(body)
            first = body.splitlines()[0]
            if first.startswith("# file: "):
                (tmp_path / first[len("# file: "):].strip()).write_text(body)
            assert doc is not None
        elif lang == "python":
            python.append(body)
    for lang, body in found:
        if lang == "bash":
            for raw in body.splitlines():
                line = raw.split("  #")[0].split(" # ")[0].strip()
                for part in (p.strip() for p in line.split("&&")):
                    if part:
                        _run_shell_line(part, tmp_path, env)
    if python:
        script = tmp_path / "blocks.py"
        script.write_text("\n\n".join(python))
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]


def test_readme_figures_come_from_the_generated_tables():
    """Every figure the README's feature list quotes (in bold) is in a table a script wrote (doc/results/
    generated/), so a figure changes only when the script is run again."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    features = text[text.index("## What it does"):text.index("## In Python")]
    figures = re.findall(r"\*\*([0-9][0-9.]*(?:e-?[0-9]+)?)[^*]*\*\*", features)
    tables = "".join(p.read_text(encoding="utf-8") for p in sorted((DOC / "results" / "generated").glob("*.md")))
    assert figures, "the feature list quotes no figure"
    assert [f for f in figures if f not in tables] == []
