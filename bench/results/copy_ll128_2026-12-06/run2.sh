#!/usr/bin/env bash
# Local copies of direct all_gather and broadcast: as committed (base: reduce_copy::run, 4 vectors
# in flight), reduce_copy::run with 8 (cu8), and the direct_copy loop (2 vectors, locdc); 2 and 8
# ranks, 16 MiB to 1 GiB, two rounds in turn. Narrow benches in .deps/bin.
#   bash bench/results/copy_ll128_2026-12-06/run2.sh OUT
set -u
OUT=${1:?usage: run2.sh OUT}
B=.deps/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
for round in 1 2; do
  for v in base cu8 locdc; do
    for r in 2 8; do
      for k in all_gather broadcast; do
        echo "== copy $k r$r $v round $round"
        timeout 120 $B/bench_$v -k $k -a direct -r $r -b 16M -e 1G -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
      done
    done
  done
done > "$OUT/copy2.txt" 2>&1
for v in cu8 locdc; do
  echo "== check $v"
  for k in all_gather broadcast; do timeout 60 $B/bench_$v -k $k -a direct -r 3 -b 8 -e 4M -f 8 -n 2 -w 1 -c 1 -R 1 | grep -E "^ +[0-9]"; done
done >> "$OUT/copy2.txt" 2>&1
tail -n 3 "$OUT/copy2.txt"
