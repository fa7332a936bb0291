#!/usr/bin/env bash
# Protocol ll128 as committed (flag lanes poll, the next group asked of the L2): its GPU tests, then
# ring all_reduce 32 MiB to 512 MiB, 2 and 8 ranks, simple (1 MiB slots) and ll128 (the world's
# 256 KiB slots, and 1 MiB).
#   bash bench/results/ll128_2026-12-06/run3.sh OUT BENCH TEST
set -u
OUT=${1:?usage: run3.sh OUT BENCH TEST}
B=$2
T=$3
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
timeout 240 "$T" > "$OUT/test_ll128.txt" 2>&1
echo "test rc=$?" >> "$OUT/test_ll128.txt"
for r in 2 8; do
  for a in "-p simple -s 1M" "-p ll128" "-p ll128 -s 1M"; do
    echo "== $r ranks $a"
    timeout 60 "$B" -k all_reduce -a ring -r $r $a -b 32M -e 512M -f 4 -c 0 -R 3 --no-in-place | grep -E "^ +[0-9]"
  done
done > "$OUT/final.txt" 2>&1
tail -n 2 "$OUT/test_ll128.txt"
cat "$OUT/final.txt"
