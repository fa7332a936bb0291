// GPU executor, simple protocol, the kinds with a root (broadcast, reduce, gather, scatter): every
// schedule, f32, N = 1..5, 8, 16 ranks on one GPU, in and out of place, roots 0 and N-1; 20 calls
// queued per rank (label gpu).
#include "schedule_cases.cuh"

using namespace collcomm_gpu_test;

TEST_CASE("every schedule of broadcast, reduce, gather and scatter, f32, N = 1..5, 8, 16 ranks on one GPU") {
  every_schedule_f32<schedule_groups::rooted>();
}

TEST_CASE(
    "20 calls queued per rank, back to back, every schedule of broadcast, reduce, gather and scatter, 8 ranks on one "
    "GPU") {
  twenty_calls_queued<schedule_groups::rooted>();
}
