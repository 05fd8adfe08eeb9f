# The NCCL net plugin (libnccl-net-astral.so) measured without GPUs: local ranks over loopback,
# each pattern side by side with plain TCP sockets, payloads verified on every rank.
set -eu
echo "8-byte pingpong latency, plugin vs sockets:"
"$ASTRAL_BIN" netbench --pattern pingpong --size 8 --iters 2000 --baseline sockets
echo
echo "stream of 4 MiB messages, plugin vs sockets (JSON in netbench-stream.json):"
"$ASTRAL_BIN" netbench --pattern stream --size 4M --iters 64 --baseline sockets --json \
  > "$ASTRAL_DEMO_OUT/netbench-stream.json"
grep -E '"engine"|"gb_per_s"' "$ASTRAL_DEMO_OUT/netbench-stream.json"
echo
echo "ring all-reduce over 4 ranks:"
"$ASTRAL_BIN" netbench --pattern allreduce --ranks 4 --size 64K,1M --iters 20
