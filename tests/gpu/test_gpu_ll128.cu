// GPU executor, ll128 protocol (kernels/ll128_fifo.cuh): ring and tree all_reduce on several element
// types, large calls queued back to back (a line read before all of it arrived would show as a
// wrong element), graph capture, protocols alternating on one world, and slot sizes the protocol
// cannot use (label gpu). The sweeps of every schedule with 128-byte lines:
// test_gpu_ll128_reducing.cu, test_gpu_ll128_moving.cu, test_gpu_ll128_rooted.cu.
#include "gpu_harness.cuh"

#include <chrono>
#include <cstdint>

using namespace collcomm;
using namespace collcomm_gpu_test;

namespace {

using ll128 = tuning<protocol::ll128>;
using ll = tuning<protocol::ll>;

// gpu::launch's error for a world whose slots ll128 cannot use, or "" if it launched.
std::string refusal(std::size_t slot_bytes) {
  gpu::options o;
  o.slot_bytes = slot_bytes;
  gpu::world w(1, {}, o);
  float* d = nullptr;
  REQUIRE_EQ(cudaMalloc(&d, 64 * sizeof(float)), cudaSuccess);
  coll_args a{};
  a.rank = 0;
  a.nranks = 1;
  a.count = 64;
  std::string what;
  try {
    gpu::launch<kind::all_reduce, algo::ring, ll128>(w, 0, a, d, d, op::sum{}, nullptr);
  } catch (const error& e) {
    CHECK_EQ(e.code(), errc::invalid_argument);
    what = e.what();
  }
  REQUIRE_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(d);
  return what;
}

}  // namespace

TEST_CASE("ll128: ring and tree all_reduce, f16 bf16 i8 f32 f64 u64") {
  for (int n : {2, 3, 4}) {
    gpu::options o;
    o.slot_bytes = 4096;
    gpu::world w(n, {}, o);
    auto one = [&]<class T>(std::type_identity<T>, auto op) {
      for (index_t count : {index_t{1}, index_t{29}, index_t{777}, index_t{100000}}) {
        INFO(std::string(element_name<T>), " ", std::string(op_name<decltype(op)>()), " n=", n, " count=", count,
             " seed=", fresh_seed());
        CHECK_EQ((run_case<kind::all_reduce, algo::ring, T, ll128>(w, case_config{n, count, 0, false}, op, false, 5)),
                 "");
        CHECK_EQ((run_case<kind::all_reduce, algo::tree, T, ll128>(w, case_config{n, count, 0, false}, op, false, 3)),
                 "");
      }
    };
    one(std::type_identity<__half>{}, op::sum{});
    one(std::type_identity<__nv_bfloat16>{}, op::sum{});
    one(std::type_identity<std::int8_t>{}, op::max{});
    one(std::type_identity<float>{}, op::sum{});
    one(std::type_identity<double>{}, op::sum{});
    one(std::type_identity<std::uint64_t>{}, op::sum{});
  }
}

// The world's default slots and channels, 8 ranks, calls of 4 Mi elements queued back to back: every
// line of every slot is written and read many times while other ranks' lines are in flight.
TEST_CASE("ll128: 8 ranks, large calls queued back to back, every element checked") {
  gpu::world w(8);
  for (index_t count : {index_t{1} << 22, (index_t{1} << 22) + 13}) {
    INFO("count=", count, " seed=", fresh_seed());
    CHECK_EQ((run_case<kind::all_reduce, algo::ring, float, ll128>(w, case_config{8, count, 0, false}, op::sum{},
                                                                    false, 10)),
             "");
    CHECK_EQ((run_case<kind::all_gather, algo::ring, std::int32_t, ll128>(w, case_config{8, count / 8, 0, false},
                                                                           op::none{}, false, 10)),
             "");
  }
}

TEST_CASE("ll128: calls capture into a CUDA graph and replay") {
  gpu::world w(4);
  for (index_t count : {index_t{5}, index_t{65536}}) {
    INFO("count=", count);
    CHECK_EQ(
        (run_case<kind::all_reduce, algo::ring, float, ll128>(w, case_config{4, count, 0, false}, op::sum{}, true)),
        "");
    CHECK_EQ(
        (run_case<kind::all_reduce, algo::tree, float, ll128>(w, case_config{4, count, 0, false}, op::sum{}, true)),
        "");
  }
}

// simple, ll and ll128 calls in turn on one world's connections (their counts are shared; an ll128
// message leaves its slot unmarked for ll, which then rewrites the slot whole), through gpu::launch
// and through the host API's spelling all_reduce<algo::ring, tuning<protocol::ll128>>(comm, ...).
TEST_CASE("ll128: simple, ll and ll128 calls alternating on one world") {
  gpu::options o;
  o.slot_bytes = 4096;
  o.channels = 2;
  gpu::world w(4, {}, o);
  for (int i = 0; i < 3; ++i)
    for (index_t count : {index_t{3}, index_t{5000}}) {
      INFO("round ", i, " count=", count, " seed=", fresh_seed());
      const case_config c{4, count, 0, false};
      CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w, c, op::sum{}, false, 3)), "");
      CHECK_EQ((run_case<kind::all_reduce, algo::ring, float, ll128>(w, c, op::sum{}, false, 3)), "");
      CHECK_EQ((run_case<kind::all_reduce, algo::ring, float, ll>(w, c, op::sum{}, false, 3)), "");
      CHECK_EQ((run_api_case<kind::all_reduce, algo::ring, float, op::sum, transport::nvlink, ll128>(w, c, op::sum{},
                                                                                                      3)),
               "");
      CHECK_EQ((run_case<kind::all_gather, algo::ring, float, ll128>(w, c, op::none{}, false, 3)), "");
      CHECK_EQ((run_case<kind::all_gather, algo::ring, float, ll>(w, c, op::none{}, false, 3)), "");
    }
}

TEST_CASE("ll128: slots too small or not a multiple of its 128-byte lines are refused, naming slot_bytes") {
  const std::string small = refusal(128);
  CHECK(small.find("slot_bytes") != std::string::npos);
  CHECK(small.find("256") != std::string::npos);
  const std::string odd = refusal(4000);
  CHECK(odd.find("slot_bytes") != std::string::npos);
  CHECK(odd.find("multiple of 128") != std::string::npos);
  CHECK_EQ(refusal(4096), "");
}
