// GPU executor: every schedule, ops and types, in and out of place, several ranks on one GPU,
// CUDA graph capture and replay (label gpu). Faults: test_gpu_fault.cu.
#include "gpu_harness.cuh"

#include <chrono>

using namespace collcomm;
using namespace collcomm_gpu_test;
using collcomm_test::for_each_schedule;

namespace {

void run_all_schedules(int n, int channels) {
  gpu::options o;
  o.channels = channels;
  o.slot_bytes = 4096;  // small slots: large counts take many slices
  gpu::world w(n, {}, o);
  for_each_schedule([&]<class K, class A>(std::type_identity<K>, std::type_identity<A>) {
    for (index_t count : {index_t{0}, index_t{1}, static_cast<index_t>(n + 1), index_t{1031}, index_t{40009}}) {
      for (int place = 0; place < (has_in_place<K> && supports_in_place<A> ? 2 : 1); ++place) {
        const int roots[] = {0, n - 1};
        for (int root : roots) {
          if (!K::rooted && root != 0) continue;
          case_config c{n, count, root, place == 1};
          INFO(std::string(K::name), " ", std::string(A::name), " n=", n, " count=", count, " root=", root, " in_place=", c.in_place, " channels=", channels, " seed=", fresh_seed());
          CHECK_EQ(run_case<K, A, float>(w, c, kind_op<K>{}), "");
        }
      }
    }
  });
}

}  // namespace

TEST_CASE("every schedule, f32, N = 1..5, 8, 16 ranks on one GPU") {
  for (int n : {1, 2, 3, 4, 5, 8, 16}) run_all_schedules(n, n <= 8 ? 2 : 1);
}

TEST_CASE("ring all_reduce: every type and op") {
  for (int n : {3, 4}) {
    gpu::world w(n);
    collcomm_test::for_each_type(collcomm_test::all_elements{}, [&]<class T>(std::type_identity<T>) {
      auto one = [&](auto op) {
        using Op = decltype(op);
        if constexpr (valid_composition<kind::all_reduce, algo::ring, transport::nvlink, Op, T>) {
          for (index_t count : {index_t{1}, index_t{777}, index_t{100000}}) {
            INFO(std::string(element_name<T>), " ", std::string(op_name<Op>()), " n=", n, " count=", count, " seed=", fresh_seed());
            CHECK_EQ((run_case<kind::all_reduce, algo::ring, T>(w, case_config{n, count, 0, false}, op)), "");
          }
        }
      };
      one(op::sum{});
      one(op::prod{});
      one(op::min{});
      one(op::max{});
      one(op::avg{});
      one(op::premul_sum<double>{2.0});
      one(op::bit_and{});
      one(op::bit_or{});
      one(op::bit_xor{});
    });
  }
}

TEST_CASE("calls capture into a CUDA graph and replay") {
  gpu::world w(4);
  for (index_t count : {index_t{5}, index_t{65536}}) {
    INFO("count=", count);
    CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w, case_config{4, count, 0, false}, op::sum{}, true)), "");
    CHECK_EQ((run_case<kind::all_gather, algo::ring, float>(w, case_config{4, count, 0, false}, op::none{}, true)), "");
    CHECK_EQ((run_case<kind::all_reduce, algo::one_shot, float>(w, case_config{4, count, 0, false}, op::sum{}, true)), "");
  }
}

// Calls queued back to back on every rank's stream with no host barrier between them: the
// pattern of a training step, which stalled when each rank launched alone.
TEST_CASE("20 calls queued per rank, back to back, every schedule, 8 ranks on one GPU") {
  gpu::options o;
  o.channels = 2;
  o.slot_bytes = 4096;
  o.timeout = std::chrono::milliseconds(2000);
  const int n = 8;
  gpu::world w(n, {}, o);
  for_each_schedule([&]<class K, class A>(std::type_identity<K>, std::type_identity<A>) {
    for (index_t count : {index_t{1031}, index_t{40009}}) {
      INFO(std::string(K::name), " ", std::string(A::name), " count=", count, " seed=", fresh_seed());
      CHECK_EQ(run_case<K, A, float>(w, case_config{n, count, 0, false}, kind_op<K>{}, false, 20), "");
    }
  });
}
