// expect: compiles
// A user's .cu file, built with -Werror at -Wall -Wextra (nvcc's own warnings too): the library's headers
// add no warning. The host executor used from CUDA code, a stream wrapper that converts to
// cudaStream_t and cannot be copied, an epilogue functor of internal linkage, the GPU calls.
#include <collcomm/collcomm.hpp>
#include <cuda_runtime.h>
#include <vector>
namespace cc = collcomm;
namespace {
struct scale_by_two {  // an epilogue functor with internal linkage
  __host__ __device__ float operator()(float x) const { return 2.0f * x; }
};
class stream_wrapper {  // a framework's stream: not copyable, converts to cudaStream_t
 public:
  explicit stream_wrapper(cudaStream_t s) : s_(s) {}
  stream_wrapper(const stream_wrapper&) = delete;
  operator cudaStream_t() const { return s_; }

 private:
  cudaStream_t s_;
};
}  // namespace
void gpu_calls(cc::communicator<cc::transport::nvlink>& comm, const float* send, float* recv, cudaStream_t s) {
  stream_wrapper w(s);
  cc::all_reduce(comm, send, recv, 16, cc::op::sum{}, w);
  cc::all_reduce<cc::algo::one_shot>(comm, send, recv, 16, cc::op::with_epilogue{cc::op::sum{}, scale_by_two{}}, s);
  cc::send_recv(comm, send, recv, 16, (comm.rank() + 1) % comm.size(), (comm.rank() + comm.size() - 1) % comm.size(),
                s);
}
void host_calls() {
  cc::host::world w(2);
  std::vector<std::vector<float>> v(2, std::vector<float>(8, 1.0f));
  cc::host::run_ranks(w, [&](cc::communicator<cc::transport::host_shm>& comm) {
    cc::all_reduce<cc::algo::tree>(comm, v[comm.rank()].data(), v[comm.rank()].data(), 8);
  });
}
