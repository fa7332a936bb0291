#!/usr/bin/env bash
# algo::automatic's rules for processes on one GPU over transport::nvlink, measured: bench/tune.py
# mp times small one_shot all_reduce (f32 sum, out of place, every size checked) among RANKS
# processes under MPS, from a CUDA graph, on 1, 2, 4, 8 and the world's channels, 8 B to MAX, and
# keeps the fastest per size (OUT/sweep.json). Its rules go first in the GPU table:
#   bash bench/scripts/tune_mp.sh OUT      -> OUT/env.txt, OUT/tune.log, OUT/sweep.json, OUT/raw/
#   python3 bench/tune.py gpu --bench ... --out GPU_OUT --processes OUT   (writes tables/nvlink.hpp)
# RANKS (default 2,4,8), MAX (default 8K: the largest pushed call, transport::pushes), ROUNDS
# (default 1), BIN: where collcomm_bench_mp is (common.sh).
set -u
out=${1:?usage: tune_mp.sh OUT}
. "$(dirname "$0")/common.sh"
record_env "$out"
export NCCL_NVLS_ENABLE=0
start_mps
python3 "$(dirname "$0")/../tune.py" mp --bench "$BIN/collcomm_bench_mp" --ranks "${RANKS:-2,4,8}" --graph \
  --max-bytes "${MAX:-8K}" --rounds "${ROUNDS:-1}" --out "$out" > "$out/tune.log" 2>&1
echo "exit $?"
tail -3 "$out/tune.log"
