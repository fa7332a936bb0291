// The host API over the GPU executor: communicator<transport::nvlink>, a stream per call, argument
// checks before anything is enqueued, and a user epilogue (label gpu). A failed world refusing
// later calls: test_gpu_fault.cu.
#include "gpu_harness.cuh"

#include <collcomm/algo/tree.hpp>
#include <collcomm/algo/two_shot.hpp>

#include <algorithm>
#include <barrier>
#include <iterator>
#include <set>
#include <string>

using namespace collcomm;
using namespace collcomm_gpu_test;

namespace {

// Each rank: its own thread and stream; buffers set up before anyone launches (see gpu_harness).
template <class F>
void on_ranks(gpu::world& w, F f) {
  const int n = w.size();
  std::barrier sync_point(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        cudaSetDevice(w.device_of(r));
        communicator<transport::nvlink> comm(w, r);
        f(comm, sync_point);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors) CHECK_EQ(e, "");
}

}  // namespace

TEST_CASE("all_reduce through the API on streams: automatic, tree, two_shot, in place") {
  const int n = 4;
  const index_t count = 50001;
  gpu::world w(n);
  std::mt19937_64 g(fresh_seed());
  std::vector<std::vector<float>> x(n, std::vector<float>(count));
  for (auto& v : x)
    for (auto& e : v) e = static_cast<float>(static_cast<int>(g() % 201) - 100);
  std::vector<float> want(count, 0.f);
  for (int r = 0; r < n; ++r)
    for (index_t i = 0; i < count; ++i) want[i] += x[r][i];

  on_ranks(w, [&](communicator<transport::nvlink>& comm, std::barrier<>& sync_point) {
    const int r = comm.rank();
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *buf = nullptr, *out = nullptr;
    cudaMalloc(&buf, count * sizeof(float));
    cudaMalloc(&out, count * sizeof(float));
    // The calls below, loaded and checked without launching (nothing is enqueued on s).
    gpu::preload(comm, [&] {
      all_reduce(comm, buf, out, count, op::sum{}, s);
      all_reduce<algo::tree>(comm, out, out, count, op::sum{}, s);
      all_reduce<algo::two_shot>(comm, out, out, count, op::sum{}, s);
    });
    cudaMemcpy(buf, x[r].data(), count * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(out, 0xFF, count * sizeof(float));
    sync_point.arrive_and_wait();
    all_reduce(comm, buf, out, count, op::sum{}, s);                  // automatic, out of place
    all_reduce<algo::tree>(comm, out, out, count, op::sum{}, s);      // tree, in place: n * sum
    all_reduce<algo::two_shot>(comm, out, out, count, op::sum{}, s);  // two_shot, in place: n * n * sum
    cudaStreamSynchronize(s);
    sync_point.arrive_and_wait();
    comm.check();
    std::vector<float> got(count);
    cudaMemcpy(got.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost);
    for (index_t i = 0; i < count; ++i)
      if (got[i] != want[i] * n * n) {
        FAIL_CHECK("rank " << r << " element " << i << ": got " << got[i] << " expected " << want[i] * n * n);
        break;
      }
    cudaFree(buf);
    cudaFree(out);
    cudaStreamDestroy(s);
  });
}

// algo::automatic on the GPU: every arm of the nvlink table that one GPU reaches, and a user's
// table that sends counts to ring/ll, tree/ll and ring with more channels and larger slots than
// the world has (capped), each call's output poisoned first and every element checked; the arm
// each call takes is the one chosen_arm names (the kernels all preloaded by one call).
TEST_CASE("automatic: the nvlink table's arms and a user's table, out of place and in place") {
  using user_table = rule_table<rule<kind::all_reduce, when{.max_bytes = 64}, algo::ring, tuning<protocol::ll, 1>>,
                                rule<kind::all_reduce, when{.max_bytes = 4096}, algo::tree, tuning<protocol::ll>>,
                                rule<kind::all_reduce, when{}, algo::ring, tuning<protocol::simple, 64, 1 << 22>>>;
  const int n = 4;
  const std::vector<index_t> counts = {1, 2, 16, 1000, 4096, 65537, 1 << 20};
  gpu::world w(n);
  std::mt19937_64 g(fresh_seed());
  std::vector<std::vector<std::vector<float>>> x(counts.size(), std::vector<std::vector<float>>(n));
  for (std::size_t c = 0; c < counts.size(); ++c)
    for (auto& v : x[c]) {
      v.resize(counts[c]);
      for (auto& e : v) e = static_cast<float>(static_cast<int>(g() % 201) - 100);
    }
  on_ranks(w, [&](communicator<transport::nvlink>& comm, std::barrier<>& sync_point) {
    const int r = comm.rank();
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    const index_t most = counts.back();
    float *in = nullptr, *out = nullptr;
    cudaMalloc(&in, most * sizeof(float));
    cudaMalloc(&out, most * sizeof(float));
    gpu::preload(comm, [&] {
      all_reduce(comm, in, out, 0, op::sum{}, s);
      all_reduce<algo::automatic<user_table>>(comm, in, out, 0, op::sum{}, s);
    });
    std::set<std::string> arms, shipped_arms, user_arms;
    for (int table = 0; table < 2; ++table)
      for (int place = 0; place < 2; ++place)
        for (std::size_t c = 0; c < counts.size(); ++c) {
          const index_t count = counts[c];
          CAPTURE(table);
          CAPTURE(place);
          CAPTURE(count);
          float* src = place ? out : in;
          cudaMemset(out, 0xFF, most * sizeof(float));  // NaN
          cudaMemcpy(src, x[c][r].data(), count * sizeof(float), cudaMemcpyHostToDevice);
          cudaDeviceSynchronize();
          sync_point.arrive_and_wait();
          if (table == 0) {
            all_reduce(comm, src, out, count, op::sum{}, s);
            const std::string arm =
                chosen_arm<kind::all_reduce, void, transport::nvlink, op::sum, float>(comm.facts(), count, place);
            arms.insert(arm);
            shipped_arms.insert(arm);
          } else {
            all_reduce<algo::automatic<user_table>>(comm, src, out, count, op::sum{}, s);
            const std::string arm =
                chosen_arm<kind::all_reduce, user_table, transport::nvlink, op::sum, float>(comm.facts(), count, place);
            arms.insert(arm);
            user_arms.insert(arm);
          }
          cudaStreamSynchronize(s);
          sync_point.arrive_and_wait();
          comm.check();
          std::vector<float> got(count);
          cudaMemcpy(got.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost);
          for (index_t i = 0; i < count; ++i) {
            float want = 0;
            for (int q = 0; q < n; ++q) want += x[c][q][i];
            if (got[i] != want) {
              FAIL_CHECK("rank " << r << " element " << i << ": got " << got[i] << " expected " << want);
              break;
            }
          }
          sync_point.arrive_and_wait();
        }
    if (r == 0) {
      std::string all;
      for (const std::string& a : arms) all += a + "; ";
      MESSAGE("arms taken: " << all);
      // The counts reach at least two arms of the shipped table (its rules for 4 ranks on one GPU
      // change a small call's arm from a large one's) and the user table's three.
      CHECK(shipped_arms.size() >= 2);
      CHECK(user_arms.size() == 3);
    }
    cudaFree(in);
    cudaFree(out);
    cudaStreamDestroy(s);
  });
}

TEST_CASE("bad input on the GPU path: an error naming the argument and the rank, nothing enqueued") {
  gpu::world w(2);
  communicator<transport::nvlink> comm(w, 1);
  float* out = nullptr;
  cudaMalloc(&out, 16 * sizeof(float));
  cudaMemset(out, 0x7F, 16 * sizeof(float));
  try {
    all_reduce(comm, static_cast<const float*>(nullptr), out, 16, op::sum{}, cudaStream_t{});
    FAIL("no error");
  } catch (const error& e) {
    CHECK_EQ(e.code(), errc::invalid_argument);
    CHECK_EQ(e.rank(), 1);
    CHECK(std::string(e.what()).find("'send'") != std::string::npos);
  }
  try {
    broadcast(comm, out, out, 16, 2, cudaStream_t{});
    FAIL("no error");
  } catch (const error& e) {
    CHECK(std::string(e.what()).find("'root'") != std::string::npos);
  }
  CHECK_THROWS_AS(communicator<transport::nvlink>(w, 2), error);
  std::vector<unsigned char> bytes(16 * sizeof(float));
  cudaMemcpy(bytes.data(), out, bytes.size(), cudaMemcpyDeviceToHost);
  for (unsigned char b : bytes) CHECK_EQ(b, 0x7F);
  cudaFree(out);
}

namespace {
struct scale_bias {
  float scale, bias;
  __host__ __device__ float operator()(float x) const { return x * scale + bias; }
};
}  // namespace

TEST_CASE("a user epilogue runs inside the kernel, once per final element") {
  for (int n : {3, 4}) {
    gpu::world w(n);
    const op::with_epilogue eop{op::sum{}, scale_bias{2.f, 1.f}};
    for (index_t count : {index_t{1}, index_t{4099}, index_t{100000}}) {
      INFO("n=", n, " count=", count, " seed=", fresh_seed());
      // The reference applies the same epilogue on the host (exact for these small integers).
      CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w, case_config{n, count, 0, false}, eop)), "");
      CHECK_EQ((run_case<kind::all_reduce, algo::tree, float>(w, case_config{n, count, 0, true}, eop)), "");
      CHECK_EQ((run_case<kind::all_reduce, algo::two_shot, float>(w, case_config{n, count, 0, false}, eop)), "");
      CHECK_EQ((run_case<kind::reduce_scatter, algo::ring, float>(w, case_config{n, count, 0, false}, eop)), "");
    }
  }
}

