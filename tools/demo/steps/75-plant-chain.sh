# From the cooling loop to the collective: a CDU pump fails under a 64-rank job. The simulator
# writes the whole chain in real formats (the site layout, the CDU's pushed Redfish events as the
# facility reader writes them, NVML alarms and nvidia-smi dumps on the hosts it cools, the kernel's
# thermal lines, the job's steps slowing and its straggler) and the CDU's Redfish service in its
# failed state. The step serves that CDU over HTTP, reads it as an operator would, and diagnoses
# the job: the monitor names the pump, with the evidence from plant to collective.
set -eu
out="$ASTRAL_DEMO_OUT/plant"
mkdir -p "$out"
bundle="$out/incident-cooling-loss"
"$ASTRAL_BIN" monitor simulate --fabric rail:16:8:8 --fault cooling-loss --ranks 64 --seed 1 -o "$bundle"

cdu_dir=$(find "$bundle.plant" -mindepth 1 -maxdepth 1 -type d | head -n 1)
cdu=$(basename "$cdu_dir")
. "$ASTRAL_SOURCE_DIR/tools/demo/mockup.sh"
start_mockup "$out/urls" "$out/mockup.log" --dir "$cdu_dir"
printf '{"redfish": [{"name": "%s", "url": "%s"}]}\n' "$cdu" "$(sed -n 1p "$out/urls")" > "$out/sources.json"

echo
echo "--- the plant now: astral facility read --config sources.json --site site.json (the CDU $cdu over HTTP)"
# Exit code 1 is expected: the pump's alarm is critical. The layout names equipment of other
# services too; their warnings go to the log.
rc=0
"$ASTRAL_BIN" facility read --config "$out/sources.json" --site "$bundle/site.json" \
  --events "$out/plant-now.events.jsonl" >"$out/read.txt" 2>"$out/read.log" || rc=$?
[ "$rc" -le 1 ] || { echo "plant demo: facility read failed (rc $rc)" >&2; cat "$out/read.log" >&2; exit 1; }
sed -n '/^Alarms/,$p' "$out/read.txt"
cat "$out/plant-now.events.jsonl"

echo
echo "--- what the monitor names as root cause (ground truth: $bundle.truth.json)"
"$ASTRAL_BIN" monitor diagnose "$bundle" --min-confidence 0.5
