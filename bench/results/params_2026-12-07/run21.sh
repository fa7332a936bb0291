#!/usr/bin/env bash
# Device call 21: automatic's sweep for processes again, now with one_shot on 1024 threads per block
# beside 512 (bench/tune.py MP_ARMS; collcomm_bench_mp -t 1024), 3 rounds among 2, 4 and 8 processes
# from a graph to 8 KiB, into OUT/mp_sweep: whether fewer channels of twice the threads take 8 KiB
# among 8 processes under 4.0 µs (512 threads: 4.57 on the world's channels, 4.72 on 8, 4.83 on 4).
# Then the chain and `mp: every*` cases. Regenerate the rules from it here:
#   python3 bench/tune.py gpu --bench none --out bench/results/copy_ll128_2026-12-06/table --reuse \
#     --tiebreak bench/results/copy_ll128_2026-12-06/graph_merged --keep 0.05 --processes OUT/mp_sweep
#   scripts/build_gpu_here.sh test_gpu_mp bench_mp   (here; carry .deps/bin, or a tar of it)
#   bash bench/results/params_2026-12-07/run21.sh OUT   (LIMIT: seconds, default 400; ROUNDS: the sweep's)
set -u
OUT=${1:?usage: run21.sh OUT}
LIMIT=${LIMIT:-400}
B=.deps/bin
mkdir -p "$OUT"
. bench/scripts/common.sh
record_env "$OUT"
export NCCL_NVLS_ENABLE=0
unset COLLCOMM_GPU_PROGRAMMATIC_LAUNCH
start_mps && echo "MPS daemon started" | summary
python3 bench/tune.py mp --bench "$B/collcomm_bench_mp" --ranks 2,4,8 --graph --max-bytes 8K --rounds "${ROUNDS:-3}" \
  --out "$OUT/mp_sweep" > "$OUT/mp_sweep.log" 2>&1
echo "[$SECONDS s] sweep exit $? $(tail -1 "$OUT/mp_sweep.log")" | summary
test_run test_gpu_mp tab_chain 'mp: calls that depend*' 60
test_run test_gpu_mp tab_every 'mp: every*' $((LIMIT - SECONDS - 5))
ls /dev/shm | grep collcomm && echo "LEFT IN /dev/shm" | summary
