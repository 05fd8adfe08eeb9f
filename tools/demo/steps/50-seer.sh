# Seer: accuracy on the calibration set, one prediction with its timeline, a layout search for
# GPT-3 175B on 12,288 H100 GPUs of a same-rail fabric, and a comparison with a profiler trace.
set -e
echo "--- accuracy on Korthikanti et al. (fitted on their per-layer table only)"
"$ASTRAL_BIN" seer validate
echo
echo "--- GPT-3 175B on 64 A100 as Korthikanti et al. ran it"
"$ASTRAL_BIN" seer predict --model gpt3-175b --hw a100-80gb --gpus 64 --config korthikanti-175b-selective \
  --timeline "$ASTRAL_DEMO_OUT/seer-175b-timeline.json" --timeline-level layer
echo
echo "--- layout search: GPT-3 175B on 12,288 H100, Astral same-rail network, global batch 1536"
"$ASTRAL_BIN" seer search --model gpt3-175b --hw h100-sxm --gpus 12288 --global-batch 1536 \
  --network astral-same-rail-12k --config megatron-core-overlap --top 5
echo
echo "--- predicted vs measured (synthetic Kineto trace with known per-kind factors)"
fx="$ASTRAL_SOURCE_DIR/tests/fixtures/astral/seer"
"$ASTRAL_BIN" seer compare --predicted "$fx/predicted-gpt-small.json" --measured "$fx/kineto-gpt-small-rank0.json"
