#!/usr/bin/env bash
# One-command set-up of shadow_twin on a Debian/Ubuntu machine without ROS:
#   .venv with the ROS 2 Jazzy Python wheels (rclpy + Fast DDS, message packages),
#   the Python dependencies (requirements.txt), the project in editable mode,
#   the interface packages of interfaces/ (control_msgs, simulation_interfaces, tf2_msgs: not on PyPI) built into
#   the venv when they do not import or their sources changed (scripts/build_interfaces.sh),
#   and the ament layout of the package in the venv (scripts/ament_layout.sh: what
#   `colcon build --symlink-install` installs, AMENT_PREFIX_PATH in .venv/bin/activate),
#   so that `source .venv/bin/activate && ros2 launch shadow_twin twin.launch.py` works
#   once `ros2 launch` is installed too (../shared/tools/install_ros2_launch.sh).
#
# Usage: bash scripts/setup.sh            (PYTHON=python3.11 to choose the interpreter)
# Idempotent: a second run checks, changes nothing and takes seconds.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
PYTHON=${PYTHON:-python3}
log() { printf '[setup] %s\n' "$*"; }
quiet_pip() { "$VENV/bin/python" -m pip "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }

command -v "$PYTHON" >/dev/null || { echo "[setup] ERROR: $PYTHON not found (Python 3.11 is needed)" >&2; exit 1; }
PYVER=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ "$PYVER" = "3.11" ] || log "warning: Python $PYVER; the ROS 2 Jazzy wheels are built for 3.11 (set PYTHON=python3.11)"

# System packages, only if something is missing (cmake/g++ build the interfaces; chromium, headless, is the
# browser view's test and benchmark: the distribution's package, no browser download).
missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v g++ >/dev/null || missing+=(g++)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing+=(chromium)
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PYTHON" -m venv "$VENV"
  quiet_pip install -q --disable-pip-version-check --upgrade pip
fi

# Python packages and the editable install, skipped while their inputs are unchanged.
STAMP="$VENV/.shadow_twin_setup"
FINGERPRINT=$(cat "$ROOT/requirements.txt" "$ROOT/setup.py" "$ROOT/setup.cfg" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$FINGERPRINT" ]; then
  log "installing Python packages (requirements.txt)"
  quiet_pip install -q --disable-pip-version-check -r "$ROOT/requirements.txt"
  log "installing shadow_twin in editable mode"
  quiet_pip install -q --disable-pip-version-check --no-deps -e "$ROOT"
  echo "$FINGERPRINT" > "$STAMP"
else
  log "Python packages up to date"
fi

bash "$ROOT/scripts/build_interfaces.sh" "$VENV"
bash "$ROOT/scripts/ament_layout.sh" "$VENV"
log "done: activate with 'source .venv/bin/activate' or call .venv/bin/shadow-twin"
