#!/bin/bash
# On the H200 machine: the multi-process GPU tests and the multi-process bench figures
# (transport::nvlink over CUDA IPC, and transport::pcie staged through POSIX shared memory +
# cudaHostRegister; 2/4/8 processes on the one GPU). Uses binaries prebuilt by
# scripts/build_gpu_here.sh test_gpu_mp bench_mp (carry .deps/bin/test_gpu_mp and
# .deps/bin/collcomm_bench_mp). Writes logs under OUT.
#   bench/run_device_mp.sh OUT [tests|bench|all|pcie_tests|pcie_bench|pcie|small|large] [max_bytes]
# tests/bench/all: transport::nvlink (tests exclude the pcie cases); pcie_tests: the pcie test
# cases (no MPS, matrix, leak, SIGKILL); pcie_bench: the staged figures (ring, 1 MiB..256 MiB,
# PCIe traffic as a fraction of the pinned copy bandwidth measured in the same run); pcie: both.
# small: all_reduce 8 B..64 KiB, ring and one_shot, stream-launched and replayed from a CUDA graph,
# 1/8/32 channels (the per-block cost across processes); large: ring 64 MiB..1 GiB with 1 MiB slots
# and processes x channels = 128 (the thread world's best setting).
# The no-MPS check runs first (before the daemon starts); the rest under MPS, which this script
# starts as a user-level daemon and stops at the end (it changes no GPU setting).
OUT=${1:?usage: run_device_mp.sh OUT [tests|bench|all] [max_bytes]}
WHAT=${2:-all}
MAX=${3:-1G}
BIN=.deps/bin
NVLINK_CASES='mp: every*,mp: a direct*,mp: split*,mp: 1000*'
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/device.txt" 2>&1
git log -1 --format='%H %s' >> "$OUT/device.txt" 2>/dev/null
df -h /dev/shm >> "$OUT/device.txt" 2>&1  # the pcie connections live there
export PATH=$PATH:/usr/local/nvidia/bin
export CUDA_MODULE_LOADING=EAGER
case $WHAT in tests|all) NOMPS='no mps: 2*' ;; pcie_tests|pcie) NOMPS='no mps: pcie*' ;; *) NOMPS= ;; esac
if [ -n "$NOMPS" ]; then
  unset CUDA_MPS_PIPE_DIRECTORY
  echo "== no MPS: test_gpu_mp --no-mps '$NOMPS'" | tee -a "$OUT/summary.txt"
  ( time timeout 150 $BIN/test_gpu_mp --no-mps "$NOMPS" ) > "$OUT/test_no_mps.log" 2>&1
  rc=$?
  echo "rc=$rc $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/test_no_mps.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
  # A first run of a path (pcie) that fails without MPS stops here: under MPS a fatal fault of
  # one client can take down the server and every later test of this command.
  if [ $rc != 0 ] && [ "$WHAT" = pcie_tests -o "$WHAT" = pcie ]; then echo "no-MPS run failed: MPS runs skipped" | tee -a "$OUT/summary.txt"; exit 1; fi
fi
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "MPS daemon started" | tee -a "$OUT/summary.txt"
trap 'echo quit | nvidia-cuda-mps-control' EXIT  # (the run tool returns at most 8 files: no MPS logs)
mp_tests() {  # $1: log name, $2: doctest pattern, $3: time limit (s)
  echo "== MPS: test_gpu_mp --only '$2'" | tee -a "$OUT/summary.txt"
  ( time timeout $3 $BIN/test_gpu_mp --only "$2" ) > "$OUT/$1.log" 2>&1
  echo "rc=$? $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/$1.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
}
if [ "$WHAT" = tests -o "$WHAT" = all ]; then
  mp_tests test_mp "$NVLINK_CASES" 150
  mp_tests test_mp--fault 'mp fault: a*' 150
  ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | tee -a "$OUT/summary.txt"
