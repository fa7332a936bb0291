// Connections staged through pinned host memory (gpu::placement::host; label gpu): every FIFO
// schedule of all_reduce and reduce_scatter, f32, N = 1, 2, 3, 4, 8 ranks on one GPU, in and out of
// place, roots 0 and N-1; and 20 calls queued per rank on 8 ranks (schedule_cases.cuh). The staged
// path's other tests: test_gpu_pcie.cu.
#include "schedule_cases.cuh"

using namespace collcomm_gpu_test;

TEST_CASE(
    "staged pcie: every FIFO schedule of all_reduce and reduce_scatter, f32, N = 1, 2, 3, 4, 8 ranks on one GPU") {
  every_fifo_schedule_staged<schedule_groups::reducing>();
}

TEST_CASE("staged pcie: 20 calls queued per rank, every FIFO schedule of all_reduce and reduce_scatter, 8 ranks") {
  twenty_calls_queued_staged<schedule_groups::reducing>();
}
