// GPU executor, ll128 protocol (kernels/ll128_fifo.cuh): every schedule of all_gather, all_to_all and send_recv
// with 128-byte lines, f32, N = 1, 2, 3, 4, 8 ranks on one GPU, 20 calls queued per rank (label gpu;
// schedule_cases.cuh). The ll128 protocol's other tests: test_gpu_ll128.cu.
#include "schedule_cases.cuh"

using namespace collcomm_gpu_test;

TEST_CASE(
    "ll128: every schedule of all_gather, all_to_all and send_recv, f32, N = 1, 2, 3, 4, 8 ranks on one GPU, 20 calls queued per "
    "rank") {
  every_schedule_ll<schedule_groups::moving, protocol::ll128>();
}
