// GPU executor, simple protocol, the kinds that move data without reducing and without a root
// (all_gather, all_to_all, send_recv): every schedule, f32, N = 1..5, 8, 16 ranks on one GPU, in
// and out of place; 20 calls queued per rank (label gpu).
#include "schedule_cases.cuh"

using namespace collcomm_gpu_test;

TEST_CASE("every schedule of all_gather, all_to_all and send_recv, f32, N = 1..5, 8, 16 ranks on one GPU") {
  every_schedule_f32<schedule_groups::moving>();
}

TEST_CASE(
    "20 calls queued per rank, back to back, every schedule of all_gather, all_to_all and send_recv, 8 ranks on one "
    "GPU") {
  twenty_calls_queued<schedule_groups::moving>();
}
