// expect-error: collcomm op axis: bit_and, bit_or and bit_xor need an integer element
// Through the public host API: the element type comes from the pointers, the op from the argument.
#include <collcomm/host.hpp>

namespace cc = collcomm;

void api_bit_xor_float(cc::communicator<cc::transport::host_shm>& comm, const float* send, float* recv) {
  cc::all_reduce(comm, send, recv, 16, cc::op::bit_xor{});
}