// The call's tuning (collcomm/tuning.hpp): fewer channels and smaller slots than the world's, for
// each protocol, one after the other on one world; a tuning above the world's is refused before
// anything is enqueued, naming the option and the rank.
TEST_CASE("tuning at the call site: fewer channels and smaller slots than the world's; more refused") {
  using nvl = transport::nvlink;
  gpu::options o;
  o.channels = 4;
  o.slot_bytes = 1 << 16;
  gpu::world w(3, {}, o);
  using one_small = tuning<protocol::simple, 1, 4096>;
  using two_ll = tuning<protocol::ll, 2, 8192>;
  using three_mid = tuning<protocol::simple, 3, 16384>;
  for (index_t count : {index_t{1}, index_t{1031}, index_t{200003}}) {
    INFO("count=", count, " seed=", fresh_seed());
    CHECK_EQ((run_api_case<kind::all_reduce, algo::ring, float, op::sum, nvl, one_small>(
                 w, case_config{3, count, 0, false}, op::sum{}, 3)),
             "");
    CHECK_EQ((run_api_case<kind::all_reduce, algo::ring, float, op::sum, nvl, two_ll>(
                 w, case_config{3, count, 0, false}, op::sum{}, 3)),
             "");
    CHECK_EQ((run_api_case<kind::all_reduce, algo::tree, float, op::sum, nvl, three_mid>(
                 w, case_config{3, count, 0, true}, op::sum{}, 3)),
             "");
    CHECK_EQ((run_api_case<kind::all_gather, algo::ring, float, op::none, nvl, one_small>(
                 w, case_config{3, count, 0, false}, op::none{}, 3)),
             "");
    CHECK_EQ((run_case<kind::all_reduce, algo::ring, float>(w, case_config{3, count, 0, false}, op::sum{}, false, 2)),
             "");
  }

  communicator<transport::nvlink> comm(w, 2);
  float *in = nullptr, *out = nullptr;
  cudaMalloc(&in, 64 * sizeof(float));
  cudaMalloc(&out, 64 * sizeof(float));
  cudaMemset(out, 0x7F, 64 * sizeof(float));
  auto refused = [&](auto call, const char* option) {
    try {
      call();
      FAIL("no error for a tuning above the world's ", option);
    } catch (const error& e) {
      CHECK_EQ(e.code(), errc::invalid_argument);
      CHECK_EQ(e.rank(), 2);
      CHECK_MESSAGE(std::string(e.what()).find(option) != std::string::npos, e.what());
    }
  };
  refused([&] { all_reduce<algo::ring, tuning<protocol::simple, 5>>(comm, in, out, 64, op::sum{}, cudaStream_t{}); },
          "'channels' = 4");
  refused(
      [&] { all_reduce<algo::ring, tuning<protocol::ll, 0, 1 << 17>>(comm, in, out, 64, op::sum{}, cudaStream_t{}); },
      "'slot_bytes' = 65536");
  refused([&] { all_reduce<algo::ring, tuning<protocol::ll, 0, 16>>(comm, in, out, 64, op::sum{}, cudaStream_t{}); },
          "too small");
  cudaDeviceSynchronize();
  std::vector<unsigned char> bytes(64 * sizeof(float));
  cudaMemcpy(bytes.data(), out, bytes.size(), cudaMemcpyDeviceToHost);
  for (unsigned char b : bytes) CHECK_EQ(b, 0x7F);
  cudaFree(in);
  cudaFree(out);
}

