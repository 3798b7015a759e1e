"""Sphinx configuration of the qv_ros documentation.

Builds with plain ``sphinx-build -W doc <out>`` and with ``rosdoc2 build --package-path .`` (which finds this
``doc/`` folder by the standard location and rosdoc2.yaml). Pages are Markdown (myst-parser); the API
reference is autodoc of the docstrings; the tables under ``*/generated/`` are written by scripts
(doc/generate.py, bench/simulate.py --write-table), never by hand.
"""
import os
import sys
import xml.etree.ElementTree as ET

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
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
