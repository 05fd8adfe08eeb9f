#!/bin/sh
# The main job: runs every capability's demo step (tools/demo/steps/NN-*.sh) in order.
# Environment (set by the `demo` build target): ASTRAL_BIN, ASTRAL_BUILD_DIR, ASTRAL_SOURCE_DIR.
# Outputs go to $ASTRAL_BUILD_DIR/demo-out.
set -eu
: "${ASTRAL_BIN:?}" "${ASTRAL_BUILD_DIR:?}" "${ASTRAL_SOURCE_DIR:?}"
ASTRAL_DEMO_OUT="$ASTRAL_BUILD_DIR/demo-out"
rm -rf "$ASTRAL_DEMO_OUT" && mkdir -p "$ASTRAL_DEMO_OUT"
export ASTRAL_BIN ASTRAL_BUILD_DIR ASTRAL_SOURCE_DIR ASTRAL_DEMO_OUT
for step in "$ASTRAL_SOURCE_DIR"/tools/demo/steps/*.sh; do
  [ -e "$step" ] || continue
  echo
  echo "=== demo: $(basename "$step" .sh) ==="
  sh "$step"
done
echo
echo "=== demo finished; outputs in $ASTRAL_DEMO_OUT ==="
