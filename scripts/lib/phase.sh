# shellcheck shell=bash
# Sourced by .ci/run and scripts/test: `phase NAME COMMAND...` runs COMMAND,
# prints "--- NAME" first, and appends "NAME<TAB>seconds<TAB>status" to the
# table in $PHASES_FILE, which scripts/timings prints. Returns COMMAND's
# status.
phase() {
  local name=$1 start status=0
  shift
  echo "--- $name"
  start=$(date +%s)
  "$@" || status=$?
  printf '%s\t%s\t%s\n' "$name" "$(($(date +%s) - start))" "$status" >>"$PHASES_FILE"
  return "$status"
}
