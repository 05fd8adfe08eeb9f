# Fabric model and flow-level simulator: generate both cluster designs at 1,024 GPUs, look up a
# NIC's leaf port and the paths between two GPUs, simulate an all-to-all, compare the designs.
# Leaves $ASTRAL_DEMO_OUT/fabric-same-rail.json and fabric-fat-tree.json for later steps.
set -eu
out="$ASTRAL_DEMO_OUT"
srt="$out/fabric-same-rail.json"
ft="$out/fabric-fat-tree.json"

"$ASTRAL_BIN" fabric generate same-rail-t2 --gpus 1024 --radix 64 -o "$srt"
echo
"$ASTRAL_BIN" fabric generate fat-tree --gpus 1024 --radix 64 -o "$ft" | tail -4
echo
echo "# where is node0100's rail-3 NIC cabled?"
"$ASTRAL_BIN" fabric locate --fabric "$srt" node0100:mlx5_3:1
echo
echo "# paths from node0001 GPU0 to node0100 GPU3 (cross-rail: direct through the core, or PXN)"
"$ASTRAL_BIN" fabric paths --fabric "$srt" --from node0001:0 --to node0100:3 --limit 2
echo
"$ASTRAL_BIN" fabric sim --fabric "$srt" --pattern alltoall --bytes 64MiB --routing same-rail \
  --plot "$out/fabric-sim-load.svg" -q
echo
"$ASTRAL_BIN" fabric compare --gpus 1024 --radix 64 --plot "$out/fabric-compare.svg" -q
echo "plots: $out/fabric-sim-load.svg $out/fabric-compare.svg"
