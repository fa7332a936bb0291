// expect-error: collcomm transport axis: this algorithm loads and stores peers' buffers
// Through the public GPU API: one_shot loads its peers' buffers, and transport::pcie_staged (every
// connection staged through host memory) carries FIFO messages only. The call must stop at
// check_composition's message, not somewhere deep in the kernel.
#include <collcomm/gpu.hpp>

namespace cc = collcomm;

void one_shot_over_pcie_staged(cc::communicator<cc::transport::pcie_staged>& comm, const float* send, float* recv,
                               cudaStream_t stream) {
  cc::all_reduce<cc::algo::one_shot>(comm, send, recv, 16, cc::op::sum{}, stream);
}
