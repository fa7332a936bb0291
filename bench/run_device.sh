#!/usr/bin/env bash
# One device session's run: GPU tests, the GPU demo, then a bench set, logs under OUT.
# The binaries are built beforehand on a machine without a GPU (scripts/build_gpu_here.sh) and
# carried in .deps/bin.   Usage: bench/run_device.sh OUT [tests|bench|all|figures|figures2|ctest|gpus]
set -u
out=$1
what=${2:-all}
bin=.deps/bin
mkdir -p "$out"
export CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$out/env.txt" 2>&1
git log -1 --format='commit %H %s' >> "$out/env.txt" 2>/dev/null
git status --short | head -20 >> "$out/env.txt" 2>/dev/null
# NCCL for --nccl (bench/nccl_peer.hpp): the GPU machines have it inside PyTorch's wheels.
if [[ -z ${COLLCOMM_NCCL_LIB:-} ]]; then
  COLLCOMM_NCCL_LIB=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null || true)
  [[ -f $COLLCOMM_NCCL_LIB ]] || COLLCOMM_NCCL_LIB=$(find / -xdev -name 'libnccl.so.2' 2>/dev/null | head -1)
  export COLLCOMM_NCCL_LIB
fi
echo "nccl: ${COLLCOMM_NCCL_LIB:-none found}" >> "$out/env.txt"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast (the bench forces it off too)
b() { echo "\$ collcomm_bench $*"; local t0=$SECONDS; timeout "${T:-60}" $bin/collcomm_bench "$@"; echo "# exit $? ($((SECONDS - t0)) s)"; }
if [[ $what == tests || $what == all ]]; then
  for t in test_gpu_collectives test_gpu_api test_gpu_ll test_gpu_pcie; do
    [[ -x $bin/$t ]] || continue
    t0=$SECONDS
    timeout 300 $bin/$t -d 2>&1 | tail -60
    echo "# $t exit ${PIPESTATUS[0]} ($((SECONDS - t0)) s)"
  done > "$out/tests.txt" 2>&1
  [[ -x $bin/example_02 ]] && { timeout 60 $bin/example_02 --ranks 8; echo "# exit $?"; } > "$out/demo.txt" 2>&1
fi
if [[ $what == bench || $what == all ]]; then
  {
    for a in one_shot two_shot; do
      b -k all_reduce -a $a -r 8 -b 8 -e 64K -f 4 -n 50 -w 10 -R 7 -c 1 -G
      b -k all_reduce -a $a -r 8 -b 8 -e 64K -f 4 -n 50 -w 10 -R 7 -c 1
    done
    b -k all_reduce -a ring -r 8 -b 8 -e 64K -f 8 -n 50 -w 10 -R 7 -c 1 -G
  } > "$out/bench_small.txt" 2>&1
  {
    for C in 8 16; do for s in 64K 256K 1M; do
      b -k all_reduce -a ring -r 8 -b 256M -e 256M -n 5 -w 2 -R 3 -c 0 -C $C -s $s
    done; done
    b -k reduce_scatter -a ring -r 8 -b 4M -e 64M -f 4 -n 10 -w 3 -R 3 -c 1
  } > "$out/bench_sweep.txt" 2>&1
fi
if [[ $what == figures ]]; then
  {
    for C in 1 2 4; do
      b -k all_reduce -a one_shot -r 8 -b 8 -e 64K -f 4 -n 50 -w 10 -R 7 -c 1 -G -C $C
    done
    b -k all_reduce -a one_shot -r 8 -b 8 -e 64K -f 4 -n 50 -w 10 -R 7 -c 1 -C 2
    b -k all_reduce -a two_shot -r 8 -b 8 -e 64K -f 4 -n 50 -w 10 -R 7 -c 1 -G -C 2
  } > "$out/fig_small.txt" 2>&1
  for r in 8 4 2; do
    for k in all_reduce reduce_scatter all_gather broadcast; do
      T=120 b -k $k -a ring -r $r -b 8 -e 1G -f 4 -n 20 -w 3 -R 3 -c 1 -C 16 -s 1M
    done > "$out/fig_ring_$r.txt" 2>&1
  done
