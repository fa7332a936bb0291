// GPU executor, ll protocol (kernels/ll_fifo.cuh): ring all_reduce on several element types,
// graph capture, protocols alternating on one world, message counters across the 2^32 wrap of the
// flags, and a slot too small for the protocol (label gpu). The sweeps of every schedule with LL
// lines: test_gpu_ll_reducing.cu, test_gpu_ll_moving.cu, test_gpu_ll_rooted.cu; ranks that
// disagree on the count under ll: test_gpu_fault.cu.
#include "gpu_harness.cuh"

#include <chrono>
#include <cstdint>

using namespace collcomm;
using namespace collcomm_gpu_test;

namespace {

using ll = tuning<protocol::ll>;

// Sets every message count of the world (each rank's send and receive counts, every connection's
// head and tail) to `m`, as if m messages had moved on every connection. No kernel may run.
void set_message_counts(gpu::world& w, std::uint64_t m) {
  const transport::handle_fields h = w.fields(0);
  const std::size_t nconn = static_cast<std::size_t>(h.nchannels) * h.nranks * h.nranks;
  std::vector<transport::fifo_view> table(nconn);
  REQUIRE_EQ(cudaMemcpy(table.data(), h.fifos, sizeof(transport::fifo_view) * nconn, cudaMemcpyDeviceToHost),
             cudaSuccess);
  for (const auto& c : table) {
    REQUIRE_EQ(cudaMemcpy(c.tail, &m, sizeof m, cudaMemcpyHostToDevice), cudaSuccess);
    REQUIRE_EQ(cudaMemcpy(c.head, &m, sizeof m, cudaMemcpyHostToDevice), cudaSuccess);
  }
  const std::vector<std::uint64_t> steps(static_cast<std::size_t>(h.nranks) * h.nchannels * h.nranks * 2, m);
  REQUIRE_EQ(cudaMemcpy(h.steps, steps.data(), sizeof(std::uint64_t) * steps.size(), cudaMemcpyHostToDevice),
             cudaSuccess);
  REQUIRE_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace

TEST_CASE("ll: ring all_reduce, f16 bf16 i8 f64 u64") {
  for (int n : {3, 4}) {
    gpu::options o;
    o.slot_bytes = 4096;
    gpu::world w(n, {}, o);
    auto one = [&]<class T>(std::type_identity<T>, auto op) {
      for (index_t count : {index_t{1}, index_t{777}, index_t{100000}}) {
        INFO(std::string(element_name<T>), " ", std::string(op_name<decltype(op)>()), " n=", n, " count=", count,
             " seed=", fresh_seed());
        CHECK_EQ((run_case<kind::all_reduce, algo::ring, T, ll>(w, case_config{n, count, 0, false}, op, false, 5)), "");
      }
    };
    one(std::type_identity<__half>{}, op::sum{});
    one(std::type_identity<__nv_bfloat16>{}, op::sum{});
    one(std::type_identity<std::int8_t>{}, op::max{});
    one(std::type_identity<double>{}, op::sum{});
    one(std::type_identity<std::uint64_t>{}, op::sum{});
  }
}

TEST_CASE("ll: calls capture into a CUDA graph and replay") {
  gpu::world w(4);
  for (index_t count : {index_t{5}, index_t{65536}}) {
    INFO("count=", count);
    CHECK_EQ((run_case<kind::all_reduce, algo::ring, float, ll>(w, case_config{4, count, 0, false}, op::sum{}, true)),
             "");
    CHECK_EQ((run_case<kind::all_reduce, algo::tree, float, ll>(w, case_config{4, count, 0, false}, op::sum{}, true)),
             "");
  }
}

// The host API's spelling, all_reduce<algo::ring, tuning<protocol::ll>>(comm, ...), is the same
// protocol; and simple and ll calls alternate on one world (the connections' counts stay shared).
TEST_CASE("ll: tuning<protocol::ll> through the host API, and simple and ll calls alternating on one world") {
  gpu::options o;
  o.slot_bytes = 4096;
  o.channels = 2;
  gpu::world w(4, {}, o);
  for (int i = 0; i < 3; ++i)
    for (index_t count : {index_t{3}, index_t{5000}}) {
      INFO("round ", i, " count=", count, " seed=", fresh_seed());
      CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w, case_config{4, count, 0, false}, op::sum{}, false, 3)),
               "");
      CHECK_EQ((run_api_case<kind::all_reduce, algo::ring, float, op::sum, transport::nvlink, ll>(
                   w, case_config{4, count, 0, false}, op::sum{}, 3)),
               "");
      CHECK_EQ(
          (run_case<kind::all_gather, algo::ring, float, ll>(w, case_config{4, count, 0, false}, op::none{}, false, 3)),
          "");
    }
}

// The flag is the message count mod 2^32: start just below 2^32 (also an epoch boundary, where every
// slot is rewritten whole) so that the calls cross the wrap.
TEST_CASE("ll: message counts across the 2^32 wrap of the flags") {
  gpu::options o;
  o.slot_bytes = 4096;
  o.channels = 1;
  for (int n : {2, 4}) {
    gpu::world w(n, {}, o);
    set_message_counts(w, (std::uint64_t{1} << 32) - 5);
    for (index_t count : {index_t{7}, index_t{3000}, index_t{40009}}) {
      INFO("n=", n, " count=", count, " seed=", fresh_seed());
      CHECK_EQ(
          (run_case<kind::all_reduce, algo::ring, float, ll>(w, case_config{n, count, 0, false}, op::sum{}, false, 20)),
          "");
      CHECK_EQ(
          (run_case<kind::all_reduce, algo::tree, float, ll>(w, case_config{n, count, 0, false}, op::sum{}, false, 20)),
          "");
      CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w, case_config{n, count, 0, false}, op::sum{}, false, 2)),
               "");
    }
  }
}

TEST_CASE("ll: a slot too small for a header and a data line is refused") {
  gpu::options o;
  o.slot_bytes = 16;
  gpu::world w(1, {}, o);
  float* d = nullptr;
  REQUIRE_EQ(cudaMalloc(&d, 16 * sizeof(float)), cudaSuccess);
  coll_args a{};
  a.rank = 0;
  a.nranks = 1;
  a.count = 4;
  try {
    gpu::launch<kind::all_reduce, algo::ring, ll>(w, 0, a, d, d, op::sum{}, nullptr);
    FAIL("no error");
  } catch (const error& e) {
    CHECK_EQ(e.code(), errc::invalid_argument);
    CHECK(std::string(e.what()).find("slot_bytes") != std::string::npos);
  }
  REQUIRE_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(d);
}
