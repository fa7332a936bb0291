// The GPU tests' main: without a CUDA device they exit with 77, which ctest reports as skipped
// (SKIP_RETURN_CODE), and say so on a line of their own — never as passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  // Ranks of one process spin-wait for each other's kernels; lazy kernel loading can wait for
  // running kernels, so load every kernel up front (see gpu::preload).
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("SKIPPED: no CUDA device here; GPU tests were built, not run\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
