#!/usr/bin/env bash
# transport::pcie staged through pinned host memory, ranks as threads of one process on one GPU:
# the staged-path GPU tests, then collcomm_bench_pcie among 2, 4 and 8 ranks (ring, f32, the four
# kinds, 1 MiB to 256 MiB, with the pinned copy bandwidth measured in the same run: the figures of
# bench/RESULTS.md's pcie-threads table), logs under OUT. Staged pcie across processes:
# processes.sh pcie.
#   bash bench/scripts/pcie_staged.sh OUT         -> OUT/env.txt, OUT/tests.txt, OUT/bench.txt
# Binaries from BIN (default .deps/bin), built beforehand on a machine without a GPU:
#   scripts/build_gpu_here.sh test_gpu_pcie bench_pcie
#   carry: [".deps/bin/test_gpu_pcie", ".deps/bin/collcomm_bench_pcie"]
# Time limits (TT for the tests, TB per bench run, in seconds) keep a slow or stalled run from
# eating the device session; the bench prints each row as soon as it is measured.
set -u
out=${1:?usage: pcie_staged.sh OUT}
. "$(dirname "$0")/common.sh"
record_env "$out"
if [[ -x $BIN/test_gpu_pcie ]]; then
  t0=$SECONDS
  timeout "${TT:-80}" "$BIN/test_gpu_pcie" -d > "$out/tests.txt" 2>&1
  echo "# test_gpu_pcie exit $? ($((SECONDS - t0)) s)" >> "$out/tests.txt"
  tail -n 25 "$out/tests.txt"
fi
if [[ -x $BIN/collcomm_bench_pcie ]]; then
  for r in 2 4 8; do
    echo "\$ collcomm_bench_pcie -r $r -b 1M -e 256M -f 4 -n 6 -w 2 -R 3"
    t0=$SECONDS
    timeout "${TB:-25}" "$BIN/collcomm_bench_pcie" -r $r -b 1M -e 256M -f 4 -n 6 -w 2 -R 3
    echo "# exit $? ($((SECONDS - t0)) s)"
  done > "$out/bench.txt" 2>&1
  cat "$out/bench.txt"
fi
