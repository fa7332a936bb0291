#!/usr/bin/env bash
# Direct reduce-copy reading peers 8 at a time: new (this tree) against old (51fb682), interleaved, twice.
set -u
OUT=$1
. bench/scripts/common.sh
record_env "$OUT"
chmod +x .deps/bin/*
# ab: bench/scripts/common.sh
{
  ab os8 -k all_reduce -a one_shot -r 8 -b 8 -e 64K -f 8 -n 50 -w 10 -R 7 -c 1 -G
  ab os8c1 -k all_reduce -a one_shot -r 8 -b 8 -e 64K -f 8 -n 50 -w 10 -R 7 -c 1 -G -C 1
  ab os4 -k all_reduce -a one_shot -r 4 -b 8 -e 8K -f 1024 -n 50 -w 10 -R 7 -c 1 -G
  ab os2 -k all_reduce -a one_shot -r 2 -b 8 -e 8K -f 1024 -n 50 -w 10 -R 7 -c 1 -G
  ab ts8 -k all_reduce -a two_shot -r 8 -b 8 -e 64K -f 8 -n 50 -w 10 -R 7 -c 1 -G
  ab os8big -k all_reduce -a one_shot -r 8 -b 256K -e 16M -f 4 -n 20 -w 5 -R 5 -c 1
  ab ts8big -k all_reduce -a two_shot -r 8 -b 1M -e 256M -f 16 -n 10 -w 3 -R 3 -c 1
} > "$OUT/ab_direct.txt" 2>&1
grep -c "^# exit 0" "$OUT/ab_direct.txt"
