# Monitor: inject a fault into a job running on the generated same-rail fabric (real log formats
# from every layer, with noise), then diagnose the bundle as an operator would.
set -eu
out="$ASTRAL_DEMO_OUT"
fabric="$out/fabric-same-rail.json"
"$ASTRAL_BIN" monitor simulate --fabric "$fabric" --fault nic-down --ranks 64 --seed 7 \
  -o "$out/incident-nic-down"
echo
echo "# what the monitor names as root cause (ground truth: $out/incident-nic-down.truth.json)"
"$ASTRAL_BIN" monitor diagnose "$out/incident-nic-down" --fabric "$fabric" \
  --timeline "$out/incident-nic-down.timeline.json"
echo "timeline (open in ui.perfetto.dev): $out/incident-nic-down.timeline.json"
