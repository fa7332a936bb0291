// 02_all_reduce_gpu — the demo on the GPU: a real all_reduce(sum) of random f32 data among
// several ranks, each rank a thread of this process with its own stream, spread over the visible
// GPUs (several ranks share a GPU when there are more ranks than GPUs), once per algorithm, each
// result checked element by element against a float64 reference. Exits 1 if any element is
// wrong, 77 if there is no GPU (scripts/demo then runs 01_all_reduce on the host executor).
//
//   collcomm_example_02_all_reduce_gpu [--ranks N] [--count C]
#include <collcomm/gpu.hpp>  // the GPU executor, the collectives and every algorithm

#include <cuda_runtime.h>

#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace collcomm;

namespace {

// Runs all_reduce<Algo> once on every rank; returns the largest error against `want` and the
// time of the slowest rank (µs).
template <class Algo>
double run(gpu::world& w, const std::vector<std::vector<float>>& x, const std::vector<double>& want, double& us) {
  const int n = w.size();
  const std::size_t count = want.size();
  std::barrier sync_point(n);
  std::vector<double> err(n, 0), time_us(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(w.device_of(r));
      communicator<transport::nvlink> comm(w, r);
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      float *send = nullptr, *recv = nullptr;
      cudaMalloc(&send, count * sizeof(float));
      cudaMalloc(&recv, count * sizeof(float));
      // Load the call's kernel before any rank launches (gpu::preload says why).
      gpu::preload(comm, [&] { all_reduce<Algo>(comm, send, recv, count, op::sum{}, s); });
      cudaMemcpy(send, x[r].data(), count * sizeof(float), cudaMemcpyHostToDevice);
      cudaMemset(recv, 0xFF, count * sizeof(float));  // NaN: an element never written shows
      cudaDeviceSynchronize();
      sync_point.arrive_and_wait();  // every rank is ready: peers' kernels wait for each other
      const auto t0 = std::chrono::steady_clock::now();
      all_reduce<Algo>(comm, send, recv, count, op::sum{}, s);
      cudaStreamSynchronize(s);
      time_us[r] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      sync_point.arrive_and_wait();
      comm.check();
      std::vector<float> got(count);
      cudaMemcpy(got.data(), recv, count * sizeof(float), cudaMemcpyDeviceToHost);
      for (std::size_t i = 0; i < count; ++i) {
        const double e = std::abs(got[i] - want[i]);
        err[r] = std::isnan(e) ? INFINITY : std::max(err[r], e);
      }
      cudaFree(send);
      cudaFree(recv);
      cudaStreamDestroy(s);
    });
  for (auto& t : threads) t.join();
  us = 0;
  double worst = 0;
  for (int r = 0; r < n; ++r) {
    us = std::max(us, time_us[r]);
    worst = std::max(worst, err[r]);
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  int ranks = 4;
  std::size_t count = std::size_t{1} << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--ranks")
      ranks = std::atoi(argv[i + 1]);
    else if (a == "--count")
      count = std::strtoull(argv[i + 1], nullptr, 10);
  }
  int ngpu = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
    std::printf("no GPU here: this demo needs one (scripts/demo runs the host executor's instead)\n");
    return 77;
  }
  std::vector<int> devices(ranks);
  for (int r = 0; r < ranks; ++r) devices[r] = r % ngpu;
  try {
    gpu::world w(ranks, devices);
    const unsigned seed = std::random_device{}();
    std::mt19937 g(seed);
    std::vector<std::vector<float>> x(ranks, std::vector<float>(count));
    std::vector<double> want(count, 0.0);
    for (auto& v : x)
      for (auto& e : v) e = std::uniform_real_distribution<float>(-1, 1)(g);
    for (int r = 0; r < ranks; ++r)
      for (std::size_t i = 0; i < count; ++i) want[i] += x[r][i];
    std::printf("all_reduce(sum) of %zu f32 among %d ranks on %d GPU(s), on the GPU executor (seed %u)\n", count, ranks,
                ngpu, seed);
    const double tol = 1e-5 * ranks;  // f32 partial sums of values in [-1, 1]
    bool ok = true;
    auto report = [&](const char* name, double err, double us) {
      const bool good = err <= tol;
      ok = ok && good;
      std::printf("  %-9s %9.1f us (one call, first launch included)   max |error| vs float64: %.3g  %s\n", name, us,
                  err, good ? "ok" : "WRONG");
    };
    double us = 0, err = 0;
    err = run<algo::ring>(w, x, want, us);
    report("ring", err, us);
    err = run<algo::tree>(w, x, want, us);
    report("tree", err, us);
    err = run<algo::two_shot>(w, x, want, us);
    report("two_shot", err, us);
    err = run<algo::one_shot>(w, x, want, us);
    report("one_shot", err, us);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
