#!/usr/bin/env bash
# ll128 receivers using the values of the load that saw the flags (every lane loads its line in each
# poll, as NCCL's LL128 does; llnccl) against flag lanes polling, then every lane loading the lines
# (as committed; llcur): ring all_reduce, 2 and 8 ranks, 16 MiB to 512 MiB, two rounds in turn, simple
# (1 MiB slots) beside; then llnccl checked (-c 1) to 64 MiB at 2 and 8 ranks.
#   bash bench/results/copy_ll128_2026-12-06/run9.sh OUT
set -u
OUT=${1:?usage: run9.sh OUT}
B=.deps/bin
for round in 1 2; do
  for r in 2 8; do
    echo "== all_reduce r$r simple round $round"
    timeout 60 $B/bench_llcur -k all_reduce -a ring -p simple -s 1M -r $r -b 16M -e 512M -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
    for v in llcur llnccl; do
      echo "== all_reduce r$r $v round $round"
      timeout 60 $B/bench_$v -k all_reduce -a ring -p ll128 -r $r -b 16M -e 512M -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
    done
  done
done > "$OUT/ll128.txt" 2>&1
for r in 2 8; do
  echo "== check llnccl r$r"
  timeout 200 $B/bench_llnccl -k all_reduce -a ring -p ll128 -r $r -b 8 -e 64M -f 8 -n 3 -w 1 -c 1 --check-max 64M -R 1 | grep -E "^ +[0-9]"
done >> "$OUT/ll128.txt" 2>&1
grep -A9 "check" "$OUT/ll128.txt" | awk '{print $NF}' | sort | uniq -c
