// expect-error: collcomm: a GPU collective takes the stream it is ordered on as its last argument
// A GPU collective called without its stream stops at a message that says so, not at "no instance
// of function template".
#include <collcomm/gpu.hpp>

namespace cc = collcomm;

void missing_stream(cc::communicator<cc::transport::nvlink>& comm, const float* send, float* recv) {
  cc::all_reduce(comm, send, recv, 16, cc::op::sum{});
}
