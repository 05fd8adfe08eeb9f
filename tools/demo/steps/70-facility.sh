# Facility telemetry: a liquid-cooled rack (HVDC-style power shelf + CDU, each a Redfish service
# on loopback, energy counters running) read over HTTP: its power against budget, conversion loss,
# AC versus HVDC chains, cooling balance, PUE over a few seconds, a Prometheus scrape, and its
# alarms as monitor events.
set -eu
rack="$ASTRAL_SOURCE_DIR/tests/fixtures/astral/facility/rack42"
out="$ASTRAL_DEMO_OUT/facility"
mkdir -p "$out"
rm -f "$out/rack42.events.jsonl"

. "$ASTRAL_SOURCE_DIR/tools/demo/mockup.sh"
start_mockup "$out/urls" "$out/mockup.log" --dir "$rack/shelf" --dir "$rack/cdu" --simulate-energy
shelf_url=$(sed -n 1p "$out/urls")
cdu_url=$(sed -n 2p "$out/urls")
sed -e "s|@SHELF_URL@|$shelf_url|" -e "s|@CDU_URL@|$cdu_url|" "$rack/sources.json.in" > "$out/sources.json"
echo "rack42: power shelf at $shelf_url, CDU at $cdu_url"

# Exit code 1 means "an alarm or a failed source": the demo rack has a leak warning on purpose,
# but nothing at error level, so anything but 0 here is a real problem.
echo
echo "--- astral facility read --config sources.json"
"$ASTRAL_BIN" facility read --config "$out/sources.json" --events "$out/rack42.events.jsonl"

echo
echo "--- astral facility pue --config sources.json --interval 3"
"$ASTRAL_BIN" facility pue --config "$out/sources.json" --interval 3

echo
echo "--- Prometheus scrape (astral facility serve --once), rack and cooling families"
"$ASTRAL_BIN" facility serve --config "$out/sources.json" --once > "$out/metrics.prom"
grep -E '^astral_facility_(rack_|liquid_heat|pue|conversion_efficiency|chain_|cooling_headroom)' "$out/metrics.prom" | head -20
echo "($(grep -vc '^#' "$out/metrics.prom") series in $out/metrics.prom)"

echo
echo "--- monitor events ($out/rack42.events.jsonl)"
cat "$out/rack42.events.jsonl"
