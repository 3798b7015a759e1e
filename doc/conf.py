"""Sphinx configuration of the qv_ros documentation.

Builds with plain ``sphinx-build -W doc <out>`` and with ``rosdoc2 build --package-path .`` (which finds this
``doc/`` folder by the standard location and rosdoc2.yaml). Pages are Markdown (myst-parser); the API
reference is autodoc of the docstrings; the tables under ``*/generated/`` are written by scripts
(doc/generate.py, bench/simulate.py --write-table), never by hand.
"""
import os
import sys
import xml.etree.ElementTree as ET


def _wrapped_from() -> list:
    """The doc/ folder this file was read from when rosdoc2 runs it: rosdoc2 writes a conf.py of its own that
    executes this one as ``exec(open("<package>/doc/conf.py").read())``."""
    import inspect
    import re

    found, frame = [], inspect.currentframe()
    while frame is not None:
        name = frame.f_code.co_filename
        if name.endswith("conf.py") and os.path.isfile(name):
            with open(name) as f:
                found += [os.path.dirname(m) for m in re.findall(r'exec\(open\("([^"]+)"\)', f.read())]
        frame = frame.f_back
    return found


def _package_root() -> str:
    """The folder of package.xml: beside this doc/ folder; rosdoc2 runs this file from a wrapping project of its
    own, so the folder its wrapper read this file from and the working directory are searched too."""
    here = os.path.dirname(os.path.abspath(globals().get("__file__", os.path.join(os.getcwd(), "conf.py"))))
    for start in (os.path.join(here, ".."), *(os.path.join(d, "..") for d in _wrapped_from()), os.getcwd()):
        path = os.path.abspath(start)
        while path != os.path.dirname(path):
            if os.path.isfile(os.path.join(path, "package.xml")) and os.path.isdir(os.path.join(path, "qv_dynamics")):
                return path
            path = os.path.dirname(path)
    raise RuntimeError("qv_ros documentation: package.xml not found beside doc/ nor above the working directory")


ROOT = _package_root()
sys.path.insert(0, ROOT)
os.environ.setdefault("QV_COMPILED", "0")  # importing for autodoc loads no compiled kernel

_package = ET.parse(os.path.join(ROOT, "package.xml")).getroot()
project = _package.findtext("name")
release = version = _package.findtext("version")
author = "qv_ros developers"
copyright = f"{author}, {_package.findtext('license')}"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.mathjax", "sphinx.ext.viewcode"]
try:
    import sphinx_rtd_theme  # noqa: F401

    extensions.append("sphinx_rtd_theme")
    html_theme = "sphinx_rtd_theme"
except ImportError:
    html_theme = "alabaster"

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
master_doc = root_doc = "index"
# reference/generated, results/generated: pages written by scripts, included by the pages that show them
exclude_patterns = ["_build", "sphinx_output", "generated/index_and_search.rst", "**/README.md", "reference/generated",
                    "results/generated"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "none"          # the docstrings state the shapes and the math
autodoc_default_options = {"undoc-members": False, "show-inheritance": False}  # members listed per page
autodoc_mock_imports = ["rclpy", "launch", "launch_ros"]
nitpicky = False
# autodoc's cross references to names a docstring mentions but the reference does not document (private
# helpers, other modules' internals) are plain text, not warnings
suppress_warnings = ["ref.python"]
