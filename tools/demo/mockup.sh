# Sourced by demo steps: start_mockup URLS_FILE LOG [facility mockup flags...] serves DMTF mockup
# directories in the background (pid in $mockup, killed on exit) and waits until their URLs are
# in URLS_FILE, one per --dir.
start_mockup() {
  urls=$1 log=$2
  shift 2
  rm -f "$urls"
  "$ASTRAL_BIN" facility mockup "$@" --port-file "$urls" 2>"$log" &
  mockup=$!
  trap 'kill $mockup 2>/dev/null || true' EXIT INT TERM
  tries=0
  while [ ! -s "$urls" ]; do
    tries=$((tries + 1))
    if [ "$tries" -gt 200 ]; then echo "demo: the mockup services did not start" >&2; cat "$log" >&2; exit 1; fi
    sleep 0.05
  done
}
