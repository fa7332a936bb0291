#!/usr/bin/env bash
# Compile time and binary size of collcomm compositions (DESIGN: beat NCCL on both). Compiles
# bench/compile_cost/one_composition.cu (one composition) and examples/02_all_reduce_gpu.cu (four)
# with nvcc -O3 -arch=sm_90, one at a time; prints wall seconds and the executable's bytes
# beside libnccl.so.2's size, where found. Runs anywhere nvcc is (no GPU needed).
#   bash bench/scripts/compile_cost.sh
set -eu
cd "$(dirname "$0")/../.."
F="-std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr -Iinclude -Itests -I/usr/local/cuda/include/cccl"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(nvcc --version | tail -1); $(nproc) cores; load $(cut -d' ' -f1 /proc/loadavg)"
for src in bench/compile_cost/one_composition.cu examples/02_all_reduce_gpu.cu; do
  t0=$(date +%s.%N)
  nvcc $F "$src" -o "$tmp/a.out"
  t1=$(date +%s.%N)
  printf "%-45s %6.1f s  %9d bytes\n" "$src" "$(echo "$t1 - $t0" | bc)" "$(stat -c %s "$tmp/a.out")"
done
for lib in /usr/local/cuda/lib64/libnccl.so.2 ${COLLCOMM_NCCL_LIB:-}; do
  [[ -f $lib ]] && printf "%-45s %18d bytes\n" "$(readlink -f "$lib")" "$(stat -L -c %s "$lib")"
done
exit 0
