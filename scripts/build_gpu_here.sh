#!/bin/bash
# Builds the GPU tests, the bench and the GPU demo with nvcc on a machine WITHOUT a GPU, into
# .deps/bin, so that a device session spends its time running, not compiling: pass
# `carry: [".deps/bin"]` to the device tool and run the scripts of bench/scripts/ there (each
# says which binaries it needs). The bench programs are CMake targets too (COLLCOMM_BUILD_BENCH).
# doctest is taken from .deps/doctest (copy /usr/include/doctest there: the device has none).
# A name test_gpu_X builds tests/gpu/test_gpu_X.cu; gpu_tests builds every tests/gpu/test_*.cu (one
# translation unit at a time, each a few minutes at most on 2 cores; bench/scripts/gpu_tests.sh
# runs every .deps/bin/test_gpu_* it finds).
#   scripts/build_gpu_here.sh gpu_tests bench example test_gpu_mp bench_mp
#   scripts/build_gpu_here.sh test_gpu_sched_reducing test_gpu_fault   (some of them)
#   scripts/build_gpu_here.sh mps_floor   (bench/probes/mps_floor.cu: the floor of processes on one GPU)
#   scripts/build_gpu_here.sh test_gpu_pcie test_gpu_pcie_reducing test_gpu_pcie_moving test_gpu_pcie_rooted bench_pcie
#                                                            (transport::pcie; bench/scripts/pcie_staged.sh runs them,
#                                                             bench/scripts/tune_pcie.sh the bench's sweep)
set -e
cd "$(dirname "$0")/.."
[ -d .deps/doctest ] || { mkdir -p .deps && cp -r /usr/include/doctest .deps/; }
F="-std=c++20 -O3 -arch=sm_90 --expt-relaxed-constexpr -Iinclude -Itests -I/usr/local/cuda/include/cccl -I.deps"
mkdir -p .deps/bin .deps/obj
[ -f .deps/obj/gpu_main.o -a .deps/obj/gpu_main.o -nt tests/gpu/gpu_main.cpp ] || g++ -std=c++20 -O2 -I/usr/local/cuda/include -I.deps -c tests/gpu/gpu_main.cpp -o .deps/obj/gpu_main.o
names=()
for t in "$@"; do
  if [[ $t == gpu_tests ]]; then
    for f in tests/gpu/test_*.cu; do names+=("$(basename "$f" .cu)"); done
  else
    names+=("$t")
  fi
done
for t in "${names[@]}"; do
  case $t in
    bench) nvcc $F -Ibench bench/collcomm_bench.cu -o .deps/bin/collcomm_bench ;;
    test_gpu_mp) nvcc $F tests/gpu/mp/test_gpu_mp.cu -o .deps/bin/test_gpu_mp ;;
    bench_mp) nvcc $F -Ibench bench/collcomm_bench_mp.cu -o .deps/bin/collcomm_bench_mp ;;
    example) nvcc $F examples/02_all_reduce_gpu.cu -o .deps/bin/example_02 ;;
    bench_pcie) nvcc $F -Ibench bench/collcomm_bench_pcie.cu -o .deps/bin/collcomm_bench_pcie ;;
    mps_floor) nvcc $F bench/probes/mps_floor.cu -o .deps/bin/mps_floor ;;
    *) nvcc $F -c tests/gpu/$t.cu -o .deps/obj/$t.o && nvcc -arch=sm_90 .deps/obj/$t.o .deps/obj/gpu_main.o -o .deps/bin/$t ;;
  esac
  echo "built $t"
done
