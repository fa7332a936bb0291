// GPU executor, simple protocol, the reducing kinds without a root (all_reduce, reduce_scatter):
// every schedule, f32 sum, N = 1..5, 8, 16 ranks on one GPU, in and out of place; 20 calls queued
// per rank; and CUDA graph capture and replay (label gpu). The other kinds: test_gpu_sched_moving.cu
// and test_gpu_sched_rooted.cu.
#include "schedule_cases.cuh"

using namespace collcomm;
using namespace collcomm_gpu_test;

TEST_CASE("every schedule of all_reduce and reduce_scatter, f32, N = 1..5, 8, 16 ranks on one GPU") {
  every_schedule_f32<schedule_groups::reducing>();
}

TEST_CASE(
    "20 calls queued per rank, back to back, every schedule of all_reduce and reduce_scatter, 8 ranks on one GPU") {
  twenty_calls_queued<schedule_groups::reducing>();
}

TEST_CASE("calls capture into a CUDA graph and replay") {
  gpu::world w(4);
  for (index_t count : {index_t{5}, index_t{65536}}) {
    INFO("count=", count, " seed=", fresh_seed());
    CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w, case_config{4, count, 0, false}, op::sum{}, true)), "");
    CHECK_EQ((run_case<kind::all_gather, algo::ring, float>(w, case_config{4, count, 0, false}, op::none{}, true)), "");
    CHECK_EQ((run_case<kind::all_reduce, algo::one_shot, float>(w, case_config{4, count, 0, false}, op::sum{}, true)),
             "");
  }
}
