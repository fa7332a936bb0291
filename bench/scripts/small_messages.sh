#!/usr/bin/env bash
# Small-message latency of all_reduce among ranks as threads on one GPU (collcomm_bench, f32 sum),
# the figures of bench/RESULTS.md's small-message table: one_shot, two_shot, ring and tree, each
# replayed from a CUDA graph (-G) and stream-launched, 8 B to 64 KiB, 50 calls per repetition,
# median of 7; then one_shot with 1 channel, two_shot with 2, and ring and tree with the ll
# protocol at 1, 4 and 16 channels from a graph, 8 B to 1 MiB. Every call's output checked (-c 1).
#   bash bench/scripts/small_messages.sh OUT        -> OUT/env.txt, OUT/small_messages.txt
# RANKS (default 8): the ranks, all on GPU 0. BIN: where collcomm_bench is (scripts/common.sh).
set -u
out=${1:?usage: small_messages.sh OUT}
. "$(dirname "$0")/common.sh"
record_env "$out"
r=${RANKS:-8}
common=(-k all_reduce -r "$r" -n 50 -w 10 -R 7 -c 1)
{
  for a in one_shot two_shot ring tree; do
    bench "${common[@]}" -a $a -b 8 -e 64K -f 4 -G
    bench "${common[@]}" -a $a -b 8 -e 64K -f 4
  done
  bench "${common[@]}" -a one_shot -b 8 -e 64K -f 4 -G -C 1
  bench "${common[@]}" -a one_shot -b 8 -e 64K -f 4 -C 1
  bench "${common[@]}" -a two_shot -b 8 -e 1M -f 4 -G -C 2
  for C in 1 4 16; do
    bench "${common[@]}" -a ring -p ll -b 8 -e 1M -f 4 -G -C $C
    bench "${common[@]}" -a tree -p ll -b 8 -e 1M -f 4 -G -C $C
  done
  bench "${common[@]}" -a ring -p ll -b 8 -e 1M -f 4
  bench "${common[@]}" -a tree -p ll -b 8 -e 1M -f 4
} > "$out/small_messages.txt" 2>&1
grep -c "^# exit 0" "$out/small_messages.txt"
