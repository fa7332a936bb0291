#!/usr/bin/env bash
# Direct all_gather and broadcast with 1024 threads per block (bench_t1024: the narrow bench built
# with tuning's default Threads = 1024) against 512 (bench_cur), 2 and 8 ranks, the world's
# channels, 16 MiB to 1 GiB, two rounds in turn; then a check (-c 1) of t1024 at 3 ranks to 4 MiB.
#   bash bench/results/copy_ll128_2026-12-06/run6.sh OUT
set -u
OUT=${1:?usage: run6.sh OUT}
B=.deps/bin
for round in 1 2; do
  for v in cur t1024; do
    for r in 2 8; do
      for k in all_gather broadcast; do
        echo "== $k r$r $v round $round"
        timeout 120 $B/bench_$v -k $k -a direct -r $r -b 16M -e 1G -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place 2>&1 | grep -E "^ +[0-9]|rror"
      done
    done
  done
done > "$OUT/threads.txt" 2>&1
echo "== check t1024" >> "$OUT/threads.txt"
for k in all_gather broadcast; do timeout 60 $B/bench_t1024 -k $k -a direct -r 3 -b 8 -e 4M -f 8 -n 2 -w 1 -c 1 -R 1 2>&1 | grep -E "^ +[0-9]|rror"; done >> "$OUT/threads.txt"
tail -n 3 "$OUT/threads.txt"
