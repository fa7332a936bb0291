#!/usr/bin/env bash
# Device call 5: where a pushed call's kernel stalls, from Nsight Compute's warp-state sampling
# (one process, so no MPS and no peer: the prologue, the own line, the output), beside the meet
# kernel of mps_floor; and the same call's time without the profiler.
#   bench_mp_hoist3 (branch pushed-compact), mps_floor (run4's)
#   bash bench/results/params_2026-12-07/run5.sh OUT
# Binaries: .deps/bins4.tar.xz, unpacked into .deps/bin first.
set -u
OUT=${1:?usage: run5.sh OUT}
LIMIT=${LIMIT:-300}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "ncu: $NCU $($NCU --version 2>&1 | tail -1)" | summary
one_shot_latency bench_mp_hoist3 1 1 > "$OUT/latency_n1.txt" 2>&1
one_shot_latency bench_mp_hoist3 1 0 >> "$OUT/latency_n1.txt" 2>&1
grep -E "^ +(8|2048) " "$OUT/latency_n1.txt" | summary
SECTIONS="--section SourceCounters --section WarpStateStats --section LaunchStats --section SpeedOfLight --section SchedulerStats"
profile() {  # NAME KERNEL_REGEX SKIP COUNT COMMAND...
  local name=$1 re=$2 skip=$3 count=$4
  shift 4
  time_left 40 "profile $name" || return 1
  timeout 120 "$NCU" --clock-control none --cache-control none --target-processes all -k "regex:$re" \
    --launch-skip "$skip" --launch-count "$count" $SECTIONS -f -o "$OUT/$name" "$@" > "$OUT/$name.log" 2>&1
  echo "[$SECONDS s] profile $name rc=$? $(ls -la "$OUT/$name.ncu-rep" 2>/dev/null | awk '{print $5}') bytes" | summary
  "$NCU" --import "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/${name}_source.csv" 2> "$OUT/${name}_source.err"
  "$NCU" --import "$OUT/$name.ncu-rep" --page details > "$OUT/${name}_details.txt" 2>&1
  "$NCU" --import "$OUT/$name.ncu-rep" --page raw --csv > "$OUT/${name}_raw.csv" 2>&1
  grep -E "Duration|Elapsed Cycles|Warp Cycles Per Issued|Issued Warp" "$OUT/${name}_details.txt" | head -8 | summary
}
profile pushed collective_kernel 200 8 $B/bench_mp_hoist3 -n 1 -k all_reduce -a one_shot -C 1 -b 8 -e 8 -f 2 -G 0 -w 50 -i 400
profile pushed2k collective_kernel 200 4 $B/bench_mp_hoist3 -n 1 -k all_reduce -a one_shot -C 1 -b 2K -e 2K -f 2 -G 0 -w 50 -i 400
profile meet meet_kernel 20 4 $B/mps_floor 1 meet 50 1 stream
profile empty empty_kernel 20 4 $B/mps_floor 1 empty 50 1 stream
ls -la "$OUT" | summary
