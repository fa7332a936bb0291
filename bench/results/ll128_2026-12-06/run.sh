#!/usr/bin/env bash
# Protocol ll128 against simple: ring all_reduce, ranks as threads on one GPU, f32 sum, out of
# place, stream-launched. Each BENCH (a collcomm_bench, e.g. narrow builds of kernel variants) is
# timed from 2 MiB to 512 MiB with ll128, the first also with simple; then Nsight Compute profiles
# one kernel at 32 MiB (the third launch: two warm-up calls first) of each, 8 ranks.
#   bash bench/results/ll128_2026-12-06/run.sh OUT BENCH...
set -u
OUT=${1:?usage: run.sh OUT BENCH...}
shift
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt"
first=1
for b in "$@"; do
  v=$(basename "$b")
  protos="ll128"
  [ $first = 1 ] && protos="simple ll128"
  for p in $protos; do
    for r in 2 8; do
      timeout 100 "$b" -k all_reduce -a ring -p "$p" -r "$r" -b 2M -e 512M -f 4 -c 0 -R 3 --no-in-place \
        > "$OUT/time_${v}_${p}_r$r.txt" 2>&1
    done
  done
  first=0
done
NCU=(ncu --clock-control none -k regex:collective_kernel --launch-skip 2 --launch-count 1
     --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
     --section SchedulerStats --section Occupancy --section LaunchStats --section SourceCounters)
first=1
for b in "$@"; do
  v=$(basename "$b")
  protos="ll128"
  [ $first = 1 ] && protos="simple ll128"
  for p in $protos; do
    timeout 120 "${NCU[@]}" "$b" -k all_reduce -a ring -p "$p" -r 8 -b 32M -e 32M -n 1 -w 2 -R 1 -c 0 \
      --no-in-place > "$OUT/ncu_${v}_${p}_r8.txt" 2>&1
  done
  first=0
done
cd "$OUT" && tar czf ll128.tgz time_* ncu_* && rm -f time_* ncu_*
