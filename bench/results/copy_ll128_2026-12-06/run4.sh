#!/usr/bin/env bash
# direct_copy's loads with the L2 256-byte prefetch hint (pf), and with streaming stores (pfcs),
# against the loop as committed (cur): direct all_gather and broadcast, 2 and 8 ranks, 16 MiB to
# 1 GiB, two rounds in turn, then a check (-c 1) of pf and pfcs at 3 ranks to 4 MiB.
#   bash bench/results/copy_ll128_2026-12-06/run4.sh OUT
set -u
OUT=${1:?usage: run4.sh OUT}
B=.deps/bin
for round in 1 2; do
  for v in cur pf pfcs; do
    for r in 2 8; do
      for k in all_gather broadcast; do
        echo "== copy $k r$r $v round $round"
        timeout 120 $B/bench_$v -k $k -a direct -r $r -b 16M -e 1G -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
      done
    done
  done
done > "$OUT/copy4.txt" 2>&1
for v in pf pfcs; do
  echo "== check $v"
  for k in all_gather broadcast; do timeout 60 $B/bench_$v -k $k -a direct -r 3 -b 8 -e 4M -f 8 -n 2 -w 1 -c 1 -R 1 | grep -E "^ +[0-9]"; done
done >> "$OUT/copy4.txt" 2>&1
