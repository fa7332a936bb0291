#!/usr/bin/env bash
# The direct algorithms, both binaries CMake Release builds: new = 3e3b358, old = 51fb682.
set -u
OUT=$1
. bench/scripts/common.sh
record_env "$OUT"
chmod +x .deps/bin/*
ROUNDS=3  # ab: bench/scripts/common.sh
{
  ab os8 -k all_reduce -a one_shot -r 8 -b 8 -e 8K -f 1024 -n 50 -w 10 -R 7 -c 1 -G
  ab ts8 -k all_reduce -a two_shot -r 8 -b 8 -e 32K -f 8 -n 50 -w 10 -R 7 -c 1 -G
  ab ts8big -k all_reduce -a two_shot -r 8 -b 1M -e 256M -f 16 -n 10 -w 3 -R 3 -c 1
} > "$OUT/ab_direct_cmake.txt" 2>&1
grep -c "^# exit 0" "$OUT/ab_direct_cmake.txt"
