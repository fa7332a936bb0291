#!/usr/bin/env bash
# GPU buffers over net<socket> with pretend hosts, ranks as processes on one H200 under MPS:
# ranks of one pretend host reach each other through GPU memory (CUDA IPC), the others through
# each rank's proxy over loopback TCP. First the test cases (test_gpu_mp 'mp: net*' and
# 'mp fault: net*': every FIFO schedule all through the proxy, mixed, hierarchical mixed and all
# through the proxy, a killed rank either way), then collcomm_bench_mp -T net all_reduce, 4
# processes as 2 pretend hosts of 2: ring and hierarchical<ring, ring>, mixed and
# COLLCOMM_NET_SAME_HOST=network. test_gpu_mp and collcomm_bench_mp prebuilt in BIN.
#   bash bench/results/net_mixed_h200_2026-12-04/run.sh OUT
set -u
OUT=${1:?usage: run.sh OUT}
BIN=${BIN:-.deps/bin}
mkdir -p "$OUT"
nvidia-smi -L > "$OUT/env.txt" 2>&1; nproc >> "$OUT/env.txt"
export COLLCOMM_MP_EXE=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d
trap 'echo quit | nvidia-cuda-mps-control' EXIT
for pat in 'mp: net*' 'mp fault: net*'; do
  log=$(echo "$pat" | tr -c 'a-z0-9' '_').log
  start=$SECONDS
  timeout ${LIMIT:-200} "$BIN/test_gpu_mp" --only "$pat" > "$OUT/$log" 2>&1
  echo "$pat rc=$? $((SECONDS - start)) s $(grep -E '^\[doctest\] test cases' "$OUT/$log")" | tee -a "$OUT/summary.txt"
done
grep -hE "FAIL|ERROR|peers through|killed|gave up|timed out" "$OUT"/*.log | sort | uniq -c | sort -rn | head -30
b="$OUT/bench_n4.log"
for path in gpu_memory network; do
  for a in ring hierarchical; do
    echo "\$ COLLCOMM_NET_SAME_HOST=$path collcomm_bench_mp -T net -H 2 -n 4 -k all_reduce -a $a -b 8 -e 64M -f 8 -S 1M -C 4" >> "$b"
    COLLCOMM_NET_SAME_HOST=$path timeout 100 "$BIN/collcomm_bench_mp" -T net -H 2 -n 4 -k all_reduce -a $a \
      -b 8 -e 64M -f 8 -S 1M -C 4 >> "$b" 2>&1
    echo "# exit $?" >> "$b"
  done
done
grep -vE "^\s*$" "$b" | head -80
