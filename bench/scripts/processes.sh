#!/usr/bin/env bash
# Ranks as processes on one GPU: the multi-process GPU tests and collcomm_bench_mp's figures, for
# transport::nvlink over CUDA IPC and transport::pcie staged through POSIX shared memory +
# cudaHostRegister, 2/4/8 processes on the one GPU, logs under OUT.
#   bash bench/scripts/processes.sh OUT [tests|bench|all|pcie_tests|pcie_bench|pcie|small|latency|large] [max_bytes]
# Binaries from BIN (default .deps/bin): test_gpu_mp and collcomm_bench_mp, built on a machine
# without a GPU by scripts/build_gpu_here.sh test_gpu_mp bench_mp (carry .deps/bin/test_gpu_mp and
# .deps/bin/collcomm_bench_mp).
# tests: the nvlink test cases (no MPS, then under MPS: every kind/algorithm, graphs, window,
#   split/dup, 1000 communicators; faults). bench: ring of 4 kinds 8 B..max_bytes (default 1G),
#   one_shot, and ring/one_shot with 1 channel. all: tests and bench.
# pcie_tests: the pcie test cases (no MPS, matrix, leak, SIGKILL); pcie_bench: the staged figures
#   (ring, 1 MiB..256 MiB, PCIe traffic as a fraction of the pinned copy bandwidth measured in the
#   same run; the figures of bench/RESULTS.md's processes-over-pcie table); pcie: both.
# small: all_reduce 8 B..64 KiB, ring and one_shot, stream-launched and replayed from a CUDA graph,
#   1/8/32 channels (the small-message figures of RESULTS.md's processes table; OLD=path: another
#   build of collcomm_bench_mp, without -G, timed the same way first, for a before/after).
# latency: all_reduce 8 B..8 KiB among 4 and 8 processes, one_shot (1 channel and the default) and
#   two_shot (1 channel), stream-launched and replayed from a CUDA graph.
# large: ring 64 MiB..max_bytes with 1 MiB slots and processes x channels = 128 (the bandwidth
#   figures of RESULTS.md's processes table).
# The no-MPS check runs first (before the daemon starts); the rest under MPS, which this script
# starts as a user-level daemon and stops at the end (it changes no GPU setting).
set -u
OUT=${1:?usage: processes.sh OUT [tests|bench|all|pcie_tests|pcie_bench|pcie|small|latency|large] [max_bytes]}
WHAT=${2:-all}
MAX=${3:-1G}
. "$(dirname "$0")/common.sh"
record_env "$OUT"
df -h /dev/shm >> "$OUT/env.txt" 2>&1  # the pcie connections live there
NVLINK_CASES='mp: every*,mp: a direct*,mp: split*,mp: 1000*'
# mp_bench LOG LIMIT LABEL ARGS...: one collcomm_bench_mp run appended to OUT/LOG, its exit status to the summary.
mp_bench() {
  local log=$1 limit=$2 label=$3
  shift 3
  timeout "$limit" "${MP_BIN:-$BIN/collcomm_bench_mp}" "$@" >> "$OUT/$log" 2>&1
  echo "$label rc=$?" | summary
}
case $WHAT in tests|all) NOMPS='no mps: 2*' ;; pcie_tests|pcie) NOMPS='no mps: pcie*' ;; *) NOMPS= ;; esac
if [ -n "$NOMPS" ]; then
  unset CUDA_MPS_PIPE_DIRECTORY
  echo "== no MPS: test_gpu_mp --no-mps '$NOMPS'" | summary
  ( time timeout 150 "$BIN/test_gpu_mp" --no-mps "$NOMPS" ) > "$OUT/test_no_mps.log" 2>&1
  rc=$?
  echo "rc=$rc $(doctest_counts "$OUT/test_no_mps.log")" | summary
  # A first run of a path (pcie) that fails without MPS stops here: under MPS a fatal fault of
  # one client can take down the server and every later test of this command.
  if [ $rc != 0 ] && [ "$WHAT" = pcie_tests -o "$WHAT" = pcie ]; then
    echo "no-MPS run failed: MPS runs skipped" | summary
    exit 1
  fi
