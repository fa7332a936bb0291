#!/usr/bin/env bash
# The committed state: test_gpu_sched_moving and test_gpu_api; then, two rounds in turn,
#   all_reduce at 2 ranks from 32 MiB to 1 GiB: automatic (the table's 32-channel arm above 128 MiB)
#     against one_shot with the world's 64 channels and with 32, and two_shot;
#   all_gather at 2 and 8 ranks, 16 MiB to 1 GiB: automatic (direct, its own block through the
#     direct copy loop) against the narrow bench of the parent commit (bench_base, direct).
#   bash bench/results/copy_ll128_2026-12-06/run3.sh OUT
set -u
OUT=${1:?usage: run3.sh OUT}
B=.deps/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/summary.txt"
for t in test_gpu_sched_moving test_gpu_api; do
  timeout 300 $B/$t > "$OUT/$t.txt" 2>&1
  echo "$t rc=$? $(tail -n 2 "$OUT/$t.txt" | tr '\n' ' ')" >> "$OUT/summary.txt"
done
for round in 1 2; do
  for a in "automatic" "one_shot -C 64" "one_shot -C 32" "two_shot -C 64"; do
    echo "== all_reduce r2 $a round $round"
    timeout 120 $B/collcomm_bench -k all_reduce -r 2 -a $a -b 32M -e 1G -f 2 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]|^# .*arm|from"
  done
  for r in 2 8; do
    echo "== all_gather r$r automatic round $round"
    timeout 120 $B/collcomm_bench -k all_gather -a automatic -r $r -b 16M -e 1G -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
    echo "== all_gather r$r base round $round"
    timeout 120 $B/bench_base -k all_gather -a direct -r $r -b 16M -e 1G -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
  done
done > "$OUT/bench.txt" 2>&1
cat "$OUT/summary.txt"
