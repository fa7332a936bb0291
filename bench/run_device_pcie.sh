#!/usr/bin/env bash
# transport::pcie on the GPU machine: the staged-path GPU tests, then collcomm_bench_pcie among 2,
# 4 and 8 ranks on the one GPU (with the pinned copy bandwidth measured in the same run), logs
# under OUT. Build beforehand on a machine without a GPU and carry the binaries:
#   scripts/build_gpu_here.sh test_gpu_pcie bench_pcie
#   run: bench/run_device_pcie.sh $OUT   carry: [".deps/bin/test_gpu_pcie", ".deps/bin/collcomm_bench_pcie"]
# Time limits (TT for the tests, TB per bench run, in seconds) keep a slow or stalled run from
# eating the device session; the bench prints each row as soon as it is measured.
set -u
out=$1
bin=.deps/bin
mkdir -p "$out"
export CUDA_MODULE_LOADING=EAGER
{
  nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current --format=csv
  git log -1 --format='commit %H %s' 2>/dev/null
  git status --short 2>/dev/null | head -20
} > "$out/env.txt" 2>&1
if [[ -x $bin/test_gpu_pcie ]]; then
  t0=$SECONDS
  timeout "${TT:-80}" $bin/test_gpu_pcie -d > "$out/tests.txt" 2>&1
  echo "# test_gpu_pcie exit $? ($((SECONDS - t0)) s)" >> "$out/tests.txt"
  tail -n 25 "$out/tests.txt"
fi
if [[ -x $bin/collcomm_bench_pcie ]]; then
  for r in 2 4 8; do
    echo "\$ collcomm_bench_pcie -r $r -b 1M -e 256M -f 4 -n 6 -w 2 -R 3"
    t0=$SECONDS
    timeout "${TB:-25}" $bin/collcomm_bench_pcie -r $r -b 1M -e 256M -f 4 -n 6 -w 2 -R 3
    echo "# exit $? ($((SECONDS - t0)) s)"
  done > "$out/bench.txt" 2>&1
  cat "$out/bench.txt"
fi
