#!/usr/bin/env bash
# Kept for existing callers: builds only interfaces/control_msgs into the venv.
# scripts/build_interfaces.sh does the work (and builds every package under
# interfaces/ when no package is named); FORCE=1 and JOBS=N apply as there.
#
# Usage: bash scripts/build_control_msgs.sh [VENV_DIR]   (default: .venv)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
exec bash "$ROOT/scripts/build_interfaces.sh" "${1:-$ROOT/.venv}" control_msgs
