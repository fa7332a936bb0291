#!/usr/bin/env bash
# The ll128 GPU tests with the receivers using their polled values; then direct all_gather with
# 1024 threads and 1, 2 (as committed) or 4 vectors in flight per thread in the copy loop (narrow
# benches ag_u1, ag_u2, ag_u4), 2 and 8 ranks, 16 MiB to 512 MiB by 2x, two rounds in turn.
#   bash bench/results/copy_ll128_2026-12-06/run10.sh OUT
set -u
OUT=${1:?usage: run10.sh OUT}
B=.deps/bin
for t in test_gpu_ll128 test_gpu_ll128_moving test_gpu_ll128_reducing; do
  [[ -x $B/$t ]] || continue
  timeout 300 $B/$t > "$OUT/$t.txt" 2>&1
  echo "$t rc=$? $(tail -n 2 "$OUT/$t.txt" | tr '\n' ' ')"
done
for round in 1 2; do
  for v in u1 u2 u4; do
    for r in 2 8; do
      echo "== all_gather r$r $v round $round"
      timeout 120 $B/bench_ag_$v -k all_gather -a direct -r $r -b 16M -e 512M -f 2 -n 10 -w 3 -c 0 -R 3 --no-in-place 2>&1 | grep -E "^ +[0-9]|rror"
    done
  done
done > "$OUT/unroll.txt" 2>&1
