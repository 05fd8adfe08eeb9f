# Cross-host traces: netbench on 4 local ranks with tracing on (the plugin records every
# connection and transfer, one crash-safe file per rank), then the files checked, merged onto one
# timeline (open netbench-trace.json in https://ui.perfetto.dev) and summarised per rank and link.
set -eu
dir="$ASTRAL_DEMO_OUT/traces"
rm -rf "$dir"
echo "ring all-reduce over 4 ranks, traced into $dir:"
ASTRAL_TRACE_MAX_MB=8 "$ASTRAL_BIN" netbench --pattern allreduce --ranks 4 --size 256K --iters 20 \
  --trace-dir "$dir"
echo
"$ASTRAL_BIN" trace check "$dir"
echo
"$ASTRAL_BIN" trace export "$dir" -o "$ASTRAL_DEMO_OUT/netbench-trace.json"
echo
"$ASTRAL_BIN" trace stats "$dir"
