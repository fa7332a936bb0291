#!/usr/bin/env bash
# Device call 16: every in-process GPU test (the 28 of CI's build of 8d8b8ce and test_gpu_one_shot
# of 95ce6f8: .deps/bins13.tar.xz, .deps/bins16.tar.xz), then algo::automatic's one_shot arms for
# all_reduce re-swept (ranks as threads, 8 B to 2 MiB: 1, 4, the world's and 32 channels), stream-
# launched and from a CUDA graph (the tie-break), with collcomm_bench narrowed to one_shot f32
# all_reduce of fe01877 (in bins16). The table is chosen here from these sweeps merged into the
# last full one (bench/results/copy_ll128_2026-12-06/table and graph_merged).
#   bash bench/results/params_2026-12-07/run16.sh OUT
set -u
OUT=${1:?usage: run16.sh OUT}
LIMIT=${LIMIT:-570}
mkdir -p "$OUT" .deps/bin13
tar xJf .deps/bins13.tar.xz -C .deps/bin13 && tar xJf .deps/bins16.tar.xz -C .deps/bin13
. bench/scripts/common.sh
export NCCL_NVLS_ENABLE=0
BIN=.deps/bin13 bash bench/scripts/gpu_tests.sh "$OUT/tests" > "$OUT/tests.log" 2>&1
echo "[$SECONDS s] tests: $(grep -c 'exit 0' "$OUT/tests/tests.txt") binaries exit 0, $(grep '# test_gpu' "$OUT/tests/tests.txt" | grep -vc 'exit 0') not" | summary
sweep() {  # sweep DIR [--graph] [--rounds R]
  local dir=$1
  shift
  time_left 60 "sweep $dir" || return 1
  PYTHONUNBUFFERED=1 timeout $((LIMIT - SECONDS - 10)) python3 bench/tune.py gpu --bench .deps/bin13/collcomm_bench \
    --ranks 2,4,8 --kinds all_reduce --only-arms '^one_shot/' --max-bytes 2M --out "$OUT/$dir" "$@" > "$OUT/$dir.log" 2>&1
  echo "[$SECONDS s] sweep $dir rc=$?" | summary
}
sweep graph --graph --rounds 3
sweep stream
