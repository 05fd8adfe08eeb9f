# Node audit: the bundled HGX-class node (hwloc XML + its sysfs tree) against the HGX profile,
# writing the NCCL topology file; then this machine, live.
hgx="$ASTRAL_SOURCE_DIR/tests/fixtures/astral/topo/hgx-h100-8x400g"
"$ASTRAL_BIN" topo audit --hwloc-xml "$hgx/hwloc.xml" --sysfs-root "$hgx" --profile hgx-h100-8x400g \
  --nccl-topo-out "$ASTRAL_DEMO_OUT/hgx-nccl-topo.xml"
echo
echo "NCCL topology for the HGX node (first switch):"
sed -n '1,6p' "$ASTRAL_DEMO_OUT/hgx-nccl-topo.xml"
echo
echo "This machine:"
status=0
"$ASTRAL_BIN" topo audit --nccl-topo-out "$ASTRAL_DEMO_OUT/this-node-nccl-topo.xml" || status=$?
# Exit 1 means a check failed on this machine: worth reading, not a demo failure.
[ "$status" -le 1 ] || exit "$status"
