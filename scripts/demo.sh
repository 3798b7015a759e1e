#!/usr/bin/env bash
# Set up .venv and run the main demo headless; the report lands in out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export ROS_AUTOMATIC_DISCOVERY_RANGE=${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}
export MPLBACKEND=Agg
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}  # small matrices: threads only add latency
exec .venv/bin/python -m qv_control.cli demo --out out/demo "$@"
