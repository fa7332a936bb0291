// GPU executor: every schedule, ops and types, in and out of place, several ranks on one GPU,
// CUDA graph capture and replay, and a rank that never joins (label gpu).
#include "gpu_harness.cuh"

#include <barrier>
#include <chrono>
#include <thread>

using namespace collcomm;
using namespace collcomm_gpu_test;
using collcomm_test::for_each_schedule;

namespace {

template <class K>
using kind_op = std::conditional_t<K::reduces, op::sum, op::none>;

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

TEST_CASE("a rank that never joins: the others report it within the timeout [fault]") {
  gpu::options o;
  o.timeout = std::chrono::milliseconds(300);
  {
    gpu::world w(2, {}, o);
    float *d_in = nullptr, *d_out = nullptr;
    REQUIRE_EQ(cudaMalloc(&d_in, 1024 * sizeof(float)), cudaSuccess);
    REQUIRE_EQ(cudaMalloc(&d_out, 1024 * sizeof(float)), cudaSuccess);
    coll_args a{};
    a.rank = 0;
    a.nranks = 2;
    a.count = 1024;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      gpu::launch<kind::all_reduce, algo::ring>(w, 0, a, d_in, d_out, op::sum{}, nullptr);  // rank 1 never calls
      FAIL("no error");
    } catch (const error& e) {
      CHECK_EQ(e.code(), errc::timeout);
      CHECK_EQ(e.rank(), 0);
      const std::string m = e.what();
      INFO(m);
      CHECK(m.find("rank(s) 1") != std::string::npos);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(secs < 3.0);
    // The world is failed: a later call is refused at once.
    try {
      gpu::launch<kind::all_reduce, algo::ring>(w, 0, a, d_in, d_out, op::sum{}, nullptr);
      FAIL("no error");
    } catch (const error& e) {
      CHECK_EQ(e.code(), errc::aborted);
    }
    REQUIRE_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaFree(d_in);
    cudaFree(d_out);
  }
  // The process stays usable: a fresh world runs a collective correctly.
  gpu::world w2(2);
  CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w2, case_config{2, 1000, 0, false}, op::sum{})), "");
}

// Inside the kernel: ranks that disagree on the count. The ring's messages then differ in size
// or never come; every rank's call ends within the timeout and check() names the stall.
TEST_CASE("ranks that disagree on the count: an error on every rank within the timeout, no hang [fault]") {
  gpu::options o;
  o.timeout = std::chrono::milliseconds(300);
  o.channels = 1;
  o.slot_bytes = 4096;
  for (int n : {2, 4}) {
    gpu::world w(n, {}, o);
    std::vector<std::string> errors(n);
    std::vector<double> secs(n);
    std::vector<std::thread> threads;
    std::barrier sync_point(n);
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        const index_t count = r == 1 ? 3000 : 5000;
        float *d_in = nullptr, *d_out = nullptr;
        cudaMalloc(&d_in, 5000 * sizeof(float));
        cudaMalloc(&d_out, 5000 * sizeof(float));
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        coll_args a{};
        a.rank = r;
        a.nranks = n;
        a.count = count;
        gpu::preload<kind::all_reduce, algo::ring, float, op::sum>();
        cudaDeviceSynchronize();
        sync_point.arrive_and_wait();
        const auto t0 = std::chrono::steady_clock::now();
        try {
          gpu::launch<kind::all_reduce, algo::ring>(w, r, a, d_in, d_out, op::sum{}, s);
          cudaStreamSynchronize(s);
          secs[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          gpu::check_stall(w, r);
        } catch (const error& e) {
          errors[r] = e.what();
        }
        sync_point.arrive_and_wait();
        cudaFree(d_in);
        cudaFree(d_out);
        cudaStreamDestroy(s);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
      INFO("n=", n, " rank ", r, ": ", errors[r]);
      CHECK(!errors[r].empty());
      CHECK(errors[r].find("timed out waiting for") != std::string::npos);
      CHECK(secs[r] < 3.0);
    }
  }
  gpu::world w2(3);
  CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w2, case_config{3, 1000, 0, false}, op::sum{})), "");
}
