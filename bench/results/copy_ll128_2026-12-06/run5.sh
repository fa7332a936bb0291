#!/usr/bin/env bash
# Channels beyond one block per SM for the direct kinds (the bench of 096fdb4): 2 ranks with 64, 96
# and 128 channels, 8 ranks with 16, 24 and 32; 16 MiB to 1 GiB, two rounds in turn. A count the
# kernel cannot keep resident is refused by the launch (the log says so).
#   bash bench/results/copy_ll128_2026-12-06/run5.sh OUT
set -u
OUT=${1:?usage: run5.sh OUT}
B=.deps/bin/collcomm_bench
for round in 1 2; do
  for C in 64 96 128; do
    for ka in "all_gather direct" "reduce_scatter direct" "broadcast direct" "all_reduce one_shot" "all_reduce two_shot"; do
      set -- $ka
      echo "== $1 r2 $2 C$C round $round"
      timeout 120 $B -k $1 -a $2 -r 2 -C $C -b 16M -e 1G -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place 2>&1 | grep -E "^ +[0-9]|rror|refus" | head -5
    done
  done
  for C in 16 24 32; do
    for ka in "all_gather direct" "reduce_scatter direct" "all_reduce two_shot"; do
      set -- $ka
      echo "== $1 r8 $2 C$C round $round"
      timeout 120 $B -k $1 -a $2 -r 8 -C $C -b 16M -e 1G -f 4 -n 10 -w 3 -c 0 -R 3 --no-in-place 2>&1 | grep -E "^ +[0-9]|rror|refus" | head -5
    done
  done
done > "$OUT/channels.txt" 2>&1
grep -c "^ " "$OUT/channels.txt"
