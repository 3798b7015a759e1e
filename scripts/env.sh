# Sourced by the scripts: set up .venv (scripts/setup.sh) and the environment every run uses.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export ROS_AUTOMATIC_DISCOVERY_RANGE=${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}
export MPLBACKEND=Agg
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}  # small matrices: threads only add latency