fi
if [ "$WHAT" = pcie_tests -o "$WHAT" = pcie ]; then
  mp_tests test_mp_pcie 'mp: pcie*' 320
  mp_tests test_mp_pcie_fault 'mp fault: pcie*' 90
  ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | tee -a "$OUT/summary.txt"
fi
if [ "$WHAT" = pcie_bench -o "$WHAT" = pcie ]; then
  # 8 channels of 8 x 256 KiB slots: n^2 x 16 MiB of /dev/shm (8 processes: 1 GiB); smaller
  # slots where /dev/shm has less room (the slot size is in each log's header).
  avail=$(df --output=avail -B1 /dev/shm | tail -1)
  for n in 2 4 8; do
    S=262144
    while [ $S -gt 16384 ] && [ $((n * n * 8 * 8 * S + (1 << 20))) -gt "$avail" ]; do S=$((S / 2)); done
    for k in all_reduce reduce_scatter all_gather broadcast; do
      timeout 150 $BIN/collcomm_bench_mp -T pcie -n $n -k $k -a ring -b 1M -e 256M -f 4 -C 8 -S $S >> "$OUT/bench_pcie_n${n}.log" 2>&1
      echo "bench pcie n=$n $k ring rc=$?" | tee -a "$OUT/summary.txt"
    done
  done
fi
if [ "$WHAT" = bench -o "$WHAT" = all ]; then
  for n in 2 4 8; do
    for k in all_reduce reduce_scatter all_gather broadcast; do
      timeout 300 $BIN/collcomm_bench_mp -n $n -k $k -a ring -b 8 -e $MAX -f 4 >> "$OUT/bench_n${n}.log" 2>&1
      echo "bench n=$n $k ring rc=$?" | tee -a "$OUT/summary.txt"
    done
    timeout 120 $BIN/collcomm_bench_mp -n $n -k all_reduce -a one_shot -b 8 -e 4M -f 4 >> "$OUT/bench_n${n}.log" 2>&1
    echo "bench n=$n all_reduce one_shot rc=$?" | tee -a "$OUT/summary.txt"
    # Small messages with one channel: across processes each block costs start-up time (see RESULTS).
    for a in ring one_shot; do
      timeout 60 $BIN/collcomm_bench_mp -n $n -k all_reduce -a $a -b 8 -e 64K -f 8 -C 1 >> "$OUT/bench_n${n}.log" 2>&1
      echo "bench n=$n all_reduce $a 1 channel rc=$?" | tee -a "$OUT/summary.txt"
    done
  done
fi
if [ "$WHAT" = small ]; then
  # OLD=path: another build of collcomm_bench_mp (without -G) timed the same way, for a before/after.
  if [ -n "${OLD:-}" ]; then
    for c in 1 8 32; do
      timeout 60 $OLD -n 2 -k all_reduce -a ring -b 8 -e 64K -f 8 -C $c -w 20 -i 100 >> "$OUT/small_old_n2.log" 2>&1
      echo "small OLD n=2 ring C=$c rc=$?" | tee -a "$OUT/summary.txt"
    done
  fi
  for n in 2 8; do
    for c in 1 8 32; do
      [ $n = 8 -a $c = 32 ] && continue
      for a in ring one_shot; do
        for g in 0 1; do
          timeout 60 $BIN/collcomm_bench_mp -n $n -k all_reduce -a $a -b 8 -e 64K -f 8 -C $c -G $g -w 20 -i 100 >> "$OUT/small_n${n}.log" 2>&1
          echo "small n=$n $a C=$c graph=$g rc=$?" | tee -a "$OUT/summary.txt"
        done
      done
    done
  done
fi
if [ "$WHAT" = large ]; then
  for n in 2 4 8; do
    for k in all_reduce reduce_scatter all_gather broadcast; do
      timeout 120 $BIN/collcomm_bench_mp -n $n -k $k -a ring -b 64M -e $MAX -f 4 -S 1M -C $((128 / n)) >> "$OUT/large_n${n}.log" 2>&1
      echo "large n=$n $k ring rc=$?" | tee -a "$OUT/summary.txt"
    done
  done
fi
