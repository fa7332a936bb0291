#!/usr/bin/env bash
# bench/probes/launch_calls.cu at 8, 4 and 2 ranks: the event modes with the default hardware
# queues, the memop modes with 32 (they deadlock with 8: the probe's comment says why).
#   bash bench/results/launch_2026-12-05/probe.sh OUT
set -u
OUT=${1:?}
BIN=${BIN:-.deps/bin}
for r in 8 4 2; do
  timeout 30 "$BIN/launch_calls" $r 4000 record+wait,memop,is_capturing,events,events
  CUDA_DEVICE_MAX_CONNECTIONS=32 timeout 30 "$BIN/launch_calls" $r 4000 events,memops,memops_async,memops
done > "$OUT/launch_calls.txt" 2>&1
