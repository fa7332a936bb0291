// The host API over the GPU executor: communicator<transport::nvlink>, a stream per call, argument
// checks before anything is enqueued, and a user epilogue (label gpu). A failed world refusing
// later calls: test_gpu_fault.cu.
#include "gpu_harness.cuh"

#include <collcomm/algo/tree.hpp>
#include <collcomm/algo/two_shot.hpp>

#include <barrier>

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

TEST_CASE("all_reduce through the API on streams: ring, tree, two_shot, in place") {
  const int n = 4;
  const index_t count = 50001;
  gpu::world w(n);
  std::mt19937_64 g(fresh_seed());
  std::vector<std::vector<float>> x(n, std::vector<float>(count));
  for (auto& v : x) for (auto& e : v) e = static_cast<float>(static_cast<int>(g() % 201) - 100);
  std::vector<float> want(count, 0.f);
  for (int r = 0; r < n; ++r) for (index_t i = 0; i < count; ++i) want[i] += x[r][i];

  on_ranks(w, [&](communicator<transport::nvlink>& comm, std::barrier<>& sync_point) {
    const int r = comm.rank();
    gpu::preload<kind::all_reduce, algo::ring, float, op::sum>();
    gpu::preload<kind::all_reduce, algo::tree, float, op::sum>();
    gpu::preload<kind::all_reduce, algo::two_shot, float, op::sum>();
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *buf = nullptr, *out = nullptr;
    cudaMalloc(&buf, count * sizeof(float));
    cudaMalloc(&out, count * sizeof(float));
    cudaMemcpy(buf, x[r].data(), count * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(out, 0xFF, count * sizeof(float));
    sync_point.arrive_and_wait();
    all_reduce(comm, buf, out, count, op::sum{}, s);                  // ring, out of place
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