fi
if [[ $what == figures2 ]]; then
  # Issue 3's figure set: small all_reduce (one_shot with one channel; ring and tree with ll),
  # then the ring sweeps with channels sized to the ranks (blocks = ranks x channels <= 128).
  {
    b -k all_reduce -a one_shot -r 8 -b 8 -e 64K -f 4 -n 50 -w 10 -R 7 -c 1 -G -C 1
    b -k all_reduce -a one_shot -r 8 -b 8 -e 64K -f 4 -n 50 -w 10 -R 7 -c 1 -C 1
    for a in ring tree; do
      b -k all_reduce -a $a -p ll -r 8 -b 8 -e 1M -f 4 -n 50 -w 10 -R 7 -c 1 -G
      b -k all_reduce -a $a -p ll -r 8 -b 8 -e 1M -f 4 -n 50 -w 10 -R 7 -c 1
    done
    b -k all_reduce -a tree -r 8 -b 8 -e 64K -f 8 -n 50 -w 10 -R 7 -c 1 -G
  } > "$out/fig_small.txt" 2>&1
  for rc in "8 16" "4 32" "2 64"; do
    set -- $rc
    for k in all_reduce reduce_scatter all_gather broadcast; do
      T=150 b -k $k -a ring -r $1 -b 16 -e 1G -f 4 -n 20 -w 3 -R 3 -c 1 -C $2 -s 1M
    done > "$out/fig_ring_$1.txt" 2>&1
  done
  T=100 b -k all_reduce -a ring -r 8 -b 64M -e 1G -f 4 -n 10 -w 2 -R 3 -c 0 -C 32 -s 1M > "$out/fig_ring_8_c32.txt" 2>&1
fi
if [[ $what == ctest ]]; then
  # Builds every GPU test (not the full matrix), the bench and the GPU demo THERE (16 cores), runs
  # `ctest -L gpu` (the multi-process ones, label mp, are left to bench/run_device_mp.sh, which
  # starts MPS), then the latency and bandwidth checks that follow kernel changes.
  t0=$SECONDS
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLLCOMM_BUILD_TESTS=ON -DCOLLCOMM_BUILD_EXAMPLES=ON \
    -DCOLLCOMM_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/prefix" > "$out/gpu_configure.txt" 2>&1 || tail -20 "$out/gpu_configure.txt"
  targets=$(ninja -C build-gpu -t targets all 2>/dev/null | grep -oE '^(gpu_[a-z0-9_]+|collcomm_bench[a-z_]*|collcomm_example_02[a-z_]*)' | grep -v '^gpu_matrix' | sort -u)
  echo "# targets: $targets" > "$out/gpu_build.txt"
  ninja -C build-gpu -j 16 -k 0 $targets >> "$out/gpu_build.txt" 2>&1
  echo "# build exit $? after $((SECONDS - t0)) s" >> "$out/gpu_build.txt"
  grep -E "error|FAILED" "$out/gpu_build.txt" | head -20; tail -1 "$out/gpu_build.txt"
  ( cd build-gpu && ctest -L gpu -LE "gpu_matrix|mp" --output-on-failure --timeout 300 ) > "$out/gpu_ctest.txt" 2>&1
  echo "# ctest exit $? at $((SECONDS - t0)) s" >> "$out/gpu_ctest.txt"
  grep -E "tests passed|Test +#|SKIPPED|exit" "$out/gpu_ctest.txt"
  [[ -x build-gpu/examples/collcomm_example_02_all_reduce_gpu ]] && { timeout 60 build-gpu/examples/collcomm_example_02_all_reduce_gpu --ranks 8; echo "# exit $?"; } > "$out/demo.txt" 2>&1
  bin=build-gpu/bench
  {
    b -k all_reduce -a one_shot -r 8 -b 8 -e 64K -f 4 -n 50 -w 10 -R 7 -c 1 -G -C 1
    b -k all_reduce -a one_shot -r 8 -b 8 -e 64K -f 4 -n 50 -w 10 -R 7 -c 1 -C 1
    b -k all_reduce -a two_shot -r 8 -b 8 -e 1M -f 4 -n 50 -w 10 -R 7 -c 1 -G -C 2
    for C in 1 4 16; do
      b -k all_reduce -a ring -p ll -r 8 -b 8 -e 1M -f 4 -n 50 -w 10 -R 7 -c 1 -G -C $C
      b -k all_reduce -a tree -p ll -r 8 -b 8 -e 1M -f 4 -n 50 -w 10 -R 7 -c 1 -G -C $C
    done
    b -k all_reduce -a tree -r 8 -b 8 -e 64K -f 8 -n 50 -w 10 -R 7 -c 1 -G
    b -k all_reduce -a ring -r 8 -b 8 -e 64K -f 8 -n 50 -w 10 -R 7 -c 1 -G
  } > "$out/fig_small.txt" 2>&1
  {
    for s in 256K 1M; do
      for k in all_reduce reduce_scatter broadcast; do
        T=100 b -k $k -a ring -r 8 -b 16M -e 1G -f 4 -n 10 -w 2 -R 3 -c 1 -C 16 -s $s
      done
    done
  } > "$out/fig_large.txt" 2>&1
