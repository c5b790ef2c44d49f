#!/usr/bin/env bash
# Lay out in the venv the ament prefix that `colcon build --symlink-install` makes, so that
# `ros2 launch shadow_twin FILE` and ament_index find this package with AMENT_PREFIX_PATH=VENV:
#   VENV/share/shadow_twin/package.xml, launch/*, config/**, models/*.xml   links into this checkout
#   VENV/lib/shadow_twin/<console script>                                  links to VENV/bin/<script>
#   VENV/share/ament_index/resource_index/packages/shadow_twin             the package marker
#   VENV/bin/activate exports AMENT_PREFIX_PATH with VENV in front (an earlier value is kept)
# One link per file in real directories, as colcon makes them (`ros2 launch` does not descend
# into a linked directory when it looks for a launch file), so edits in the checkout show at
# once; a file added to launch/ or config/ needs a new run. The console scripts are read from
# the installed package's entry points. Links of removed files or scripts are removed.
#
# Usage: bash scripts/ament_layout.sh [VENV]   (default: .venv; scripts/setup.sh calls it after
#        the editable install). Idempotent: a second run changes nothing.
set -euo pipefail

log() { printf '[ament_layout] %s\n' "$*"; }
die() { printf '[ament_layout] ERROR: %s\n' "$*" >&2; exit 1; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$(cd "${1:-$ROOT/.venv}" 2>/dev/null && pwd) || die "no venv at ${1:-$ROOT/.venv} (run scripts/setup.sh)"
PACKAGE=shadow_twin
[ -x "$VENV/bin/python" ] || die "no python at $VENV/bin/python"

# ---- what should be there: {path relative to VENV: link target}
declare -A want=()
want["share/$PACKAGE/package.xml"]="$ROOT/package.xml"
while IFS= read -r -d '' file; do
  want["share/$PACKAGE/$file"]="$ROOT/$file"
done < <(cd "$ROOT" && find launch config -name __pycache__ -prune -o -type f -print0)
for file in "$ROOT/$PACKAGE"/model/builtin/*.xml; do
  want["share/$PACKAGE/models/${file##*/}"]="$file"
done
# Run from / so that a stale shadow_twin.egg-info in the checkout is not read instead.
scripts=$(cd / && "$VENV/bin/python" -c "
from importlib.metadata import PackageNotFoundError, distribution
try:
    print('\n'.join(sorted(e.name for e in distribution('$PACKAGE').entry_points if e.group == 'console_scripts')))
except PackageNotFoundError:
    pass")
[ -n "$scripts" ] || die "$PACKAGE is not installed in $VENV (run scripts/setup.sh)"
for script in $scripts; do
  [ -x "$VENV/bin/$script" ] || die "console script $script of $PACKAGE is not in $VENV/bin"
  want["lib/$PACKAGE/$script"]="$VENV/bin/$script"
done

# ---- make it so, touching only what differs
changes=0
for dir in "share/$PACKAGE" "lib/$PACKAGE"; do    # a linked directory would put links into its target
  [ -L "$VENV/$dir" ] && { rm "$VENV/$dir"; changes=$((changes + 1)); }
done
while IFS= read -r -d '' path; do
  rm "$path"
  changes=$((changes + 1))
done < <(find "$VENV/share/$PACKAGE" "$VENV/lib/$PACKAGE" -xtype d -type l -print0 2>/dev/null)
for path in "${!want[@]}"; do
  target=${want[$path]}
  [ -L "$VENV/$path" ] && [ "$(readlink "$VENV/$path")" = "$target" ] && continue
  mkdir -p "$(dirname "$VENV/$path")"
  rm -rf "${VENV:?}/$path"             # a copy from a non-editable install, or an old link
  ln -s "$target" "$VENV/$path"
  changes=$((changes + 1))
done
while IFS= read -r -d '' path; do       # links (or copies) of files and scripts that are gone
  [ -n "${want[${path#"$VENV"/}]+set}" ] && continue
  rm -f "$path"
  changes=$((changes + 1))
done < <(find "$VENV/share/$PACKAGE" "$VENV/lib/$PACKAGE" \( -type l -o -type f \) -print0)
find "$VENV/share/$PACKAGE" -mindepth 1 -type d -empty -delete

MARKER="$VENV/share/ament_index/resource_index/packages/$PACKAGE"
if [ ! -f "$MARKER" ]; then
  mkdir -p "$(dirname "$MARKER")"
  : > "$MARKER"
  changes=$((changes + 1))
fi

ACTIVATE="$VENV/bin/activate"
BEGIN="# >>> $PACKAGE: the venv is an ament prefix (scripts/ament_layout.sh) >>>"
if ! grep -qF "$BEGIN" "$ACTIVATE"; then
  cat >> "$ACTIVATE" <<EOF

$BEGIN
# \`ros2 launch $PACKAGE ...\` and ament_index look for packages in AMENT_PREFIX_PATH.
case ":\${AMENT_PREFIX_PATH:-}:" in
  *":\$VIRTUAL_ENV:"*) ;;
  *) AMENT_PREFIX_PATH="\$VIRTUAL_ENV\${AMENT_PREFIX_PATH:+:\$AMENT_PREFIX_PATH}"; export AMENT_PREFIX_PATH ;;
esac
# <<< $PACKAGE <<<
EOF
  changes=$((changes + 1))
fi

if [ "$changes" -eq 0 ]; then
  log "ament layout of $PACKAGE in $VENV up to date"
else
  log "ament layout of $PACKAGE in $VENV: $changes change(s) (share/$PACKAGE, lib/$PACKAGE, index marker, activate)"
fi
