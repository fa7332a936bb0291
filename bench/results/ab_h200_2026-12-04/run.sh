#!/usr/bin/env bash
# Before/after in one device session: old = collcomm_bench of 584645e, new = this tree's. Same
# flags, interleaved, twice. OUT: the log folder.
set -u
OUT=$1
. bench/scripts/common.sh
record_env "$OUT"
chmod +x .deps/bin/*
# ab: bench/scripts/common.sh
{
  ab small -k all_reduce -a one_shot -r 8 -b 8 -e 8K -f 1024 -n 50 -w 10 -R 7 -c 1 -G
  ab small1 -k all_reduce -a one_shot -r 8 -b 8 -e 8K -f 1024 -n 50 -w 10 -R 7 -c 1 -G -C 1
  ab ring_small -k all_reduce -a ring -r 8 -b 8 -e 8K -f 1024 -n 50 -w 10 -R 7 -c 1 -G
  ab ring_ll -k all_reduce -a ring -p ll -r 8 -b 8 -e 8K -f 1024 -n 50 -w 10 -R 7 -c 1 -G -C 1
  ab tree_ll -k all_reduce -a tree -p ll -r 8 -b 8 -e 8K -f 1024 -n 50 -w 10 -R 7 -c 1 -G -C 4
} > "$OUT/ab_small.txt" 2>&1
{
  ab ar8 -k all_reduce -a ring -r 8 -b 64M -e 1G -f 16 -n 10 -w 3 -R 3 -c 0 -C 16 -s 1M
  ab ar2 -k all_reduce -a ring -r 2 -b 64M -e 1G -f 16 -n 10 -w 3 -R 3 -c 0 -C 64 -s 1M
  ab ag8 -k all_gather -a ring -r 8 -b 1G -e 1G -n 10 -w 3 -R 3 -c 0 -C 16 -s 1M
  ab ar8bf16 -k all_reduce -a ring -t bf16 -r 8 -b 256M -e 256M -n 10 -w 3 -R 3 -c 1 -C 16 -s 1M
  ab tree8bf16 -k all_reduce -a tree -t bf16 -r 8 -b 256M -e 256M -n 10 -w 3 -R 3 -c 1 -C 16 -s 1M
} > "$OUT/ab_bw.txt" 2>&1
grep -c "^# exit 0" "$OUT/ab_small.txt" "$OUT/ab_bw.txt"
