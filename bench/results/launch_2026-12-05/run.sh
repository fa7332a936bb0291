#!/usr/bin/env bash
# The grouped launch's host cost by design (bench/probes/launch_calls.cu), the machine's CPU
# allowance, and the stream-launched bench in fresh processes with short and long rendezvous polls.
#   bash bench/results/launch_2026-12-05/run.sh OUT
# Binaries in .deps/bin (launch_calls: nvcc -O2 -arch=sm_90 bench/probes/launch_calls.cu).
set -u
OUT=${1:?usage: run.sh OUT}
. bench/scripts/common.sh
chmod +x "$BIN"/* 2>/dev/null
W=$OUT
record_env "$W"
{
  echo "nproc $(nproc)"; grep -E 'Cpus_allowed_list' /proc/self/status
  cat /sys/fs/cgroup/cpu.max 2>/dev/null; cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null
  lscpu | grep -E 'Model name|^CPU\(s\)|NUMA node'
} >> "$W/env.txt" 2>&1
for t in ${TESTS:-}; do
  t0=$SECONDS
  timeout 120 "$BIN/$t" > "$W/$t.log" 2>&1
  echo "$t rc=$? ($((SECONDS - t0)) s) $(grep -E '^\[doctest\] test cases' "$W/$t.log" | tr -s ' ')" | tee -a "$W/summary.txt"
done
for r in 8 4 2; do timeout 120 "$BIN/launch_calls" $r 4000; done 2>&1 | tee "$W/launch_calls.txt"
for spin in 200 5000 200 5000; do
  COLLCOMM_GPU_RENDEZVOUS_SPIN_US=$spin timeout 60 "$BIN/collcomm_bench" -k broadcast -a automatic -r 8 -b 8 -e 512K -f 8 -n 50 -w 5 -R 3 \
    -c 1 --no-in-place --json | sed "s/^{/{\"spin\":$spin,/"
done > "$W/spin.txt" 2>&1
grep -o '"spin":[0-9]*\|"bytes":[0-9]*\|"time_us":[0-9.]*\|"host_us":[0-9.]*' "$W/spin.txt" | paste - - - - | tee -a "$W/summary.txt"
