#!/usr/bin/env bash
# algo::automatic's table for transport::nvlink, measured: bench/tune.py times every candidate arm
# of each kind with collcomm_bench (ranks as threads on GPU 0, f32 sum, out of place, stream-
# launched) from 8 B to MAX, keeps the fastest per size and writes the table.
#   bash bench/scripts/tune_gpu.sh OUT   -> OUT/env.txt, OUT/tune.log, OUT/sweep.json, OUT/raw/,
#                                           OUT/nvlink.hpp (copy it to include/collcomm/tables/)
#   VERIFY=1 bash bench/scripts/tune_gpu.sh OUT   (a bench built with that table) -> OUT/verify.md
# RANKS (default 2,4,8), KINDS (default every kind with arms: all_reduce,reduce_scatter,all_gather,
# broadcast,reduce), MAX (default 1G), ROUNDS (default 1), BIN: where collcomm_bench is (common.sh).
set -u
out=${1:?usage: tune_gpu.sh OUT}
. "$(dirname "$0")/common.sh"
record_env "$out"
args=(gpu --bench "$BIN/collcomm_bench" --ranks "${RANKS:-2,4,8}" --max-bytes "${MAX:-1G}" --rounds "${ROUNDS:-1}"
      --out "$out" --header "$out/nvlink.hpp")
[[ -n ${KINDS:-} ]] && args+=(--kinds "$KINDS")
[[ -n ${VERIFY:-} ]] && args+=(--verify)
python3 "$(dirname "$0")/../tune.py" "${args[@]}" > "$out/tune${VERIFY:+_verify}.log" 2>&1
echo "exit $?"
tail -3 "$out/tune${VERIFY:+_verify}.log"