// Ranks of one GPU launch a call together, so calls that disagree are refused before the launch
// on every rank of the GPU, naming the rank, both calls and what differs: the tuning (channels),
// the algorithm, the op, the count (direct algorithms too), the root, the collective. Nothing is
// enqueued, the outputs stay as they were, and the next agreeing call works.
TEST_CASE("ranks of one GPU that disagree about a call: refused on every rank, naming what differs") {
  const int n = 3;
  const index_t count = 4099;
  gpu::options o;
  o.channels = 4;
  gpu::world w(n, {}, o);
  using comm_t = communicator<transport::nvlink>;
  struct scenario {
    const char* differs;  // "the ranks disagree on the <differs>"
    int odd;              // the rank that calls differently
    void (*call)(comm_t&, const float*, float*, index_t, cudaStream_t);
    void (*odd_call)(comm_t&, const float*, float*, index_t, cudaStream_t);
  };
  const scenario scenarios[] = {
      {"tuning", 1,
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) {
         all_reduce<algo::ring>(c, i, o, k, op::sum{}, s);
       },
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) {
         all_reduce<algo::ring, tuning<protocol::simple, 2>>(c, i, o, k, op::sum{}, s);
       }},
      {"algorithm", 2,
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) {
         all_reduce<algo::ring>(c, i, o, k, op::sum{}, s);
       },
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) {
         all_reduce<algo::tree>(c, i, o, k, op::sum{}, s);
       }},
      {"op", 0,
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) {
         all_reduce<algo::ring>(c, i, o, k, op::sum{}, s);
       },
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) {
         all_reduce<algo::ring>(c, i, o, k, op::max{}, s);
       }},
      {"count", 1,
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) {
         all_reduce<algo::one_shot>(c, i, o, k, op::sum{}, s);
       },
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) {
         all_reduce<algo::one_shot>(c, i, o, k - 1, op::sum{}, s);
       }},
      {"count", 2,
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) {
         all_reduce<algo::two_shot>(c, i, o, k, op::sum{}, s);
       },
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) {
         all_reduce<algo::two_shot>(c, i, o, k / 2, op::sum{}, s);
       }},
      {"root", 1,
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) { broadcast<algo::ring>(c, i, o, k, 0, s); },
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) { broadcast<algo::ring>(c, i, o, k, 1, s); }},
      {"collective", 2,
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) {
         all_reduce<algo::ring>(c, i, o, k, op::sum{}, s);
       },
       [](comm_t& c, const float* i, float* o, index_t k, cudaStream_t s) { broadcast<algo::ring>(c, i, o, k, 0, s); }},
  };
  constexpr std::size_t ns = std::size(scenarios);
  std::vector<std::vector<std::string>> errors(ns, std::vector<std::string>(n));
  std::vector<int> wrong(n, 0), untouched(n, 0);
  std::mt19937_64 g(fresh_seed());
  std::vector<std::vector<float>> x(n, std::vector<float>(count));
  std::vector<float> want(count, 0.0f);
  for (int r = 0; r < n; ++r)
    for (index_t i = 0; i < count; ++i) {
      x[static_cast<std::size_t>(r)][i] = static_cast<float>(static_cast<int>(g() % 33) - 16);
      want[i] += x[static_cast<std::size_t>(r)][i];
    }
  on_ranks(w, [&](comm_t& comm, std::barrier<>& sync_point) {
    const int r = comm.rank();
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *in = nullptr, *out = nullptr;
    cudaMalloc(&in, count * sizeof(float));
    cudaMalloc(&out, count * sizeof(float));
    cudaMemcpy(in, x[static_cast<std::size_t>(r)].data(), count * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(out, 0x7F, count * sizeof(float));
    cudaDeviceSynchronize();
    sync_point.arrive_and_wait();
    for (std::size_t k = 0; k < ns; ++k) {
      try {
        (r == scenarios[k].odd ? scenarios[k].odd_call : scenarios[k].call)(comm, in, out, count, s);
      } catch (const error& e) {
        errors[k][static_cast<std::size_t>(r)] = e.what();
      }
    }
    cudaStreamSynchronize(s);
    std::vector<unsigned char> bytes(count * sizeof(float));
    cudaMemcpy(bytes.data(), out, bytes.size(), cudaMemcpyDeviceToHost);
    untouched[static_cast<std::size_t>(r)] =
        std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0x7F; });
    sync_point.arrive_and_wait();
    all_reduce<algo::ring>(comm, in, out, count, op::sum{}, s);  // all agree: runs
    cudaStreamSynchronize(s);
    comm.check();
    std::vector<float> got(count);
    cudaMemcpy(got.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost);
    for (index_t i = 0; i < count; ++i) wrong[static_cast<std::size_t>(r)] += got[i] != want[i];
    sync_point.arrive_and_wait();
    cudaFree(in);
    cudaFree(out);
    cudaStreamDestroy(s);
  });
  for (std::size_t k = 0; k < ns; ++k)
    for (int r = 0; r < n; ++r) {
      const std::string& e = errors[k][static_cast<std::size_t>(r)];
      CAPTURE(k);
      CAPTURE(r);
      CAPTURE(e);
      CHECK(e.find(std::string("the ranks disagree on the ") + scenarios[k].differs) != std::string::npos);
      CHECK(e.find("rank " + std::to_string(scenarios[k].odd) + "'s ") != std::string::npos);
    }
  for (int r = 0; r < n; ++r) {
    CAPTURE(r);
    CHECK(untouched[static_cast<std::size_t>(r)] == 1);
    CHECK(wrong[static_cast<std::size_t>(r)] == 0);
  }
}
