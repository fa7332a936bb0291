// expect-error: collcomm algorithm axis: this algorithm has no schedule for this collective kind
// Through the public host API: all_to_all<algo::ring> must stop at check_composition's message,
// not somewhere deep in the executor.
#include <collcomm/host.hpp>

namespace cc = collcomm;

void api_ring_all_to_all(cc::communicator<cc::transport::host_shm>& comm, const float* send, float* recv) {
  cc::all_to_all<cc::algo::ring>(comm, send, recv, 16);
}
