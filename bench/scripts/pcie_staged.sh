#!/usr/bin/env bash
# transport::pcie staged through pinned host memory, ranks as threads of one process on one GPU:
# the staged-path GPU tests, then collcomm_bench_pcie among 2, 4 and 8 ranks (ring, f32, every
# kind it has: bench/RESULTS.md's pcie-threads tables have four, reduce came later; 1 MiB to 256
# MiB, with the pinned copy bandwidth measured in the same run), logs under OUT. Staged pcie across
# processes: processes.sh pcie. The other arms over pcie_staged, for its table: tune_pcie.sh.
#   bash bench/scripts/pcie_staged.sh OUT         -> OUT/env.txt, OUT/tests.txt, OUT/bench.txt
# Binaries from BIN (default .deps/bin), built beforehand on a machine without a GPU (the staged
# tests are test_gpu_pcie and test_gpu_pcie_* for every FIFO schedule; test_gpu_fault runs its
# pcie cases only):
#   scripts/build_gpu_here.sh test_gpu_pcie test_gpu_pcie_reducing test_gpu_pcie_moving test_gpu_pcie_rooted test_gpu_fault bench_pcie
#   carry: [".deps/bin"]
# Time limits (TT for the tests, TB per bench run, in seconds) keep a slow or stalled run from
# eating the device session; the bench prints each row as soon as it is measured.
set -u
out=${1:?usage: pcie_staged.sh OUT}
. "$(dirname "$0")/common.sh"
record_env "$out"
for t in "$BIN"/test_gpu_pcie "$BIN"/test_gpu_pcie_* "$BIN"/test_gpu_fault; do
  [[ -x $t ]] || continue
  filter=()
  [[ ${t##*/} == test_gpu_fault ]] && filter=(-tc="*pcie*")
  t0=$SECONDS
  timeout "${TT:-80}" "$t" -d "${filter[@]}" >> "$out/tests.txt" 2>&1
  echo "# ${t##*/} exit $? ($((SECONDS - t0)) s)" >> "$out/tests.txt"
done
[[ -f $out/tests.txt ]] && grep -E "test cases|exit" "$out/tests.txt"
if [[ -x $BIN/collcomm_bench_pcie ]]; then
  for r in 2 4 8; do
    echo "\$ collcomm_bench_pcie -r $r -b 1M -e 256M -f 4 -n 6 -w 2 -R 3"
    t0=$SECONDS
    timeout "${TB:-25}" "$BIN/collcomm_bench_pcie" -r $r -b 1M -e 256M -f 4 -n 6 -w 2 -R 3
    echo "# exit $? ($((SECONDS - t0)) s)"
  done > "$out/bench.txt" 2>&1
  cat "$out/bench.txt"
fi