fi
if [[ $what == gpus ]]; then
  # Issue 5: one rank per GPU on every GPU of the machine, collcomm beside NCCL (--nccl: NCCL's
  # same collective on the same ranks, buffers and streams, right after ours; NVLS forced off):
  # the five kinds, f32 and bf16, 8 B to MAXB (default 4 GiB), collcomm's ring and direct/pairwise
  # algorithms each named, small all_reduce with every algorithm stream-launched and from a graph.
  # Run on nvidia-h200-x2/x4/x8 (on one GPU it is a smoke test of this script and of --nccl).
  G=${GPUS:-$(nvidia-smi -L | wc -l)}
  MAXB=${MAXB:-4G}
  for t in f32 bf16; do
    for k in all_reduce reduce_scatter all_gather broadcast; do
      T=300 b -k $k -a ring -t $t -r $G -g 1 -b 8 -e $MAXB -f 4 -n 20 -w 3 -R 3 -c 1 -s 1M --nccl
    done
    T=300 b -k all_to_all -a pairwise -t $t -r $G -g 1 -b 8 -e $MAXB -f 4 -n 20 -w 3 -R 3 -c 1 -s 1M --nccl
    T=300 b -k all_to_all -a direct -t $t -r $G -g 1 -b 8 -e 256M -f 4 -n 20 -w 3 -R 3 -c 1
    T=300 b -k reduce_scatter -a direct -t $t -r $G -g 1 -b 8 -e 256M -f 4 -n 20 -w 3 -R 3 -c 1
    T=300 b -k all_gather -a direct -t $t -r $G -g 1 -b 8 -e 256M -f 4 -n 20 -w 3 -R 3 -c 1
  done > "$out/gpus_large_$G.txt" 2>&1
  {
    for a in one_shot two_shot tree ring; do
      b -k all_reduce -a $a -r $G -g 1 -b 8 -e 1M -f 4 -n 50 -w 10 -R 7 -c 1 -G -C 1
      b -k all_reduce -a $a -r $G -g 1 -b 8 -e 1M -f 4 -n 50 -w 10 -R 7 -c 1 -C 1 --nccl
    done
    b -k all_reduce -a tree -p ll -r $G -g 1 -b 8 -e 1M -f 4 -n 50 -w 10 -R 7 -c 1 -G -C 4
  } > "$out/gpus_small_$G.txt" 2>&1
fi
