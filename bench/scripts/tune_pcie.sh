#!/usr/bin/env bash
# algo::automatic's table for transport::pcie_staged, measured: bench/tune.py times every candidate
# arm of each kind (its PCIE_ARMS) with collcomm_bench_pcie (ranks as threads on GPU 0, connections
# in pinned host memory, f32 sum, out of place, every size checked) from 8 B to MAX, keeps the
# fastest per size and writes the table.
#   bash bench/scripts/tune_pcie.sh OUT   -> OUT/env.txt, OUT/tune.log, OUT/sweep.json, OUT/raw/,
#                                            OUT/pcie_staged.hpp (copy it to include/collcomm/tables/
#                                            and name it in collcomm/tables.hpp)
#   VERIFY=1 bash bench/scripts/tune_pcie.sh OUT   (a bench built with that table) -> OUT/verify.md
# RANKS (default 2,4,8), KINDS (default every kind with arms: all_reduce,reduce_scatter,all_gather,
# broadcast,reduce), MAX (default 128M), ROUNDS (default 1), RESUME=1 (reuse OUT/raw's logs, run
# the rest), BIN: where collcomm_bench_pcie is (common.sh; build it with
# `scripts/build_gpu_here.sh bench_pcie` and carry .deps/bin).
# Time: 114 runs (38 arms x 3 rank counts), each ~1.5 s of start-up (CUDA, the pinned copy ceiling)
# plus ~1 s per GiB of the world's pinned slots (2 GiB among 8 ranks with the default options) and
# up to ~3 s of calls to 128M (8-rank all_reduce: ~45 ms a call at 128 MiB): about 7 minutes on an
# H100, near one device command's 10. Split it across two commands, RANKS=2,4 into OUT_A and
# RANKS=8 into OUT_B, then, anywhere,
#   python3 bench/tune.py pcie --bench collcomm_bench_pcie --ranks 2,4,8 --merge OUT_A,OUT_B --out OUT.
# A bench run is stopped after TIMEOUT seconds (default 90); its log is kept as raw/*.failed.
set -u
out=${1:?usage: tune_pcie.sh OUT}
. "$(dirname "$0")/common.sh"
record_env "$out"
args=(pcie --bench "$BIN/collcomm_bench_pcie" --ranks "${RANKS:-2,4,8}" --max-bytes "${MAX:-128M}"
      --rounds "${ROUNDS:-1}" --timeout "${TIMEOUT:-90}" --out "$out" --header "$out/pcie_staged.hpp")
[[ -n ${KINDS:-} ]] && args+=(--kinds "$KINDS")
[[ -n ${VERIFY:-} ]] && args+=(--verify)
[[ -n ${RESUME:-} ]] && args+=(--resume)
t0=$SECONDS
python3 "$(dirname "$0")/../tune.py" "${args[@]}" > "$out/tune${VERIFY:+_verify}.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
tail -3 "$out/tune${VERIFY:+_verify}.log"
