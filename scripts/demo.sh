#!/usr/bin/env bash
# Set up .venv and run the main demo headless; the report lands in out/demo/.
set -euo pipefail
source "$(dirname "$0")/env.sh"
exec .venv/bin/python -m qv_control.cli demo --out out/demo "$@"
