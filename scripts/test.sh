#!/usr/bin/env bash
# Set up .venv and run the test suite (what CI runs): pytest, including ruff (test/test_lint.py) and the docs
# (test/test_docs.py: sphinx-build -W of doc/, the generated pages current, every README/tutorial code block run).
set -euo pipefail
source "$(dirname "$0")/env.sh"
# the docs' requirements (Sphinx, myst-parser, the theme): only in the test venv, not needed to run the package
.venv/bin/python -m pip install -q -r requirements-docs.txt
# sdformat's URDF->SDF converter (`ign sdf -p`) for test/test_urdf_targets.py, which skips without it:
# two Debian packages (~8 MB), installed only when running as root with apt (CI); QV_NO_APT=1 opts out
if [ "${QV_NO_APT:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
    && ! command -v ign >/dev/null && ! command -v gz >/dev/null; then
  SDF_PKGS="ignition-tools libsdformat-dev"
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 apt-get install -y -q --no-install-recommends $SDF_PKGS >/dev/null 2>&1 \
    || { timeout 300 apt-get update -q >/dev/null 2>&1 \
         && timeout 300 apt-get install -y -q --no-install-recommends $SDF_PKGS >/dev/null 2>&1; } \
    || echo "test: could not install $SDF_PKGS: the URDF->SDF conversion test will skip"
fi
exec .venv/bin/python -m pytest -q -p no:cacheprovider test "$@"
