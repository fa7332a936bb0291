// bench/compile_cost/one_composition.cu — the smallest program a user of collcomm's GPU executor
// writes: one composition (ring all_reduce of f32 with sum over nvlink among ranks of one GPU).
// bench/scripts/compile_cost.sh compiles it and reports the compile time and the binary's size.
#include <collcomm/gpu.hpp>

#include <cstdio>
#include <thread>
#include <vector>

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no GPU\n");
    return 0;
  }
  const int n = 2;
  const collcomm::index_t count = 1 << 20;
  collcomm::gpu::world w(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      collcomm::communicator<collcomm::transport::nvlink> comm(w, r);
      float* buf = nullptr;
      cudaMalloc(&buf, count * sizeof(float));
      cudaStream_t s;
      cudaStreamCreate(&s);
      collcomm::all_reduce<collcomm::algo::ring>(comm, buf, buf, count, collcomm::op::sum{}, s);
      cudaStreamSynchronize(s);
      comm.check();
      cudaFree(buf);
    });
  for (auto& t : ranks) t.join();
  std::printf("ok\n");
}