fi
start_mps && echo "MPS daemon started" | summary  # (its logs stay under /tmp: not returned)
mp_tests() {  # $1: log name, $2: doctest pattern, $3: time limit (s)
  echo "== MPS: test_gpu_mp --only '$2'" | summary
  ( time timeout $3 "$BIN/test_gpu_mp" --only "$2" ) > "$OUT/$1.log" 2>&1
  echo "rc=$? $(doctest_counts "$OUT/$1.log")" | summary
}
if [ "$WHAT" = tests -o "$WHAT" = all ]; then
  mp_tests test_mp "$NVLINK_CASES" 150
  mp_tests test_mp--fault 'mp fault: a*' 150
  ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
fi
if [ "$WHAT" = pcie_tests -o "$WHAT" = pcie ]; then
  mp_tests test_mp_pcie 'mp: pcie*' 320
  mp_tests test_mp_pcie_fault 'mp fault: pcie*' 90
  ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
fi
if [ "$WHAT" = pcie_bench -o "$WHAT" = pcie ]; then
  # 8 channels of 8 x 256 KiB slots: n^2 x 16 MiB of /dev/shm (8 processes: 1 GiB); smaller
  # slots where /dev/shm has less room (the slot size is in each log's header).
  avail=$(df --output=avail -B1 /dev/shm | tail -1)
  for n in 2 4 8; do
    S=262144
    while [ $S -gt 16384 ] && [ $((n * n * 8 * 8 * S + (1 << 20))) -gt "$avail" ]; do S=$((S / 2)); done
    for k in all_reduce reduce_scatter all_gather broadcast; do
      mp_bench bench_pcie_n$n.log 150 "bench pcie n=$n $k ring" -T pcie -n $n -k $k -a ring -b 1M -e 256M -f 4 \
        -C 8 -S $S
    done
  done
fi
if [ "$WHAT" = bench -o "$WHAT" = all ]; then
  for n in 2 4 8; do
    for k in all_reduce reduce_scatter all_gather broadcast; do
      mp_bench bench_n$n.log 300 "bench n=$n $k ring" -n $n -k $k -a ring -b 8 -e $MAX -f 4
    done
    mp_bench bench_n$n.log 120 "bench n=$n all_reduce one_shot" -n $n -k all_reduce -a one_shot -b 8 -e 4M -f 4
    # Small messages with one channel: across processes each block costs start-up time (see RESULTS).
    for a in ring one_shot; do
      mp_bench bench_n$n.log 60 "bench n=$n all_reduce $a 1 channel" -n $n -k all_reduce -a $a -b 8 -e 64K -f 8 -C 1
    done
  done
fi
if [ "$WHAT" = small ]; then
  # OLD=path: another build of collcomm_bench_mp (without -G) timed the same way, for a before/after.
  if [ -n "${OLD:-}" ]; then
    for c in 1 8 32; do
      MP_BIN=$OLD mp_bench small_old_n2.log 60 "small OLD n=2 ring C=$c" -n 2 -k all_reduce -a ring -b 8 -e 64K -f 8 \
        -C $c -w 20 -i 100
    done
  fi
  for n in 2 8; do
    for c in 1 8 32; do
      [ $n = 8 -a $c = 32 ] && continue
      for a in ring one_shot; do
        for g in 0 1; do
          mp_bench small_n$n.log 60 "small n=$n $a C=$c graph=$g" -n $n -k all_reduce -a $a -b 8 -e 64K -f 8 -C $c \
            -G $g -w 20 -i 100
        done
      done
    done
  done
fi
if [ "$WHAT" = latency ]; then
  for n in ${LAT_N:-4 8}; do
    for a in ${LAT_A:-"one_shot -C 1" "one_shot" "two_shot -C 1"}; do
      for g in 0 1; do
        mp_bench latency_n$n.log 60 "latency n=$n $a graph=$g" -n $n -k all_reduce -a $a -b 8 -e 8K -f 4 -G $g \
          -w 50 -i 200
      done
    done
  done
fi
if [ "$WHAT" = large ]; then
  for n in 2 4 8; do
    for k in all_reduce reduce_scatter all_gather broadcast; do
      mp_bench large_n$n.log 120 "large n=$n $k ring" -n $n -k $k -a ring -b 64M -e $MAX -f 4 -S 1M -C $((128 / n))
    done
  done
fi
